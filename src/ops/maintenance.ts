// Housekeeping that every instance may run (the deletes are idempotent): real-time events are
// kept EVENT_RETENTION_HOURS, idempotency keys 24 hours, counted login failures only as long as
// they count, sessions 30 days past their end. A background loop (background-loop.ts) with no
// work of its own to be woken for: its poll is its schedule.
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../db/database.js';
import { pruneIdempotencyKeys } from '../http/idempotency.repository.js';
import { pruneLoginFailures } from '../modules/auth/auth.throttle.js';
import { pruneEvents } from '../modules/outbox/outbox.repository.js';
import { pruneExpiredSessions } from '../modules/sessions/sessions.repository.js';
import { BackgroundLoop } from './background-loop.js';

const EVERY_MS = 10 * 60 * 1000;

export async function runMaintenance(db: Database, eventRetentionHours: number): Promise<void> {
  await pruneEvents(db, eventRetentionHours);
  await pruneIdempotencyKeys(db);
  await pruneLoginFailures(db);
  await pruneExpiredSessions(db);
}

/** Started with the server; a failed round is tried again after a backoff, then on schedule. */
export function maintenanceLoop(db: Database, eventRetentionHours: number, log: FastifyBaseLogger): BackgroundLoop {
  return new BackgroundLoop({
    name: 'maintenance',
    log,
    pollMs: EVERY_MS,
    firstRetryMs: 60_000,
    maxRetryMs: EVERY_MS,
    round: async () => {
      await runMaintenance(db, eventRetentionHours);
      return 'idle';
    },
  });
}
