// Liveness (the process answers) and readiness (the database answers). Readiness recovers
// by itself: every probe tries the database afresh. It also says whether the audit log is being
// sealed: records that wait for their seal while no seal is made (every sealer stopped on
// evidence it cannot verify, or AUDIT_SEALING off everywhere) make the service "degraded" — it
// still answers (200), and the body names the first record waiting.
import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/database.js';
import { unavailable } from '../http/errors.js';
import { sealingStatus, type SealingStatus } from '../modules/audit/evidence/sealing-status.service.js';

const READY_TIMEOUT_MS = 2000;

export function registerHealth(app: FastifyInstance, db: Database, sealStallMs: number): void {
  const noStore = { 'cache-control': 'no-store' };
  app.get('/health/live', { schema: { tags: ['operations'], summary: 'The process is up' } }, async (_req, reply) => {
    reply.headers(noStore);
    return { status: 'ok' };
  });

  app.get('/health/ready', {
    schema: {
      tags: ['operations'],
      summary: 'The database answers (503 while it does not); "degraded" when the audit log has stopped being sealed',
      description:
        '`status` is `ready`, or `degraded` (still 200) when committed audit records have waited longer than AUDIT_SEAL_STALL_MS for their seal ' +
        'and no seal was made meanwhile; `sealing` then names the first record waiting. The service\'s log says why sealing stopped.',
    },
  }, async (_req, reply) => {
    reply.headers(noStore);
    let timer: NodeJS.Timeout | undefined;
    let sealing: SealingStatus;
    try {
      sealing = (await Promise.race([
        sealingStatus(db, sealStallMs),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('readiness probe timed out')), READY_TIMEOUT_MS))),
      ])) as SealingStatus;
    } catch {
      throw unavailable();
    } finally {
      clearTimeout(timer);
    }
    if (!sealing.stalled) return { status: 'ready', database: db.kind };
    return {
      status: 'degraded',
      database: db.kind,
      sealing: {
        stalled: true,
        first_unsealed_id: sealing.waiting!.id,
        waiting_seconds: Math.round(sealing.waiting!.ms / 1000),
        ...(sealing.sinceSealMs !== undefined ? { seconds_since_last_seal: Math.round(sealing.sinceSealMs / 1000) } : {}),
      },
    };
  });
}
