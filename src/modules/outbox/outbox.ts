// The events outbox: rows written in the same transaction as their change, so that the
// real-time relay delivers them after commit (never for a rolled-back change) and replays
// them for 24 hours. Each row carries the committing transaction's id (set by default).
// Rows are sent, not awaited (Tx.send): they travel with the transaction's next statement.
import type { Tx } from '../../db/database.js';

export interface OutboxEvent {
  /** Socket.IO event name, e.g. `task-updated`. */
  name: string;
  /** Target room: `user:<id>`, `project:<id>`, `general` or `admin`. */
  room: string;
  payload: Record<string, unknown>;
}

export function addEvents(tx: Tx, events: OutboxEvent[]): void {
  if (events.length === 0) return;
  tx.send(
    `INSERT INTO events (name, room, payload)
     SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[])`,
    [events.map((e) => e.name), events.map((e) => e.room), events.map((e) => JSON.stringify(e.payload))],
    { prepareAs: 'events_insert' },
  );
}
