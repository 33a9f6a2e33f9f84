// The commit-order reader's cost must not grow with its table (db/commit-order.ts). Without
// statistics (before the first ANALYZE; autovacuum may be off, and PGlite runs none) PostgreSQL
// guesses that a third of a table matches a one-sided range on xact_id, and read the primary
// key from the start to find `limit` rows in id order: every row of the outbox on every batch
// of the relay, and every audit record on every batch of the sealer. Here both tables hold
// 60,000 rows that were never analyzed, a consumer stands after all of them, and three rows
// commit after that: a batch must return those three, and look at few rows to find them. Then
// the same once the tables were analyzed, their statistics saying one transaction wrote them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { declaredStatements } from '../src/db/statements.js';
import { NOTHING_CONSUMED, parseSnapshot, xactCeiling, type CommittedReader, type PositionColumns } from '../src/db/commit-order.js';
import type { Database } from '../src/db/database.js';
import { committedRecords } from '../src/modules/audit/evidence/evidence.repository.js';
import { committedOutbox } from '../src/modules/outbox/outbox.repository.js';
import { planNodes, topPlanNode, type PlanNode } from './helpers/explain.js';
import { useTestDatabase } from './helpers/harness.js';

const h = useTestDatabase();
const ROWS = 60_000;

/** Rows of `table` the plan's scans produced or threw away (what it looked at), from EXPLAIN ANALYZE. */
function rowsLookedAt(plan: PlanNode, table: string): number {
  return planNodes(plan)
    .filter((n) => n['Relation Name'] === table)
    .reduce((sum, n) => sum + ((n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Index Recheck'] ?? 0)) * (n['Actual Loops'] ?? 1), 0);
}

/** A consumer that has taken every row visible in `snapshot`. */
const standingAt = (snapshot: string): PositionColumns => ({
  after_snapshot: NOTHING_CONSUMED, after_xact: null, after_id: null, snapshot, through_id: null,
});

async function fill(owner: Database) {
  for (const table of ['audit_log', 'outbox']) await owner.exec(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
  await owner.query(
    `INSERT INTO audit_log (action, resource_type, resource_id, result, metadata, request_id)
     SELECT 'CREATE_TASK', 'TASK', g, 'SUCCESS', '{}', 'fill-' || g FROM generate_series(1, $1::int) g`,
    [ROWS],
  );
  await owner.query(`INSERT INTO outbox (items) SELECT '[]'::json FROM generate_series(1, $1::int)`, [ROWS]);
}

async function checkReader(reader: CommittedReader<unknown>, table: string, statement: string, insertOne: (i: number) => Promise<void>) {
  const owner = h.database.owner;
  const [{ snap } = { snap: '' }] = await owner.query<{ snap: string }>('SELECT pg_current_snapshot()::text AS snap');
  for (let i = 1; i <= 3; i++) await insertOne(i);
  const [{ newest } = { newest: 0 }] = await owner.query<{ newest: number }>(`SELECT max(id)::int AS newest FROM ${table}`);

  const batch = await reader.next(owner, standingAt(snap), 500);
  assert.deepEqual(batch.rows.map((r) => r.id), [newest - 2, newest - 1, newest], 'the batch is the three rows committed after the position');

  // The same statement with the same values, under EXPLAIN ANALYZE, in a transaction of the
  // kind the background loops run theirs in (background/background-loop.ts: exclusiveRound).
  const { xmax, xip } = parseSnapshot(snap);
  const params = [`{${xip.join(',')}}`, xmax, xactCeiling(xmax), 500];
  const plan = await owner.transaction(async (tx) => {
    await tx.query(`PREPARE reader_look AS ${declaredStatements().get(statement)!.text}`);
    const [row] = await tx.query<{ 'QUERY PLAN': unknown }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE reader_look(${params.map((p) => `'${String(p)}'`).join(', ')})`,
    );
    await tx.query('DEALLOCATE reader_look');
    return topPlanNode(row!['QUERY PLAN']);
  }, { planEachStatement: true });
  const lookedAt = rowsLookedAt(plan, table);
  assert.ok(lookedAt < 100, `the batch looked at ${lookedAt} rows of ${table} to find 3: ${JSON.stringify(plan)}`);
}

const lateRecord = (i: number) => async () => {
  await h.database.owner.query(`INSERT INTO audit_log (action, resource_type, result, metadata, request_id) VALUES ('CREATE_TASK', 'TASK', 'SUCCESS', '{}', $1)`, [`late-${i}`]);
};
const lateEvent = async () => {
  await h.database.owner.query(`INSERT INTO outbox (items) VALUES ('[]'::json)`);
};

test('on tables never analyzed, a batch of 3 rows after 60,000 reads those 3, not the table (the sealer\'s reader, on audit_log)', async () => {
  await fill(h.database.owner);
  await checkReader(committedRecords, 'audit_log', 'audit-reader.committedAfterSnapshot', (i) => lateRecord(i)());
});

test('the same for the relay\'s reader, on the outbox', async () => {
  await checkReader(committedOutbox, 'outbox', 'outbox-reader.committedAfterSnapshot', lateEvent);
});

// Statistics that say one transaction wrote nearly every row (a seeded database, or one whose
// rows a migration converted) make PostgreSQL take `xact_id = ANY ($1)` for the whole table on a
// plan made without the values; planned for the values, an empty list matches nothing.
test('analyzed after one transaction wrote the 60,000 rows, the same holds for both readers', async () => {
  await h.database.owner.exec('ANALYZE audit_log, outbox');
  await checkReader(committedRecords, 'audit_log', 'audit-reader.committedAfterSnapshot', (i) => lateRecord(10 + i)());
  await checkReader(committedOutbox, 'outbox', 'outbox-reader.committedAfterSnapshot', lateEvent);
});
