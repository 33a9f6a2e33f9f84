// Whether sealing keeps up: records that committed and wait for their seal, while no seal was made
// for as long, mean that no instance can seal (every one stopped on evidence it cannot verify,
// or AUDIT_SEALING is off everywhere). Verification and /health/ready report it, naming the
// first record waiting; /metrics reports the backlog (sealingBacklog). Ages are taken on the
// database's clock, which stamped them.
import { LOWER_BOUND_SQL, lowerBoundParams, nextPair } from '../../../db/commit-order.js';
import type { Queryable } from '../../../db/database.js';
import { query, statements } from '../../../db/statements.js';
import { committedRecords, lastSealBatch } from './evidence.repository.js';

/** How long records may wait, with no seal made meanwhile, before sealing counts as stopped (AUDIT_SEAL_STALL_MS). */
export const DEFAULT_SEAL_STALL_MS = 60_000;

export interface SealingStatus {
  stalled: boolean;
  /** The first committed record not sealed yet, and how long ago it was written (ms). */
  waiting?: { id: number; ms: number };
  /** How long ago the last seal was made (ms); undefined when none was. */
  sinceSealMs?: number;
}

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

export async function sealingStatus(q: Queryable, stallMs: number): Promise<SealingStatus> {
  const last = await lastSealBatch(q);
  const first = await committedRecords.firstWaiting(q, nextPair(last));
  if (!first) return { stalled: false };
  const [ages] = await query<{ waiting_ms: number; since_seal_ms: number | null }>(q, S.ages, [first.timestamp, last?.sealed_at ?? null]);
  const waitingMs = Math.max(0, ages!.waiting_ms);
  const sinceSealMs = ages!.since_seal_ms === null ? undefined : Math.max(0, ages!.since_seal_ms);
  return { stalled: waitingMs > stallMs && (sinceSealMs === undefined || sinceSealMs > stallMs), waiting: { id: first.id, ms: waitingMs }, ...(sinceSealMs !== undefined ? { sinceSealMs } : {}) };
}

export interface SealingBacklog {
  /** Committed audit records not sealed yet. */
  unsealedRecords: number;
  /** How long ago the oldest of them was written (s); 0 when none waits. */
  sealLagSeconds: number;
  /** How long ago the newest checkpoint was signed (s); undefined when none was. */
  checkpointAgeSeconds: number | undefined;
  /** How long ago the first sealed record no checkpoint covers was sealed (s); 0 when every one is covered. */
  checkpointLagSeconds: number;
}

/** What sealing and signing have yet to do, for /metrics: two statements, each reading only what waits. */
export async function sealingBacklog(q: Queryable): Promise<SealingBacklog> {
  const last = await lastSealBatch(q);
  const pair = nextPair(last);
  const s = 'snapshot' in pair.lower ? S.backlogAfterSnapshot : S.backlogAfterPoint;
  const [row] = await query<{ records: number; oldest_seconds: number; checkpoint_age_seconds: number | null; checkpoint_lag_seconds: number }>(q, s, [
    ...lowerBoundParams(pair.lower),
    pair.upper,
    pair.upper === null ? null : pair.afterId,
  ]);
  return {
    unsealedRecords: row!.records,
    sealLagSeconds: Math.max(0, row!.oldest_seconds),
    checkpointAgeSeconds: row!.checkpoint_age_seconds === null ? undefined : Math.max(0, row!.checkpoint_age_seconds),
    checkpointLagSeconds: Math.max(0, row!.checkpoint_lag_seconds),
  };
}
