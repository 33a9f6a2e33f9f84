// Liveness (the process answers) and readiness (the database answers). Readiness recovers
// by itself: every probe tries the database afresh.
import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/database.js';
import { unavailable } from '../http/errors.js';

const READY_TIMEOUT_MS = 2000;

export function registerHealth(app: FastifyInstance, db: Database): void {
  const noStore = { 'cache-control': 'no-store' };
  app.get('/health/live', { schema: { tags: ['operations'], summary: 'The process is up' } }, async (_req, reply) => {
    reply.headers(noStore);
    return { status: 'ok' };
  });

  app.get('/health/ready', { schema: { tags: ['operations'], summary: 'The database answers (503 while it does not)' } }, async (_req, reply) => {
    reply.headers(noStore);
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        db.query('SELECT 1'),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('readiness probe timed out')), READY_TIMEOUT_MS))),
      ]);
    } catch {
      throw unavailable();
    } finally {
      clearTimeout(timer);
    }
    return { status: 'ready', database: db.kind };
  });
}
