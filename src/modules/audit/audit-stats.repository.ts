// The audit console's activity counts (GET /audit-logs/stats, docs/audit-search.md "Activity
// counts"): the records of a query counted per time bucket, per action and per actor, in one
// read of the window. The filters and the search are the list's own conditions
// (auditFilterConditions), so the counts are those of the records the list would page through.
import { where } from '../../db/conditions.js';
import type { Database } from '../../db/database.js';
import { dynamicStatement, send, statements } from '../../db/statements.js';
import { auditFilterConditions, type AuditFilters } from './audit.repository.js';

export type StatsInterval = 'hour' | 'day';

/** One count: of a bucket (its start, in ms since the epoch), of an action, or of an actor (null: records without one). */
export type StatsRow =
  | { kind: 'bucket'; key: number; n: number }
  | { kind: 'action'; key: string; n: number }
  | { kind: 'actor'; key: number | null; n: number };

/** The bounds the buckets cover: whole buckets, from the first's start to the last's end (exclusive). */
export interface StatsBounds {
  from: string;
  to: string;
}

const S = statements('audit-stats', {
  // For the counting statement after it, in its transaction only. PostgreSQL cannot tell how
  // many hours or days a window holds (the bucket is an expression it has no statistics for), so
  // it takes every record for a group of its own; with the default work_mem that does not fit a
  // hash table and it sorts the window on disk instead (3.5 MB of temporary files for 82,000
  // records, docs/audit-search.md). The real groups are a few thousand at most: a larger bound
  // only lets the planner hash them, it is not memory taken.
  hashTheGroups: "SELECT set_config('work_mem', '32MB', true)",
});

/**
 * One statement. The window's bounds come first among the conditions, so that PostgreSQL reads
 * the window from audit_log_timestamp_idx (migrations/0018: the time, with the columns counted
 * and filtered on beside it) without visiting the rows, and counts in one pass (GROUPING SETS)
 * per bucket and action, and per actor; the buckets' and the actions' counts are sums of the
 * first (at most buckets × actions rows): two hash entries per record where three groupings
 * took three, 20 % less CPU for a 30-day window (docs/audit-search.md). Only the `top` largest
 * actions and actors come back; ties by name (byte order) or id.
 * `bucket` is the start of the record's UTC hour or day: date_bin from a UTC midnight, plain
 * arithmetic on the instant (date_trunc in a time zone converts each row, three times slower).
 */
function statsStatement(f: AuditFilters, bounds: StatsBounds, interval: StatsInterval, top: number) {
  const { clause, params } = where('audit_stats', [
    [(p) => `"timestamp" >= ${p}::timestamptz`, bounds.from, 'plan per value'],
    [(p) => `"timestamp" < ${p}::timestamptz`, bounds.to, 'plan per value'],
    ...auditFilterConditions(f),
  ]);
  const width = `$${params.push(`1 ${interval}`)}`;
  const limit = `$${params.push(top)}`;
  const text = `WITH counts AS (
  SELECT bucket, action, actor_id, GROUPING(bucket, action, actor_id) AS grouped, count(*)::bigint AS n
    FROM (SELECT date_bin(${width}::interval, "timestamp", '2001-01-01 00:00:00+00') AS bucket, action, actor_id FROM audit_log ${clause}) matched
   GROUP BY GROUPING SETS ((bucket, action), (actor_id))
)
SELECT 'bucket' AS kind, (extract(epoch FROM bucket) * 1000)::bigint::text AS key, sum(n)::bigint AS n FROM counts WHERE grouped = 1 GROUP BY bucket
UNION ALL (SELECT 'action', action, sum(n)::bigint FROM counts WHERE grouped = 1 GROUP BY action ORDER BY 3 DESC, action COLLATE "C" LIMIT ${limit})
UNION ALL (SELECT 'actor', actor_id::text, n FROM counts WHERE grouped = 6 ORDER BY n DESC, counts.actor_id NULLS LAST LIMIT ${limit})`;
  return { text, params };
}

dynamicStatement('audit-stats', 'counts', {
  'no filter': statsStatement({}, { from: 'x', to: 'x' }, 'day', 10).text,
  'an action and a search': statsStatement(
    { action: ['LOGIN_FAILURE'], search: { result: { any: ['FAILURE'], not: [] }, actor: { any: [{ ids: [7] }], not: [] } } },
    { from: 'x', to: 'x' },
    'hour',
    10,
  ).text,
});

/** The counts of the records matching `f` (resolved: audit.service.ts, resolveSearch) within `bounds`. */
export async function queryAuditStats(db: Database, f: AuditFilters, bounds: StatsBounds, interval: StatsInterval, top: number): Promise<StatsRow[]> {
  const s = statsStatement(f, bounds, interval, top);
  const rows = await db.transaction(
    (tx) => {
      send(tx, S.hashTheGroups);
      return tx.query<{ kind: StatsRow['kind']; key: string | null; n: number }>(s.text, s.params);
    },
    { planEachStatement: true },
  );
  // Keys travel as text, one column for the three kinds: a bucket's start in ms, an actor's id.
  return rows.map((r): StatsRow => {
    if (r.kind === 'action') return { kind: 'action', key: r.key!, n: r.n };
    if (r.kind === 'bucket') return { kind: 'bucket', key: Number(r.key), n: r.n };
    return { kind: 'actor', key: r.key === null ? null : Number(r.key), n: r.n };
  });
}
