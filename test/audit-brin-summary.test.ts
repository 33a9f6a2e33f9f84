// The summaries of audit_log_time_brin (migrations/0013): a block range without one is read whole
// by the id ceiling of every old created: window (docs/audit-search.md), and nothing makes them on
// PGlite (no autovacuum) or on a PostgreSQL without autovacuum. The maintenance round does, as the
// service's own role, through a function that summarizes the ranges filled since the last call and
// leaves the one being filled alone. Here the index's autosummarize is off, so that PostgreSQL's
// autovacuum (where it runs) does not race the round: both databases start as PGlite always is.
//
// Planted records carry 1,500 characters of metadata (stored inline), about 150 to a 32-page
// range, hourly from 2001: 1,200 of them fill eight ranges. Counts of ranges are worked out from
// the table's size, never assumed.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { idCeiling, summarizeAuditTimeIndex } from '../src/modules/audit/audit.repository.js';
import { runMaintenance } from '../src/ops/maintenance.js';
import { committed } from './helpers/audit-log.js';
import { explainingTx, planNodes, topPlanNode, type PlanNode } from './helpers/explain.js';
import { useTestDatabase } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';

const h = useTestDatabase();
const PAGES_PER_RANGE = 32;
let planted = 0;

/** `n` records, hourly from 2001-01-01 on from the last one planted, with the stamping trigger down. */
async function plant(n: number) {
  const from = planted;
  planted += n;
  await committed(h.database.owner, (q) =>
    q.query(
      `INSERT INTO audit_log (action, resource_type, resource_id, "timestamp", result, metadata, request_id)
       SELECT 'CREATE_TASK', 'TASK', i, timestamptz '2001-01-01 00:00:00+00' + i * interval '1 hour', 'SUCCESS',
              jsonb_build_object('pad', repeat('x', 1500)), 'brin-summary-' || i
         FROM generate_series($1::int, $2::int - 1) i`,
      [from, planted],
    ),
  );
}

/** The table's pages, and its filled ranges: those wholly below its last page (the one being filled holds it). */
async function blockRanges() {
  const [row] = await h.database.owner.query<{ pages: number }>(`SELECT (pg_relation_size('audit_log') / current_setting('block_size')::int)::int AS pages`);
  const pages = row!.pages;
  return { pages, filled: Math.floor((pages - 1) / PAGES_PER_RANGE) };
}

const one = async (sql: string, params: unknown[] = []) => (await h.database.owner.query<{ n: number | null }>(sql, params))[0]!.n;

/**
 * The heap blocks that the id ceiling of created:<2001-01-20 reads past its first guess (the
 * records above it, through a bitmap), and the indexes of that bitmap: run as the service runs it,
 * with that one statement EXPLAINed (ANALYZE) in place.
 */
async function ceilingRead(): Promise<{ blocks: number; indexes: string[] }> {
  let plan: PlanNode | undefined;
  await h.database.db.transaction(
    async (tx) => {
      const explaining = explainingTx(tx, (sql) => sql.includes('max(id)'), (_, explained) => (plan = topPlanNode(explained)), true);
      await idCeiling(explaining, [{ to: { at: '2001-01-20T00:00:00Z', inclusive: false } }]);
    },
    { planEachStatement: true },
  );
  assert.ok(plan, 'the ceiling asks for ids past its first guess');
  const nodes = planNodes(plan);
  return {
    blocks: nodes.reduce((sum, n) => sum + (n['Exact Heap Blocks'] ?? 0) + (n['Lossy Heap Blocks'] ?? 0), 0),
    indexes: nodes.flatMap((n) => (n['Index Name'] ? [n['Index Name']] : [])),
  };
}

h.before(async () => {
  await h.database.owner.query('ALTER INDEX audit_log_time_brin SET (autosummarize = off)');
  await plant(1200);
  await h.database.owner.query('ANALYZE audit_log');
});

describe('the summaries of the audit log\'s BRIN (audit_summarize_time_index)', () => {
  test('a maintenance round, as the service\'s role, summarizes every range filled since, and the id ceiling then reads only the ranges around its window\'s end', async () => {
    const { pages, filled } = await blockRanges();
    assert.ok(filled >= 6, `the planted records fill several ranges (${pages} pages)`);
    // Before: every range past the one CREATE INDEX summarized is read, whatever it holds.
    const before = await ceilingRead();
    assert.deepEqual([...new Set(before.indexes)], ['audit_log_time_brin'], 'the records past the guess are found through the BRIN');
    assert.ok(before.blocks >= pages - 2 * PAGES_PER_RANGE, `before: ${before.blocks} of ${pages} heap blocks read`);

    await runMaintenance(h.database.db, 24);

    // The range of the window's end (and the next, if the end is near its edge), and the one being filled.
    const after = await ceilingRead();
    assert.deepEqual([...new Set(after.indexes)], ['audit_log_time_brin']);
    assert.ok(after.blocks <= 3 * PAGES_PER_RANGE, `after: ${after.blocks} heap blocks read (before: ${before.blocks})`);
    // Nothing left for the next call, and every filled range has its summary…
    assert.equal(await one('SELECT audit_summarize_time_index() AS n'), 0);
    const missing = `SELECT count(*) FILTER (WHERE brin_summarize_range('audit_log_time_brin', r * ${PAGES_PER_RANGE}) > 0)::int AS n
                       FROM generate_series(0, $1::int - 1) r`;
    assert.equal(await one(missing, [filled]), 0, 'a filled range the round left without a summary');
    // …but the range being filled has none: each insert into it would widen it (a BRIN write per record).
    assert.equal(await one(`SELECT brin_summarize_new_values('audit_log_time_brin') AS n`), 1);
  });

  test('answers how many ranges it summarized: the ranges filled since, newest first down to one summarized before', async () => {
    const before = await blockRanges();
    await plant(500);
    const after = await blockRanges();
    // The range that was being filled got its summary above (brin_summarize_new_values).
    const expected = after.filled - (before.filled + 1);
    assert.ok(expected >= 2, `${before.pages} then ${after.pages} pages`);
    assert.equal(await summarizeAuditTimeIndex(h.database.db), expected);
    assert.equal(await summarizeAuditTimeIndex(h.database.db), 0);
  });

  test('the service\'s role may call it but not brin_summarize_new_values, PUBLIC may not, and it answers null at once while the table is held', { skip: needsPostgres }, async () => {
    const { db, owner } = h.database;
    await assert.rejects(db.query(`SELECT brin_summarize_new_values('audit_log_time_brin')`), /must be owner of index audit_log_time_brin/);
    assert.equal(await summarizeAuditTimeIndex(db), 0);
    const [who] = await owner.query<{ app: boolean; anyone: boolean }>(
      `SELECT has_function_privilege('teamlog_app', 'audit_summarize_time_index()', 'EXECUTE') AS app,
              has_function_privilege('public', 'audit_summarize_time_index()', 'EXECUTE') AS anyone`,
    );
    assert.deepEqual(who, { app: true, anyone: false });
    // A VACUUM (or another instance summarizing) holds SHARE UPDATE EXCLUSIVE: the call does not wait behind it.
    await owner.transaction(async (tx) => {
      await tx.query('LOCK TABLE audit_log IN SHARE UPDATE EXCLUSIVE MODE');
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<'waited'>((resolve) => (timer = setTimeout(() => resolve('waited'), 5000)));
      assert.equal(await Promise.race([summarizeAuditTimeIndex(db), waited]), null);
      clearTimeout(timer);
    });
  });
});
