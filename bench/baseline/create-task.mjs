// POST /tasks as both baselines serve it (bench/baseline/server.mjs on Teamlog's schema,
// bench/baseline/bare.mjs on two bare tables): the task and its audit record in one
// transaction, as Teamlog writes them, and nothing else: no auth, no validation, plain
// JSON.stringify. One handler for both, so that the two baselines differ only in their tables.

/** The route handler: inserts a task (answering `columns` of it) and its CREATE_TASK audit record, as user `userId`. */
export function createTaskHandler(pool, userId, columns) {
  return async (request, reply) => {
    const body = request.body;
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const task = (await client.query(
        `INSERT INTO tasks (project_id, title, description, assignee_id, created_by) VALUES ($1, $2, $3, $4, $5) RETURNING ${columns}`,
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
  };
}
