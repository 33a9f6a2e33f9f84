// Housekeeping that every instance may run (the deletes are idempotent): real-time events are
// kept EVENT_RETENTION_HOURS, idempotency keys 24 hours, counted login failures only as long as
// they count, sessions 30 days past their end. And the summaries of the audit log's BRIN
// (migrations/0013), which the id ceiling of audit search reads. A background loop
// (background-loop.ts) with no work of its own to be woken for: its poll is its schedule.
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../db/database.js';
import { pruneIdempotencyKeys } from '../http/idempotency.repository.js';
import { pruneLoginFailures } from '../modules/auth/auth.throttle.js';
import { summarizeAuditTimeIndex } from '../modules/audit/audit.repository.js';
import { pruneEvents } from '../modules/outbox/outbox.repository.js';
import { pruneExpiredSessions } from '../modules/sessions/sessions.repository.js';
import { BackgroundLoop } from '../background/background-loop.js';

const PRUNE_EVERY_MS = 10 * 60 * 1000;
/**
 * The BRIN's summaries are made every minute, not with the pruning every 10. A block range without
 * a summary is read whole by every id-ceiling lookup (docs/audit-search.md), and on PGlite, which
 * has no autovacuum to summarize them, ~150 audited writes/s leave ~90,000 records unsummarized
 * in 10 minutes (over 100 ms a lookup; 50,000 cost ~70 ms), ~9,000 in one. A round with nothing to
 * summarize looks at one range (the newest filled one has its summary) under a lock it does not
 * wait for, so once a minute costs nothing worth counting, on every instance; with autovacuum on,
 * autosummarize has mostly done the work already. A count of audited writes could trigger it
 * sooner, but the commit signal is not this loop's (src/server.ts wires it) and misses the CLI's
 * and other instances' writes; the minute bounds the tail without either. The first round runs at
 * start (BackgroundLoop.start), so writes made while no service ran are summarized at once.
 */
const SUMMARIZE_EVERY_MS = 60 * 1000;

export async function runMaintenance(db: Database, eventRetentionHours: number): Promise<void> {
  await pruneEvents(db, eventRetentionHours);
  await pruneIdempotencyKeys(db);
  await pruneLoginFailures(db);
  await pruneExpiredSessions(db);
  await summarizeAuditTimeIndex(db);
}

/** Started with the server; a failed round is tried again after a backoff, then on schedule. */
export function maintenanceLoop(db: Database, eventRetentionHours: number, log: FastifyBaseLogger): BackgroundLoop {
  let prunedAt = -Infinity;
  return new BackgroundLoop({
    name: 'maintenance',
    log,
    pollMs: SUMMARIZE_EVERY_MS,
    firstRetryMs: 60_000,
    maxRetryMs: PRUNE_EVERY_MS,
    round: async () => {
      if (Date.now() - prunedAt < PRUNE_EVERY_MS) {
        await summarizeAuditTimeIndex(db);
      } else {
        await runMaintenance(db, eventRetentionHours);
        prunedAt = Date.now();
      }
      return 'idle';
    },
  });
}
