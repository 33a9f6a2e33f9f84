// How list statements reach PostgreSQL's plan cache (db/postgres.ts, db/conditions.ts): a
// combination of index-backed filters is prepared once per connection and keeps one generic
// plan, never planned again; a full-text word or a time range is planned for its value on
// every call instead of being prepared. PGlite ignores prepared statement names.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Queryable } from '../src/db/database.js';
import { queryAuditLog } from '../src/modules/audit/audit.repository.js';
import { listTasks } from '../src/modules/tasks/tasks.repository.js';
import { useTestDatabase } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';

const h = useTestDatabase();

interface Prepared {
  name: string;
  generic_plans: number;
  custom_plans: number;
}

/** This connection's prepared list statements and how often each plan kind was used. */
function preparedLists(q: Queryable): Promise<Prepared[]> {
  return q.query<Prepared>(
    `SELECT name, generic_plans::int, custom_plans::int FROM pg_prepared_statements
      WHERE name LIKE 'tasks\\_list\\_%' OR name LIKE 'audit\\_list\\_%' ORDER BY name`,
  );
}

describe('list statements and the plan cache', { skip: needsPostgres }, () => {
  test('one combination of filters is prepared once and runs on one generic plan, whatever the values', async () => {
    await h.database.db.transaction(async (tx) => {
      for (let i = 1; i <= 8; i++) await listTasks(tx, { memberId: null, project_id: i, status: i % 2 ? 'TODO' : 'DONE' }, undefined, 10 * i);
      for (let i = 1; i <= 8; i++) await queryAuditLog(tx, { actor_id: i }, undefined, 5 * i);
      const prepared = await preparedLists(tx);
      assert.deepEqual(prepared.map((p) => [p.generic_plans, p.custom_plans]), [[8, 0], [8, 0]], JSON.stringify(prepared));
      assert.equal(prepared.length, 2, 'one statement per combination, not per value');
    });
  });

  test('a full-text word or a time range is planned for its value on each call, never prepared', async () => {
    await h.database.db.transaction(async (tx) => {
      // The connection may hold statements prepared by an earlier test: none may be added.
      const before = await preparedLists(tx);
      for (const word of ['alpha', 'beta', 'gamma']) await listTasks(tx, { memberId: null, q: word, status: 'TODO' }, undefined, 50);
      await queryAuditLog(tx, { actor_id: 1, from: '2026-01-01T00:00:00Z' }, undefined, 50);
      await queryAuditLog(tx, { to: '2026-01-01T00:00:00Z' }, undefined, 50);
      assert.deepEqual(await preparedLists(tx), before);
    });
  });
});
