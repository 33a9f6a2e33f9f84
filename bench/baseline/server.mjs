// The baseline: a deliberately bare Fastify + node-postgres server doing the same database
// work as Teamlog for POST /tasks (task + audit row in one transaction) and GET /tasks
// (the same list query, as Teamlog sends it for a member with no filters): no auth, no
// validation, no hooks, no prepared statements, plain JSON.stringify.
// Measured in the same run as Teamlog so the ratio means something on any machine.
import Fastify from 'fastify';
import pg from 'pg';

pg.types.setTypeParser(20, Number);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DATABASE_POOL_SIZE ?? 10) });
const userId = Number(process.env.BENCH_USER_ID);
const app = Fastify({ logger: false });
const COLUMNS = 'id, project_id, title, description, status, assignee_id, created_by, created_at, updated_at';

app.post('/tasks', async (request, reply) => {
  const body = request.body;
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const task = (await client.query(
      `INSERT INTO tasks (project_id, title, description, assignee_id, created_by) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
      [body.project_id, body.title, body.description ?? '', body.assignee_id ?? null, userId],
    )).rows[0];
    await client.query(
      `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
       VALUES ($1, 'CREATE_TASK', 'TASK', $2, 'SUCCESS', $3, $4, $5, $6)`,
      [userId, task.id, JSON.stringify({ projectId: task.project_id, title: task.title, assigneeId: task.assignee_id }), request.ip, request.headers['user-agent'] ?? null, String(request.id)],
    );
    await client.query('COMMIT');
    reply.code(201).header('content-type', 'application/json');
    return JSON.stringify(task);
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  } finally {
    client.release();
  }
});

app.get('/tasks', async (request, reply) => {
  const limit = Number(request.query.limit ?? 20);
  const rows = (await pool.query(
    `SELECT ${COLUMNS} FROM tasks
      WHERE project_id = ANY (ARRAY(SELECT project_id FROM project_members WHERE user_id = $1))
      ORDER BY id DESC LIMIT $2`,
    [userId, limit + 1],
  )).rows;
  reply.header('content-type', 'application/json');
  return JSON.stringify({ data: rows.slice(0, limit), next_cursor: rows.length > limit ? String(rows[limit - 1].id) : null });
});

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', async () => {
  await app.close();
  await pool.end();
  process.exit(0);
});
