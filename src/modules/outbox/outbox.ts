// The events outbox: rows written in the same transaction as their change, so that the
// real-time relay delivers them after commit (never for a rolled-back change) and replays
// them for 24 hours. Each row carries the committing transaction's id (set by default).
// Rows are sent, not awaited (Tx.send): they travel with the transaction's next statement.
import type { Queryable, Tx } from '../../db/database.js';
import { query, send, statements } from '../../db/statements.js';

export interface OutboxEvent {
  /** Socket.IO event name, e.g. `task-updated`. */
  name: string;
  /** Target room: `user:<id>`, `project:<id>`, `general` or `admin`. */
  room: string;
  payload: Record<string, unknown>;
}

/**
 * The outbox insert with its parameters numbered from `first` (names, rooms and payloads, as
 * arrays: see eventColumns), for a statement that writes events beside another row: the audit
 * writer sends a change's record and its events as one statement.
 */
export function eventsInsert(first: number): string {
  return `INSERT INTO events (name, room, payload)
     SELECT * FROM unnest($${first}::text[], $${first + 1}::text[], $${first + 2}::jsonb[])`;
}

/** The parameters of eventsInsert: one array per column, in the events' order (ids follow it). */
export function eventColumns(events: OutboxEvent[]): [string[], string[], string[]] {
  return [events.map((e) => e.name), events.map((e) => e.room), events.map((e) => JSON.stringify(e.payload))];
}

const S = statements('outbox', {
  insert: { text: eventsInsert(1), prepare: true },
  prune: `DELETE FROM events WHERE created_at < now() - interval '24 hours'`,
});

export function addEvents(tx: Tx, events: OutboxEvent[]): void {
  if (events.length === 0) return;
  send(tx, S.insert, eventColumns(events));
}

export const pruneEvents = (q: Queryable) => query(q, S.prune);
