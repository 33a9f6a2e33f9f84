// Whether sealing keeps up: records that committed and wait for their seal, while no seal was made
// for as long, mean that no instance can seal (every one stopped on evidence it cannot verify,
// or AUDIT_SEALING is off everywhere). Verification and /health/ready report it, naming the
// first record waiting. Ages are taken on the database's clock, which stamped them.
import { nextPair } from '../../../db/commit-order.js';
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

const S = statements('sealing-status', {
  ages: `SELECT (EXTRACT(EPOCH FROM clock_timestamp() - $1::timestamptz) * 1000)::float8 AS waiting_ms,
     (EXTRACT(EPOCH FROM clock_timestamp() - $2::timestamptz) * 1000)::float8 AS since_seal_ms`,
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
