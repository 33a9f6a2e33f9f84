// The id ceiling of created: windows (docs/audit-search.md, "Old created windows"): the list of
// a search whose windows are all bounded above starts its walk back by id at the highest id
// inside them, found through audit_log_timestamp_idx and then the BRIN on ("timestamp", id)
// (migrations/0012). Ids and timestamps are nearly in the same order, not strictly, so that
// ceiling must be exact. Here records are planted behind the service's back with timestamps a
// year ago in id order, and stragglers among them: records with a high id and a timestamp inside
// an early window, one in a block range BRIN has summarized, one in a range it has not, each far
// from the ranges where their window ends. Every list must return exactly the ids the table
// holds for its window (worked out here from the rows), page after page; the ceiling must be the
// window's max(id); and PostgreSQL must read the BRIN's bitmap for it.
//
// Block ranges: the index has 32 pages a range. Planted records carry 1,500 characters of
// metadata (stored inline: under the size at which PostgreSQL compresses or moves a value out),
// so a range holds about 150 of them and the 1,200 planted here fill eight ranges, where thin rows
// would need ten times as many records (and the sealer ten times the work) for the same layout.
// The test checks the layout it relies on from the rows' ctid rather than assuming it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Queryable } from '../src/db/database.js';
import { idCeiling, queryAuditLogUnderCeiling } from '../src/modules/audit/audit.repository.js';
import type { BoundedRange } from '../src/modules/audit/audit.search.js';
import { committed } from './helpers/audit-log.js';
import { explainingTx } from './helpers/explain.js';
import type { AuditRecordBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();
const PAGES_PER_RANGE = 32;
const HOUR_US = 3_600_000_000;
const START = Date.parse('2001-01-01T00:00:00Z') * 1000;
/** Planted records i = 0 … 1199, record i at START + i hours, but for the stragglers. */
const PLANTED = 1200;
/** Stragglers: a high id, a timestamp far back (the clock stepped back, or a late insert). */
const STRAGGLERS = new Map<number, string>([
  [600, '2001-01-05T06:00:00.25Z'], // written before BRIN summarizes its range
  [1100, '2001-01-12T00:00:00Z'], // written after: its range is not summarized
  [1101, '2001-01-12T00:00:00Z'], // the same instant, an id above it
]);

interface Row {
  id: number;
  action: string;
  request_id: string;
  micros: number;
  block: number;
}

const us = (iso: string) => Date.parse(iso) * 1000;

/** Planted records [from, to), as one statement, with the stamping trigger and the guards down. */
async function plant(q: Queryable, from: number, to: number) {
  const at = Array.from({ length: to - from }, (_, k) => {
    const i = from + k;
    return STRAGGLERS.get(i) ?? new Date((START + i * HOUR_US) / 1000).toISOString();
  });
  await q.query(
    `INSERT INTO audit_log (action, resource_type, resource_id, "timestamp", result, metadata, request_id)
     SELECT CASE WHEN i % 3 = 0 THEN 'LOGIN_FAILURE' ELSE 'CREATE_TASK' END, 'TASK', i, t, 'SUCCESS', jsonb_build_object('pad', repeat('x', 1500)), 'ceiling-' || i
       FROM unnest($1::timestamptz[]) WITH ORDINALITY u(t, g), LATERAL (SELECT $2::int + g::int - 1 AS i) n`,
    [at, from],
  );
}

h.before(async () => {
  await committed(h.server.owner, (q) => plant(q, 0, 1000));
  // The ranges filled so far get their summaries (what autovacuum does with autosummarize on);
  // the records after them land in ranges that have none.
  await h.server.owner.query(`SELECT brin_summarize_new_values('audit_log_time_brin')`);
  await committed(h.server.owner, (q) => plant(q, 1000, PLANTED));
  await h.server.owner.query('ANALYZE audit_log');
});

const stored = () =>
  h.server.owner.query<Row>(
    `SELECT id, action, request_id, (extract(epoch FROM "timestamp") * 1000000)::bigint AS micros,
            ((ctid::text::point)[0])::int AS block
       FROM audit_log ORDER BY id DESC`,
  );

/** Follows next_cursor to the end, `limit` records a page. */
async function listAll(q: string, limit: number): Promise<number[]> {
  const ids: number[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 500; pages++) {
    const query: URLSearchParams = new URLSearchParams({ q, limit: String(limit), ...(cursor ? { cursor } : {}) });
    const res: { status: number; text: string; body: { data: AuditRecordBody[]; next_cursor: string | null } } = await h.admin.client.get<{ data: AuditRecordBody[]; next_cursor: string | null }>(`/api/v1/audit-logs?${query}`, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
    ids.push(...res.body.data.map((r) => r.id));
    cursor = res.body.next_cursor;
    if (!cursor) return ids;
  }
  throw new Error(`${q}: more than 500 pages`);
}

async function assertSearch(q: string, match: (r: Row) => boolean, opts: { empty?: boolean } = {}) {
  const want = (await stored()).filter(match).map((r) => r.id);
  assert.equal(want.length === 0, opts.empty === true, `${q} selects ${want.length} records here`);
  for (const limit of [7, 100]) assert.deepEqual(await listAll(q, limit), want, `${q}, ${limit} a page`);
}

const within = (from: string, to: string) => (r: Row) => r.micros >= us(from) && r.micros < us(to);
const window = (from: string | undefined, to: string, inclusive = false): BoundedRange => ({
  ...(from ? { from: { at: from, inclusive: true } } : {}),
  to: { at: to, inclusive },
});

describe('GET /audit-logs?q=created:… under the windows\' id ceiling', () => {
  test('the planted layout: stragglers in other block ranges than their windows\' ends, summarized and not', async () => {
    const rows = await stored();
    const planted = new Map(rows.filter((r) => r.request_id.startsWith('ceiling-')).map((r) => [Number(r.request_id.slice('ceiling-'.length)), r]));
    assert.equal(planted.size, PLANTED);
    const range = (i: number) => Math.floor(planted.get(i)!.block / PAGES_PER_RANGE);
    assert.ok(range(PLANTED - 1) - range(0) >= 6, `the planted records fill several block ranges (${range(0)} to ${range(PLANTED - 1)})`);
    for (const i of STRAGGLERS.keys()) {
      const at = planted.get(i)!.micros;
      // Its window's newest other record (the list's first guess, by time) is 3 or more ranges before it.
      const before = [...planted.entries()].filter(([j, r]) => !STRAGGLERS.has(j) && r.micros <= at).sort(([, a], [, b]) => b.micros - a.micros)[0]!;
      assert.ok(range(i) - range(before[0]) >= 3, `straggler ${i} in range ${range(i)}, its window's end in ${range(before[0])}`);
    }
    // The ranges summarized were those holding records 0 … 999; 600 is in one, 1100 after them all.
    assert.ok(range(1100) > range(999), 'straggler 1100 is in a range made after the summaries');
  });

  test('a list returns exactly the records of its windows, page after page, stragglers included', async () => {
    await assertSearch('created:2001-01-03..2001-01-08', within('2001-01-03T00:00:00Z', '2001-01-09T00:00:00Z'));
    await assertSearch('created:<2001-01-06', (r) => r.micros < us('2001-01-06T00:00:00Z'));
    await assertSearch('created:<=2001-01-12T00:00:00Z', (r) => r.micros <= us('2001-01-12T00:00:00Z'));
    await assertSearch('created:<2001-01-12T00:00:00Z', (r) => r.micros < us('2001-01-12T00:00:00Z'));
    await assertSearch('created:2001-01-11..2001-01-12', within('2001-01-11T00:00:00Z', '2001-01-13T00:00:00Z'));
    await assertSearch('created:2001-01-11T23:00:00Z..2001-01-12T00:00:00Z', (r) => r.micros >= us('2001-01-11T23:00:00Z') && r.micros <= us('2001-01-12T00:00:00Z'));
    // Several windows: the highest of their ceilings.
    await assertSearch('created:2001-01-05..2001-01-05 created:2001-01-20..2001-01-21', (r) => within('2001-01-05T00:00:00Z', '2001-01-06T00:00:00Z')(r) || within('2001-01-20T00:00:00Z', '2001-01-22T00:00:00Z')(r));
    await assertSearch('created:2001-01-20..2001-01-21 created:<2001-01-02', (r) => within('2001-01-20T00:00:00Z', '2001-01-22T00:00:00Z')(r) || r.micros < us('2001-01-02T00:00:00Z'));
    // With another key, and with an exclusion of the same key.
    await assertSearch('created:2001-01-05..2001-01-05 action:LOGIN_FAILURE', (r) => within('2001-01-05T00:00:00Z', '2001-01-06T00:00:00Z')(r) && r.action === 'LOGIN_FAILURE');
    await assertSearch('created:2001-01-05..2001-01-05 -created:>=2001-01-05T06:00:00.25Z', (r) => r.micros >= us('2001-01-05T00:00:00Z') && r.micros < us('2001-01-05T06:00:00.25Z'));
    // An empty window, and a window open above beside a bounded one (no ceiling: the plain list).
    await assertSearch('created:1999-01-01..1999-12-31', () => false, { empty: true });
    await assertSearch('created:<2001-01-06 created:>=2001-02-15', (r) => r.micros < us('2001-01-06T00:00:00Z') || r.micros >= us('2001-02-15T00:00:00Z'));
  });

  test('the ceiling is the highest id inside the windows, for windows of every width and place', async () => {
    const bounds = ['2000-12-31T00:00:00Z', '2001-01-01T00:00:00Z', '2001-01-03T05:00:00Z', '2001-01-05T06:00:00.25Z', '2001-01-08T00:00:00Z',
      '2001-01-12T00:00:00Z', '2001-01-20T00:00:00Z', '2001-02-03T07:00:00Z', '2001-02-20T00:00:00Z'];
    for (const from of [undefined, ...bounds]) {
      for (const to of bounds) {
        for (const inclusive of [false, true]) {
          if (from && from > to) continue;
          const w = window(from, to, inclusive);
          const [want] = await h.server.owner.query<{ id: number | null }>(
            `SELECT max(id) AS id FROM audit_log WHERE ($1::timestamptz IS NULL OR "timestamp" >= $1) AND ("timestamp" < $2 OR ($3 AND "timestamp" = $2))`,
            [from ?? null, to, inclusive],
          );
          const got = await h.server.db.transaction((tx) => idCeiling(tx, [w]));
          assert.equal(got, want!.id, `${from ?? '…'} to ${to}${inclusive ? ' inclusive' : ''}`);
        }
      }
    }
  });

  test('PostgreSQL finds the ids past the first guess through a bitmap, the BRIN\'s for a wide window, and the list starts at the ceiling', async () => {
    // Whichever bitmap costs least for the window: the timestamp index's for a narrow one (its
    // few records cost less than the BRIN's ranges), the primary key's when few ids are above
    // the first guess (a recent window), the BRIN's when the window and the ids above the guess
    // are both many (an old, wide window: on the million records of bench/search.mjs). Never a
    // walk of an index in order (the primary key back from the newest id, the whole window by
    // time), nor the whole table.
    const bitmaps = /^audit_log_(time_brin|timestamp_idx|pkey)$/;
    assertBitmap(await explainedList(window(undefined, '2001-01-06T00:00:00Z')), bitmaps);
    assertBitmap(await explainedList(window(undefined, '2001-01-20T00:00:00Z')), /^audit_log_time_brin$/);
    assertBitmap(await explainedList(window(undefined, '2001-02-15T00:00:00Z')), bitmaps);
  });
});

function assertBitmap(explained: Array<{ sql: string; plan: string }>, index: RegExp) {
  const beyond = explained.find((e) => e.sql.includes('max(id)'));
  assert.ok(beyond, 'the ceiling asks for ids past its first guess');
  const names = [...beyond.plan.matchAll(/"Index Name":\s*"([^"]+)"/g)].map((m) => m[1]!);
  assert.ok(names.length > 0 && names.every((n) => index.test(n)), beyond.plan);
  assert.doesNotMatch(beyond.plan, /"Node Type":\s*"(Index Scan|Index Only Scan|Seq Scan)"/, beyond.plan);
  const list = explained.find((e) => e.sql.includes('ORDER BY id DESC'));
  assert.ok(list);
  assert.match(list.sql, /id <= \$\d+/, 'the list has the ceiling as a condition');
}

/** The statements of the list under the ceiling of `w`, as the service sends them, each EXPLAINed in place. */
async function explainedList(w: BoundedRange): Promise<Array<{ sql: string; plan: string }>> {
    const explained: Array<{ sql: string; plan: string }> = [];
    await h.server.db.transaction(
      async (tx) => {
        // The list's statements as the service sends them, each also EXPLAINed in place.
        const explaining = explainingTx(tx, (sql) => sql.startsWith('SELECT') && !sql.includes('set_config'), (sql, plan) => explained.push({ sql, plan: JSON.stringify(plan) }));
        return queryAuditLogUnderCeiling(explaining, {}, [w], undefined, 20);
      },
      { planEachStatement: true },
    );
    return explained;
}
