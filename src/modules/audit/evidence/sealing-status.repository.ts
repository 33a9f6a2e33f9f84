// The statements of sealing-status.service.ts: how long records have waited for their seal, and what
// sealing and signing have yet to do, on the database's clock.
import { LOWER_BOUND_SQL, lowerBoundParams, type Pair } from '../../../db/commit-order.js';
import type { Queryable } from '../../../db/database.js';
import { query, statements } from '../../../db/statements.js';

/**
 * The records the sealer has not taken, counted, and the age of the oldest; the newest checkpoint's
 * age; and how long sealed records have waited for a checkpoint (the seal time of the first one
 * it does not cover). The records are the ones the sealer's next batches would read
 * (db/commit-order.ts): not below the lower bound of its pair ($1–$3: a snapshot's xip list,
 * xmax and ceiling, or a point's xact_id, id and ceiling), visible now, less, while a pair is
 * unfinished, the pair's rows it took (visible in its upper snapshot $4, id up to $5). The
 * range on xact_id is the reader's, through the index on xact_id: only the waiting records are
 * read, however long the log. The rest are descents of a primary key.
 */
const backlog = (notTaken: string) => `WITH s AS (SELECT pg_current_snapshot() AS snap)
  SELECT w.records, w.oldest_seconds, c.age_seconds AS checkpoint_age_seconds,
     COALESCE((SELECT EXTRACT(EPOCH FROM clock_timestamp() - b.sealed_at) FROM audit_seal_batches b
                WHERE b.first_seq <= COALESCE(c.tree_size, 0)
                  AND COALESCE(c.tree_size, 0) < (SELECT COALESCE(max(n.next_seq), 0) FROM audit_seal_batches n)
                ORDER BY b.first_seq DESC LIMIT 1), 0)::float8 AS checkpoint_lag_seconds
    FROM (SELECT count(*)::int AS records, COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(t."timestamp")), 0)::float8 AS oldest_seconds
            FROM audit_log t, s
           WHERE ${notTaken} AND pg_visible_in_snapshot(t.xact_id, s.snap)
             AND NOT ($4::pg_snapshot IS NOT NULL AND t.id <= $5::bigint AND pg_visible_in_snapshot(t.xact_id, $4::pg_snapshot))) w
    LEFT JOIN (SELECT tree_size, EXTRACT(EPOCH FROM clock_timestamp() - created_at)::float8 AS age_seconds
                 FROM audit_checkpoints ORDER BY id DESC LIMIT 1) c ON true`;

const S = statements('sealing-status', {
  ages: `SELECT (EXTRACT(EPOCH FROM clock_timestamp() - $1::timestamptz) * 1000)::float8 AS waiting_ms,
     (EXTRACT(EPOCH FROM clock_timestamp() - $2::timestamptz) * 1000)::float8 AS since_seal_ms`,
  backlogAfterSnapshot: backlog(LOWER_BOUND_SQL.afterSnapshot),
  backlogAfterPoint: backlog(LOWER_BOUND_SQL.afterPoint),
});

/** How long ago (ms, on the database's clock) `waitingSince` was, and `sealedAt` (null when none). */
export async function sealingAges(q: Queryable, waitingSince: string, sealedAt: string | null): Promise<{ waiting_ms: number; since_seal_ms: number | null }> {
  const [ages] = await query<{ waiting_ms: number; since_seal_ms: number | null }>(q, S.ages, [waitingSince, sealedAt]);
  return ages!;
}

/** The records the sealer's next batches would read, counted and aged, and the checkpoints' ages (the statement above says which). */
export async function waitingWork(q: Queryable, pair: Pair) {
  const s = 'snapshot' in pair.lower ? S.backlogAfterSnapshot : S.backlogAfterPoint;
  const [row] = await query<{ records: number; oldest_seconds: number; checkpoint_age_seconds: number | null; checkpoint_lag_seconds: number }>(q, s, [
    ...lowerBoundParams(pair.lower),
    pair.upper,
    pair.upper === null ? null : pair.afterId,
  ]);
  return row!;
}
