// Numbers committed outbox rows: the commit-order worker (db/commit-order.ts) takes them in
// (xact_id, id) order and gives them the next event_ids, so that event ids increase in the order
// their transactions became visible, and a transaction that commits late is numbered late,
// never skipped. Every instance runs one; the batch's advisory lock lets one number at a time,
// and another carries on at once if it dies. Each batch announces itself (NOTIFY, at commit)
// to every instance's dispatcher, and hands its rows straight to this instance's own.
import type { FastifyBaseLogger } from 'fastify';
import { CommitOrderWorker } from '../db/commit-order.js';
import type { Database } from '../db/database.js';
import { announceEvents, eventsWaiting, numberEvents, type NumberedEvent } from '../modules/outbox/outbox.js';

const SEQUENCER_LOCK = 7_245_010;
/** Rows numbered per transaction: short enough not to hold PGlite's one connection for long. */
const BATCH = 500;
/** The safety net for rows nobody told this instance about (the CLI, an instance that died). */
const POLL_MS = 1000;

export function createSequencer(db: Database, log: FastifyBaseLogger, onNumbered: (events: NumberedEvent[]) => void): CommitOrderWorker {
  let numbered: NumberedEvent[] = [];
  return new CommitOrderWorker({
    name: 'outbox sequencer',
    db,
    lockKey: SEQUENCER_LOCK,
    batchSize: BATCH,
    pollMs: POLL_MS,
    log,
    async batch(tx, limit) {
      numbered = (await numberEvents(tx, limit)).sort((a, b) => a.event_id - b.event_id);
      if (numbered.length > 0) announceEvents(tx, numbered[numbered.length - 1]!.event_id);
      return { processed: numbered.length, waiting: numbered.length < limit && (await eventsWaiting(tx)) };
    },
    afterCommit: () => onNumbered(numbered),
  });
}
