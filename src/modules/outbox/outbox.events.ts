// The outbox: a transaction's real-time events, written in that transaction as one row (its
// items, in the order they were emitted), so that they are delivered after commit, never for a
// rolled-back change, and replayed from here for EVENT_RETENTION_HOURS. A row is never updated:
// the relay (realtime/relay.ts) reads committed rows in commit order (db/commit-order.ts) and
// numbers their items as it reads, keeping one outbox_batches row per batch; replay reads the
// events back through those rows (the statements: outbox.repository.ts).
import type { OutboxEvent } from '../../domain/events.js';

export type { NumberedEvent, OutboxEvent } from '../../domain/events.js';

/**
 * The /admin event of an audit record (docs/api.md 5.7). It is written naming its record (`{id}`)
 * and read carrying it: the record is not written twice, and delivery reads nothing back.
 */
export const RECORD_EVENT = 'audit-record';

/** A committed outbox row as the relay reads it: its items, and the records they name, by id (as JSON text keys). */
export interface OutboxRow {
  items: OutboxEvent[];
  records: Record<string, Record<string, unknown>> | null;
}

/** The items of an outbox row as read, each record event carrying its record (or dropped: a record gone behind the service's back shows nothing). */
export function eventsOf(row: OutboxRow): OutboxEvent[] {
  const events: OutboxEvent[] = [];
  for (const item of row.items) {
    if (item.name !== RECORD_EVENT) events.push(item);
    else {
      const record = row.records?.[String(item.payload.id)];
      events.push({ name: item.name, room: item.room, payload: record ?? {} });
    }
  }
  return events;
}
