// How list statements reach PostgreSQL's plan cache (db/postgres.ts, db/conditions.ts): a
// combination of index-backed filters is prepared once per connection and keeps one generic
// plan, never planned again; a full-text word or a time range is planned for its value on
// every call instead of being prepared. PGlite ignores prepared statement names.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Queryable } from '../src/db/database.js';
import { declaredStatements } from '../src/db/statements.js';
import { queryAuditLog } from '../src/modules/audit/audit.repository.js';
import '../src/modules/audit/integrity/evidence.repository.js';
import '../src/modules/audit/integrity/webhook.repository.js';
import '../src/modules/outbox/outbox.js';
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

/** The relations a plan reads with a sequential scan. */
function seqScans(plan: unknown): string[] {
  const node = plan as { 'Node Type'?: string; 'Relation Name'?: string; Plans?: unknown[] };
  const own = node['Node Type'] === 'Seq Scan' && node['Relation Name'] ? [node['Relation Name']] : [];
  return [...own, ...(node.Plans ?? []).flatMap(seqScans)];
}

// The background workers (sealer, webhook, outbox numbering) poll while idle: each poll asks
// "is anything past my cursor?". On a big table, a generic plan of an EXISTS over a range
// expects a third of the rows to match and scans from the table's start for the first one,
// which a caught-up cursor never finds: 190 ms and the buffer cache churned at every poll on
// a million records, which cost every request of the service a quarter of its speed. Each
// poll must be an index descent whatever the size, and the EXISTS form is checked to scan
// here, so that the table is big enough for the assertion to mean something.
describe("the workers' idle polls on big tables", { skip: needsPostgres }, () => {
  const ROWS = 200_000;
  h.before(async () => {
    if (needsPostgres) return;
    const owner = h.database.owner;
    await owner.query(
      `INSERT INTO audit_log (action, resource_type, resource_id, result, metadata, request_id)
       SELECT 'CREATE_TASK', 'TASK', g, 'SUCCESS', '{}', 'poll-' || g FROM generate_series(1, $1::int) g`,
      [ROWS],
    );
    await owner.query(
      `INSERT INTO audit_seal (seq, record_id, record_xact_id, leaf_hash)
       SELECT row_number() OVER (ORDER BY xact_id, id) - 1, id, xact_id, sha256(id::text::bytea) FROM audit_log ORDER BY xact_id, id`,
    );
    await owner.query(
      `INSERT INTO events (name, room, payload, event_id) SELECT 'task.created', 'project:1', '{}', g FROM generate_series(1, $1::int) g`,
      [ROWS],
    );
    await owner.query('VACUUM (ANALYZE) audit_log, audit_seal, events');
  });

  async function genericPlanScans(text: string, params: unknown[]): Promise<string[]> {
    return h.database.owner.transaction(async (tx) => {
      await tx.query('SET LOCAL plan_cache_mode = force_generic_plan');
      await tx.query(`PREPARE idle_poll AS ${text}`);
      const [row] = await tx.query<{ 'QUERY PLAN': Array<{ Plan: unknown }> }>(
        `EXPLAIN (FORMAT JSON) EXECUTE idle_poll${params.length ? `(${params.map((p) => (typeof p === 'number' ? String(p) : `'${String(p)}'`)).join(', ')})` : ''}`,
      );
      await tx.query('DEALLOCATE idle_poll');
      return seqScans(row!['QUERY PLAN'][0]!.Plan);
    });
  }

  const statement = (name: string) => {
    const s = declaredStatements().get(name);
    assert.ok(s, `${name} is declared`);
    return s.text;
  };

  test('the EXISTS form scans audit_log from its start (the control: the table is big enough)', async () => {
    const exists = 'SELECT EXISTS (SELECT 1 FROM audit_log WHERE (xact_id, id) > ($1::xid8, $2::bigint)) AS waiting';
    assert.deepEqual(await genericPlanScans(exists, ['999999999', 1]), ['audit_log']);
  });

  test("the sealer's, the webhook's and the outbox's polls read no big table from its start", async () => {
    assert.deepEqual(await genericPlanScans(statement('evidence.waiting'), ['999999999', 1]), []);
    // The cursor table is one row (a scan of it is its lookup); the seal and the checkpoints are read by their keys.
    assert.deepEqual(await genericPlanScans(statement('webhook.state'), ['someone', 'http://receiver.test/audit']), ['audit_webhook_cursor']);
    assert.deepEqual(await genericPlanScans(statement('outbox.waiting'), []), []);
  });
});
