// Housekeeping that every instance may run (the deletes are idempotent): real-time events are
// kept EVENT_RETENTION_HOURS, idempotency keys 24 hours, counted login failures only as long as
// they count, sessions 30 days past their end.
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../db/database.js';
import { pruneIdempotencyKeys } from '../http/idempotency.repository.js';
import { pruneLoginFailures } from '../modules/auth/throttle.js';
import { pruneEvents } from '../modules/outbox/outbox.js';
import { pruneExpiredSessions } from '../modules/sessions/sessions.repository.js';

const EVERY_MS = 10 * 60 * 1000;

export async function runMaintenance(db: Database, eventRetentionHours: number): Promise<void> {
  await pruneEvents(db, eventRetentionHours);
  await pruneIdempotencyKeys(db);
  await pruneLoginFailures(db);
  await pruneExpiredSessions(db);
}

export function scheduleMaintenance(db: Database, eventRetentionHours: number, log: FastifyBaseLogger): () => void {
  const timer = setInterval(() => {
    runMaintenance(db, eventRetentionHours).catch((err) => log.warn({ err }, 'maintenance failed; will retry'));
  }, EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
