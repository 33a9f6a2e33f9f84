// The outbox: a transaction's real-time events, written in that transaction as one row (its
// items, in the order they were emitted), so that they are delivered after commit, never for a
// rolled-back change, and replayed from here for EVENT_RETENTION_HOURS. A row is never updated:
// the relay (realtime/relay.ts) reads committed rows in commit order (db/commit-order.ts) and
// numbers their items as it reads, keeping one outbox_batches row per batch; replay reads the
// events back through those rows (the statements: outbox.repository.ts).
import type { OutboxEvent } from '../../domain/events.js';

export type { NumberedEvent, OutboxEvent } from '../../domain/events.js';

/**
 * The /admin event of an audit record (docs/api.md 5.7). It is written and numbered naming its
 * record (`{id}`): the record is not written twice, and delivery reads it only for an instance
 * that has a socket in the event's room (realtime/delivery.ts, packetsFor).
 */
export const RECORD_EVENT = 'audit-record';

/** A committed outbox row as the relay reads it: its items, in the order they were emitted (a record event names its record only). */
export interface OutboxRow {
  items: OutboxEvent[];
}
