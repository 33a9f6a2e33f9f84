// The bare app: POST /tasks on a database of its own holding only two tables, tasks and
// audit_log, with primary keys and nothing else (no other index, no trigger, no foreign key;
// bench/run.mjs creates them), and GET /tasks, the same list as the same-schema baseline's over
// a copy of the seeded tasks and memberships (primary keys only). It inserts a task and its audit record in one transaction with
// the same handler as the same-schema baseline (bench/baseline/create-task.mjs), so the gap
// between the two is what Teamlog's schema costs (its indexes, triggers and constraints), and
// the gap between this and Teamlog is everything.
import Fastify from 'fastify';
import pg from 'pg';
import { createTaskHandler } from './create-task.mjs';
import { listTasksHandler } from './list-tasks.mjs';

pg.types.setTypeParser(20, Number);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DATABASE_POOL_SIZE ?? 10) });
const userId = Number(process.env.BENCH_USER_ID);
const app = Fastify({ logger: false });
// The list's columns are Teamlog's (status and updated_at take their defaults on a POST).
const COLUMNS = 'id, project_id, title, description, status, assignee_id, created_by, created_at, updated_at';

app.post('/tasks', createTaskHandler(pool, userId, COLUMNS));
// The list, on copies of the seeded tasks and memberships (bench/run.mjs createBareDatabase).
app.get('/tasks', listTasksHandler(pool, userId, COLUMNS));

// The benchmark's readiness probe: answers once the database does.
app.get('/health', async () => (await pool.query('SELECT 1'), 'ok'));

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', async () => {
  await app.close();
  await pool.end();
  process.exit(0);
});
