// Whether sealing keeps up: records that committed and wait for their seal, while no seal was made
// for as long, mean that no instance can seal (every one stopped on evidence it cannot verify,
// or AUDIT_SEALING is off everywhere). Verification and /health/ready report it, naming the
// first record waiting; /metrics reports the backlog (sealingBacklog). Ages are taken on the
// database's clock, which stamped them.
import { nextPair } from '../../../db/commit-order.js';
import type { Queryable } from '../../../db/database.js';
import { committedRecords, lastSealBatch } from './evidence.repository.js';
import { sealingAges, waitingWork } from './sealing-status.repository.js';
import { MissingTile, storedEdge } from './tile.store.js';

/** How long records may wait, with no seal made meanwhile, before sealing counts as stopped (AUDIT_SEAL_STALL_MS). */
export const DEFAULT_SEAL_STALL_MS = 60_000;

export interface SealingStatus {
  stalled: boolean;
  /** The first committed record not sealed yet, and how long ago it was written (ms). */
  waiting?: { id: number; ms: number };
  /** How long ago the last seal was made (ms); undefined when none was. */
  sinceSealMs?: number;
}

export async function sealingStatus(q: Queryable, stallMs: number): Promise<SealingStatus> {
  const last = await lastSealBatch(q);
  const first = await committedRecords.firstWaiting(q, nextPair(last));
  if (!first) return { stalled: false };
  const ages = await sealingAges(q, first.timestamp, last?.sealed_at ?? null);
  const waitingMs = Math.max(0, ages.waiting_ms);
  const sinceSealMs = ages.since_seal_ms === null ? undefined : Math.max(0, ages.since_seal_ms);
  return { stalled: waitingMs > stallMs && (sinceSealMs === undefined || sinceSealMs > stallMs), waiting: { id: first.id, ms: waitingMs }, ...(sinceSealMs !== undefined ? { sinceSealMs } : {}) };
}

/**
 * A tile that the stored tree's right edge lacks, as the sealer would find it (tile.store.ts,
 * storedEdge): the sealer cannot extend the tree, and proofs through the edge are refused, even
 * while no record waits to show it. Undefined when the edge is whole (or nothing is sealed).
 * One read of a few tiles: cheap enough for every readiness probe.
 */
export async function missingEdgeTile(q: Queryable): Promise<string | undefined> {
  const size = (await lastSealBatch(q))?.next_seq ?? 0;
  if (size === 0) return undefined;
  try {
    await storedEdge(q, size);
    return undefined;
  } catch (err) {
    if (err instanceof MissingTile) return err.message;
    throw err;
  }
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
  const row = await waitingWork(q, nextPair(last));
  return {
    unsealedRecords: row.records,
    sealLagSeconds: Math.max(0, row.oldest_seconds),
    checkpointAgeSeconds: row.checkpoint_age_seconds === null ? undefined : Math.max(0, row.checkpoint_age_seconds),
    checkpointLagSeconds: Math.max(0, row.checkpoint_lag_seconds),
  };
}
