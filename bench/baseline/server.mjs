// The baseline: a deliberately bare Fastify + node-postgres server doing the same database
// work as Teamlog for POST /tasks (task + audit row in one transaction) and GET /tasks
// (the same list query, as Teamlog sends it for a member with no filters): no auth, no
// validation, no hooks, no prepared statements, plain JSON.stringify.
// Measured in the same run as Teamlog so the ratio means something on any machine.
import Fastify from 'fastify';
import pg from 'pg';
import { createTaskHandler } from './create-task.mjs';
import { listTasksHandler } from './list-tasks.mjs';

pg.types.setTypeParser(20, Number);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DATABASE_POOL_SIZE ?? 10) });
const userId = Number(process.env.BENCH_USER_ID);
const app = Fastify({ logger: false });
const COLUMNS = 'id, project_id, title, description, status, assignee_id, created_by, created_at, updated_at';

app.post('/tasks', createTaskHandler(pool, userId, COLUMNS));

app.get('/tasks', listTasksHandler(pool, userId, COLUMNS));

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', async () => {
  await app.close();
  await pool.end();
  process.exit(0);
});
