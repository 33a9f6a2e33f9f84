// Liveness (the process answers) and readiness (the database answers). Readiness recovers
// by itself: every probe tries the database afresh. It also says whether the audit log is being
// sealed: records that wait for their seal while no seal is made (every sealer stopped on
// evidence it cannot verify, or AUDIT_SEALING off everywhere) make the service "degraded" — it
// still answers (200), and the body names the first record waiting. With a witness policy, a
// checkpoint that has waited longer than AUDIT_WITNESS_MAX_AGE_MS for a witnessed successor (the
// newest witnessed checkpoint is that old) makes it "degraded" too, with `witnessing`; so does a
// stored tree that lacks a tile at its right edge (`tree`): the sealer cannot extend it, and
// proofs through it are refused, even before a record waits to show it.
import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/database.js';
import { unavailable } from '../http/errors.js';
import { missingEdgeTile, sealingStatus, type SealingStatus } from '../modules/audit/evidence/sealing-status.service.js';

const READY_TIMEOUT_MS = 2000;

/** What /health/ready says of witnessing (evidence/witnessing.service.ts): undefined without a policy. */
export interface WitnessingHealth {
  stale: boolean;
  newest_witnessed: { tree_size: number; created_at: string } | null;
  unwitnessed_since: string | null;
  unwitnessed_seconds: number;
}

export function registerHealth(app: FastifyInstance, db: Database, sealStallMs: number, witnessing?: () => Promise<WitnessingHealth | undefined>): void {
  const noStore = { 'cache-control': 'no-store' };
  app.get('/health/live', { schema: { tags: ['operations'], summary: 'The process is up' } }, async (_req, reply) => {
    reply.headers(noStore);
    return { status: 'ok' };
  });

  app.get('/health/ready', {
    schema: {
      tags: ['operations'],
      summary: 'The database answers (503 while it does not); "degraded" when the audit log has stopped being sealed or witnessed',
      description:
        '`status` is `ready`, or `degraded` (still 200) when committed audit records have waited longer than AUDIT_SEAL_STALL_MS for their seal ' +
        'and no seal was made meanwhile; `sealing` then names the first record waiting. The service\'s log says why sealing stopped. With a witness ' +
        'policy, also `degraded` when a checkpoint has waited longer than AUDIT_WITNESS_MAX_AGE_MS for a witnessed one as new: `witnessing` says since when. ' +
        'Also `degraded` when the stored tree lacks a tile at its right edge (`tree.missing_tile`): the sealer cannot extend it, and proofs through it are refused.',
    },
  }, async (_req, reply) => {
    reply.headers(noStore);
    let timer: NodeJS.Timeout | undefined;
    let sealing: SealingStatus;
    let witnessed: WitnessingHealth | undefined;
    let missingTile: string | undefined;
    try {
      [sealing, witnessed, missingTile] = (await Promise.race([
        Promise.all([sealingStatus(db, sealStallMs), witnessing?.(), missingEdgeTile(db)]),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('readiness probe timed out')), READY_TIMEOUT_MS))),
      ])) as [SealingStatus, WitnessingHealth | undefined, string | undefined];
    } catch {
      throw unavailable();
    } finally {
      clearTimeout(timer);
    }
    const stale = witnessed?.stale === true;
    if (!sealing.stalled && !stale && missingTile === undefined) return { status: 'ready', database: db.kind };
    return {
      status: 'degraded',
      database: db.kind,
      ...(sealing.stalled
        ? {
            sealing: {
              stalled: true,
              first_unsealed_id: sealing.waiting!.id,
              waiting_seconds: Math.round(sealing.waiting!.ms / 1000),
              ...(sealing.sinceSealMs !== undefined ? { seconds_since_last_seal: Math.round(sealing.sinceSealMs / 1000) } : {}),
            },
          }
        : {}),
      ...(stale ? { witnessing: witnessed } : {}),
      ...(missingTile !== undefined ? { tree: { missing_tile: missingTile } } : {}),
    };
  });
}
