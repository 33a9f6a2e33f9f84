// GET /tasks as both baselines serve it (bench/baseline/server.mjs on Teamlog's schema,
// bench/baseline/bare.mjs on its bare tables): the list query as Teamlog sends it for a member
// with no filters (the tasks of their projects, newest first, one more than the page to know
// whether a next one exists), and nothing else: no auth, no validation, plain JSON.stringify.

/** The route handler: user `userId`'s page of tasks (`columns` of each). */
export function listTasksHandler(pool, userId, columns) {
  return async (request, reply) => {
    const limit = Number(request.query.limit ?? 20);
    const rows = (await pool.query(
      `SELECT ${columns} FROM tasks
        WHERE project_id = ANY (ARRAY(SELECT project_id FROM project_members WHERE user_id = $1))
        ORDER BY id DESC LIMIT $2`,
      [userId, limit + 1],
    )).rows;
    reply.header('content-type', 'application/json');
    return JSON.stringify({ data: rows.slice(0, limit), next_cursor: rows.length > limit ? String(rows[limit - 1].id) : null });
  };
}
