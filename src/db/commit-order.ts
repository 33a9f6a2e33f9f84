// Reading rows in commit order (docs/api.md 5.5): the one reader every consumer uses (the relay that
// numbers events, the audit sealer; the webhook follows the sealer's seq).
//
// Ids are handed out at insert, but transactions commit in another order, and a transaction's id
// is taken at its first write or row lock: neither `id > cursor` nor (xact_id, id) order is commit
// order. A request that started first, waited on a lock and committed last would come first.
//
// So rows are taken in batches the way PgQ's ticks take events: a batch is the rows that became
// visible between two snapshots (pg_current_snapshot(), pg_visible_in_snapshot()), ordered by id.
// A transaction that committed later always falls in a later batch; inside a batch, id order
// respects "written after another committed", because such a row's id was drawn after that
// commit. The scan is bounded as PgQ's batch_event_sql bounds it, by the index on xact_id: the
// transactions that were still running in the lower snapshot (its xip list), and those that
// started after it (xact_id ≥ its xmax). A long transaction delays only itself: rows committed
// around it are in the batches of their time, and it in the batch after it commits.
//
// Both the plan and its estimate are made robust, because the service's connections plan with
// plan_cache_mode = force_generic_plan (db/postgres.ts), which PostgreSQL applies to unnamed
// statements too, and because a table may have no statistics (none until ANALYZE: autovacuum
// may be off, and PGlite runs none). For a one-sided range on xid8 PostgreSQL then guesses that a
// third of the table matches, and for `ORDER BY id LIMIT $n` that it will stop early: it read the
// primary key from the start, filtering, every row of the table on every batch (4 ms a batch on
// 6,000 outbox rows, a third of PostgreSQL's time per POST /tasks in the benchmark). So:
// - the range has an upper end too (XACT_CEILING, 2^62 transactions past the lower bound: never
//   reached), for the estimate alone: a range closed on both ends is guessed at 0.5%;
// - a new pair's ids are gathered in a MATERIALIZED CTE, planned for all its rows and not for the
//   first few in id order, so through the xact_id index; only then sorted and cut at the limit.
// test/commit-order-plans.test.ts holds it on tables never analyzed.

// Why an index on xact_id at all, when bounding the scan by id would need none: a transaction's
// first row may draw its id before the transaction has an id of its own (the identity default is
// evaluated before the row is stored, and the row's storing assigns it), so a transaction that
// starts after a snapshot can hold an id below what the snapshot's time had drawn. Bounding by id
// would hold only if every writer, a superuser's INSERT included, took its transaction id first.
//
// A consumer keeps where it stands as one row per batch (its own table), never by updating the
// rows: the upper snapshot of its last batch, and, when a pair of snapshots held more rows than one
// batch takes, the pair and the last id taken (`through`). The same statements run on PostgreSQL
// and PGlite (whose one connection makes every snapshot's xip list empty).
import type { Queryable } from './database.js';
import { query, statements, type Statement } from './statements.js';

/** A pg_snapshot in its text form, `xmin:xmax:xip,…`. */
export type SnapshotText = string;

/**
 * What was consumed before the current pair: every row visible in a snapshot, or (once, after an
 * upgrade from the release that read in (xact_id, id) order) every row up to a point in that order.
 */
export type LowerBound = { snapshot: SnapshotText } | { xact: string; id: number };

/** The pair a consumer reads next: rows visible in `upper` (null: the current snapshot) and not below `lower`, with id > `afterId` (0 unless `upper` is set: only a pair being finished has a last id taken). */
export interface Pair {
  lower: LowerBound;
  upper: SnapshotText | null;
  afterId: number;
}

/** How a batch row records where its consumer stood after it. */
export interface PositionColumns {
  after_snapshot: SnapshotText | null;
  after_xact: string | null;
  after_id: number | null;
  /** Null only on rows converted from the previous release (their lower bound is after_xact/after_id). */
  snapshot: SnapshotText | null;
  through_id: number | null;
}

/** Nothing consumed yet: no transaction is visible in it (every normal xid is ≥ 3). */
export const NOTHING_CONSUMED: SnapshotText = '1:1:';

/** The pair after a consumer's last batch row (none: from the start). */
export function nextPair(last: PositionColumns | undefined): Pair {
  if (!last) return { lower: { snapshot: NOTHING_CONSUMED }, upper: null, afterId: 0 };
  const lowerOfPair: LowerBound = last.after_snapshot !== null ? { snapshot: last.after_snapshot } : { xact: last.after_xact!, id: last.after_id! };
  if (last.snapshot === null) return { lower: { xact: last.after_xact!, id: last.after_id! }, upper: null, afterId: 0 };
  if (last.through_id !== null) return { lower: lowerOfPair, upper: last.snapshot, afterId: last.through_id };
  return { lower: { snapshot: last.snapshot }, upper: null, afterId: 0 };
}

/** The columns a batch row stores for a batch of `taken` rows read from `pair` with `limit`, under snapshot `upper`. */
export function positionAfter(pair: Pair, upper: SnapshotText, taken: { length: number; lastId: number }, limit: number): PositionColumns {
  const lower = pair.lower;
  return {
    after_snapshot: 'snapshot' in lower ? lower.snapshot : null,
    after_xact: 'xact' in lower ? lower.xact : null,
    after_id: 'xact' in lower ? lower.id : null,
    snapshot: upper,
    // A full batch may have left rows of the pair behind: the next batch goes on after its last id.
    through_id: taken.length >= limit ? taken.lastId : null,
  };
}

/** How far past a lower bound's transaction id the scan's range reaches (see the top of this file). */
export const XACT_CEILING = 2n ** 62n;

/** The end of the scan's xact_id range for a lower bound at transaction `xact` (a decimal xid8). */
export const xactCeiling = (xact: string): string => String(BigInt(xact) + XACT_CEILING);

/** The parts of a snapshot's text the scan is bounded by. */
export function parseSnapshot(text: SnapshotText): { xmin: string; xmax: string; xip: string[] } {
  const m = /^(\d+):(\d+):([\d,]*)$/.exec(text);
  if (!m) throw new Error(`not a pg_snapshot: ${text}`);
  return { xmin: m[1]!, xmax: m[2]!, xip: m[3] ? m[3].split(',') : [] };
}

/**
 * The condition "not below the lower bound" on a table aliased `t`, by the kind of bound: after a
 * snapshot ($1 its xip list, $2 its xmax) or after an (xact_id, id) point ($1, $2); $3 is the
 * ceiling that closes the xact_id range (see the top of this file). Its parameters come from
 * lowerBoundParams. Shared by the reader below and by anything that counts what it has yet to read.
 */
export const LOWER_BOUND_SQL = {
  afterSnapshot: '(t.xact_id = ANY ($1::xid8[]) OR (t.xact_id >= $2::xid8 AND t.xact_id < $3::xid8))',
  afterPoint: '((t.xact_id > $1::xid8 AND t.xact_id < $3::xid8) OR (t.xact_id = $1::xid8 AND t.id > $2::bigint))',
} as const;

/** The parameters $1–$3 of LOWER_BOUND_SQL for a lower bound. */
export function lowerBoundParams(lower: LowerBound): [unknown, unknown, string] {
  if ('snapshot' in lower) {
    const { xmax, xip } = parseSnapshot(lower.snapshot);
    return [xip, xmax, xactCeiling(xmax)];
  }
  return [lower.xact, lower.id, xactCeiling(lower.xact)];
}

/** A row of a committed batch: the consumer's columns, and the upper snapshot the batch was read under. */
export type CommittedRow<R> = R & { id: number; batch_snapshot: SnapshotText };

/** A batch read after a consumer's last batch row: its rows, in order, and the position to record with them. */
export interface CommittedBatch<R> {
  rows: Array<CommittedRow<R>>;
  /** Undefined when there are no rows (nothing to record: the consumer stays where it was). */
  position: PositionColumns | undefined;
}

export interface CommittedReader<R> {
  /** The next batch after the consumer's last batch row (none: from the start), up to `limit` rows. */
  next(q: Queryable, last: PositionColumns | undefined, limit: number): Promise<CommittedBatch<R>>;
  /**
   * Every committed row after the consumer's last batch row, in order, `chunk` rows at a time,
   * without recording anything (a reader beside the consumer: the export's records not sealed
   * yet). It ends with what was committed when its last chunk was read.
   */
  scan(q: Queryable, last: PositionColumns | undefined, chunk: number): AsyncGenerator<Array<CommittedRow<R>>>;
  /** The first committed row not consumed yet, if any: the rest of an unfinished pair, else what became visible since. */
  firstWaiting(q: Queryable, pair: Pair): Promise<CommittedRow<R> | undefined>;
}

/**
 * Declares the reader's statements for one table (its alias is `t`; `columns` select from it)
 * under a repository's name. Four variants: the lower bound is a snapshot or an (xact_id, id)
 * point, the upper bound the current snapshot or a stored one (a pair being finished).
 */
export function committedReader<R>(repository: string, table: string, columns: string): CommittedReader<R> {
  // $1, $2: the lower bound; $3: the ceiling (see the top of this file); then the limit, or, for a
  // pair being finished, the last id taken ($4), the limit ($5) and the pair's upper snapshot ($6).
  // A new pair has no "after id": a condition `id > 0` would be taken for a third of the table
  // too, and the primary key read whole to intersect with it.
  const { afterSnapshot: belowSnapshot, afterPoint: belowPoint } = LOWER_BOUND_SQL;
  // A new pair: the ids are gathered first, in a MATERIALIZED CTE, which PostgreSQL plans for all
  // of its rows rather than for the first `limit` in id order, so that it reads them through the
  // xact_id index instead of the primary key from the start (see the top of this file); then the
  // first `limit` of them are read whole.
  const now = (lower: string) => `WITH s AS (SELECT pg_current_snapshot() AS snap),
  waiting AS MATERIALIZED (SELECT t.id FROM ${table} t, s WHERE ${lower} AND pg_visible_in_snapshot(t.xact_id, s.snap))
  SELECT t.id, s.snap::text AS batch_snapshot, ${columns}
    FROM (SELECT id FROM waiting ORDER BY id LIMIT $4) w JOIN ${table} t ON t.id = w.id, s
   ORDER BY t.id`;
  // A pair being finished holds more rows than a batch takes (a backlog): read in id order from
  // the last id taken, where its rows are.
  const stored = (lower: string) => `SELECT t.id, $6::text AS batch_snapshot, ${columns} FROM ${table} t
   WHERE ${lower} AND pg_visible_in_snapshot(t.xact_id, $6::pg_snapshot) AND t.id > $4
   ORDER BY t.id LIMIT $5`;
  // Planned per call: the best plan depends on how wide the xact_id range is.
  const S = statements(repository, {
    committedAfterSnapshot: now(belowSnapshot),
    committedAfterPoint: now(belowPoint),
    pairAfterSnapshot: stored(belowSnapshot),
    pairAfterPoint: stored(belowPoint),
  });

  function statementOf(pair: Pair): { s: Statement; lower: unknown[] } {
    const { lower, upper } = pair;
    const s = 'snapshot' in lower ? (upper === null ? S.committedAfterSnapshot : S.pairAfterSnapshot) : upper === null ? S.committedAfterPoint : S.pairAfterPoint;
    return { s, lower: lowerBoundParams(lower) };
  }

  function run(q: Queryable, pair: Pair, limit: number) {
    const { s, lower } = statementOf(pair);
    // Only a pair being finished has an upper snapshot of its own, and a last id taken (nextPair).
    return query<CommittedRow<R>>(q, s, pair.upper === null ? [...lower, limit] : [...lower, pair.afterId, limit, pair.upper]);
  }

  /**
   * Up to `limit` rows from `pair` on, and the pair they came from: an unfinished pair that turns
   * out to be finished (its last batch happened to be full) gives way to the next pair, from its
   * upper snapshot.
   */
  async function readOn(q: Queryable, pair: Pair, limit: number): Promise<{ rows: Array<CommittedRow<R>>; pair: Pair }> {
    const rows = await run(q, pair, limit);
    if (rows.length > 0 || pair.upper === null) return { rows, pair };
    const following: Pair = { lower: { snapshot: pair.upper }, upper: null, afterId: 0 };
    return { rows: await run(q, following, limit), pair: following };
  }

  const positionOf = (pair: Pair, rows: Array<CommittedRow<R>>, limit: number) => {
    const lastRow = rows[rows.length - 1];
    return lastRow && positionAfter(pair, lastRow.batch_snapshot, { length: rows.length, lastId: lastRow.id }, limit);
  };

  return {
    async next(q, last, limit) {
      const { rows, pair } = await readOn(q, nextPair(last), limit);
      return { rows, position: positionOf(pair, rows, limit) };
    },
    async *scan(q, last, chunk) {
      for (let pair: Pair | undefined = nextPair(last); pair; ) {
        const read = await readOn(q, pair, chunk);
        if (read.rows.length === 0) return;
        yield read.rows;
        const position = positionOf(read.pair, read.rows, chunk)!;
        // A short read took all its pair held: what committed since came after the scan began.
        pair = position.through_id === null ? undefined : nextPair(position);
      }
    },
    firstWaiting: async (q, pair) => (await readOn(q, pair, 1)).rows[0],
  };
}
