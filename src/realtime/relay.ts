// Numbers committed events: the relay takes outbox rows in commit order (db/commit-order.ts),
// gives their items the next event_ids as it reads them, and records the batch as one
// outbox_batches row, so that event ids increase in the order their transactions became visible
// and a transaction that commits late is numbered late, never skipped nor put before what it
// saw. Every instance runs one; the round's advisory lock lets one number at a time, and another
// carries on at once if it dies. Each batch announces itself (NOTIFY, at commit) to every
// instance's dispatcher, and hands its events straight to this instance's own.
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../db/database.js';
import type { NumberedEvent } from '../modules/outbox/outbox.events.js';
import { announceEvents, committedOutbox, insertOutboxBatch, lastOutboxBatch } from '../modules/outbox/outbox.repository.js';
import { BackgroundLoop, exclusiveRound } from '../background/background-loop.js';

/**
 * An event this instance's relay numbered, handed straight to its own dispatcher: with the
 * moment (performance.now()) its batch was read, from which delivery measures the emit lag
 * (teamlog_realtime_emit_lag_seconds). Events read back from the database carry none.
 */
export interface RelayedEvent extends NumberedEvent {
  readAt?: number;
}

const RELAY_LOCK = 7_245_010;
/** Outbox rows (committed transactions) per batch: short enough not to hold PGlite's one connection for long. */
const BATCH = 500;
/** The safety net for commits nobody told this instance about (the CLI, an instance that died). */
const POLL_MS = 1000;
/**
 * Rounds start at least this far apart while commits keep coming: a round is a transaction of its
 * own, and one per commit made a lone writer's every request cost two (docs/performance.md). A
 * commit after a quiet moment is numbered at once; while commits keep coming, an event waits at
 * most this long for its round.
 */
const SPACING_MS = 10;

export function createRelay(db: Database, log: FastifyBaseLogger, onNumbered: (events: NumberedEvent[]) => void): BackgroundLoop {
  return new BackgroundLoop({
    name: 'event relay',
    log,
    pollMs: POLL_MS,
    spacingMs: SPACING_MS,
    // Another instance holds the lock: it numbers these rows too; look again soon in case it stopped.
    firstRetryMs: 5,
    round: exclusiveRound(db, RELAY_LOCK, async (tx, last) => {
      // The batch's snapshot is taken by the read that follows: what it holds committed before now.
      const readAt = performance.now();
      const { rows, position } = await committedOutbox.next(tx, last, BATCH);
      if (!position) return 'idle';
      const first = (last?.last_event_id ?? 0) + 1;
      const events: RelayedEvent[] = [];
      for (const row of rows) for (const event of row.items) events.push({ ...event, event_id: first + events.length, readAt });
      insertOutboxBatch(tx, first, events.length, rows.map((r) => r.id), position);
      if (events.length > 0) announceEvents(tx, first + events.length - 1);
      tx.afterCommit(() => onNumbered(events));
      return rows.length >= BATCH ? 'more' : 'idle';
    }, lastOutboxBatch),
  });
}
