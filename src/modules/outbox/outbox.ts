// The events outbox: rows written in the same transaction as their change, so that they are
// delivered after commit (never for a rolled-back change) and replayed from here for
// EVENT_RETENTION_HOURS. Each row carries its transaction's id; once the transaction has
// committed, the sequencer (realtime/sequencer.ts) gives the row its event_id, in commit order.
// Rows are sent, not awaited (Tx.send): they travel with the transaction's next statement.
import { COMMITTED } from '../../db/commit-order.js';
import type { Queryable, Tx } from '../../db/database.js';
import { query, send, statements } from '../../db/statements.js';

export interface OutboxEvent {
  /** Socket.IO event name, e.g. `task-updated`. */
  name: string;
  /** Target room: `user:<id>`, `project:<id>`, `general` or `admin`. */
  room: string;
  payload: Record<string, unknown>;
}

/** An outbox row that has its event_id. */
export interface NumberedEvent extends OutboxEvent {
  event_id: number;
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

const COLUMNS = 'event_id, name, room, payload';

const S = statements('outbox', {
  insert: { text: eventsInsert(1), prepare: true },
  // Numbers the committed rows not numbered yet, oldest transaction first, with the next ids
  // of event_sequence (dense: the sequencer's advisory lock makes it the only writer).
  number: `WITH batch AS (
    SELECT id, row_number() OVER (ORDER BY xact_id, id) AS n FROM events
     WHERE event_id IS NULL AND ${COMMITTED}
     ORDER BY xact_id, id LIMIT $1
  ), counter AS (
    UPDATE event_sequence SET last_event_id = last_event_id + (SELECT count(*) FROM batch)
     WHERE EXISTS (SELECT 1 FROM batch)
    RETURNING last_event_id - (SELECT count(*) FROM batch) AS before
  )
  UPDATE events e SET event_id = counter.before + batch.n FROM batch, counter WHERE e.id = batch.id
  RETURNING ${COLUMNS}`,
  // Committed rows still unnumbered after a batch: they wait behind a transaction still running.
  // The first in the partial index's order, not EXISTS (evidence.repository.ts, "waiting", says why).
  waiting: 'SELECT true AS waiting FROM events WHERE event_id IS NULL ORDER BY xact_id, id LIMIT 1',
  // Tells every instance's dispatcher (LISTEN) that events up to $1 are numbered; sent at commit.
  announce: `SELECT pg_notify('teamlog_events', $1::text)`,
  after: `SELECT ${COLUMNS} FROM events WHERE event_id > $1 ORDER BY event_id LIMIT $2`,
  // What a reconnecting client missed: the replayable events of its rooms, in order.
  replay: `SELECT ${COLUMNS} FROM events WHERE event_id > $1 AND room = ANY ($2) AND name = ANY ($3) ORDER BY event_id LIMIT $4`,
  // The last event_id given out, and the oldest still kept (null when none is).
  bounds: 'SELECT (SELECT last_event_id FROM event_sequence) AS last, (SELECT min(event_id) FROM events) AS oldest',
  prune: 'DELETE FROM events WHERE created_at < now() - make_interval(hours => $1)',
});

export function addEvents(tx: Tx, events: OutboxEvent[]): void {
  if (events.length === 0) return;
  send(tx, S.insert, eventColumns(events));
}

export const numberEvents = (tx: Tx, limit: number) => query<NumberedEvent>(tx, S.number, [limit]);
export const eventsWaiting = async (tx: Tx) => (await query<{ waiting: boolean }>(tx, S.waiting)).length > 0;
export const announceEvents = (tx: Tx, upTo: number) => send(tx, S.announce, [upTo]);
export const eventsAfter = (q: Queryable, eventId: number, limit: number) => query<NumberedEvent>(q, S.after, [eventId, limit]);
export const replayEvents = (q: Queryable, afterId: number, rooms: string[], names: readonly string[], limit: number) =>
  query<NumberedEvent>(q, S.replay, [afterId, rooms, names, limit]);

export async function eventBounds(q: Queryable): Promise<{ last: number; oldest: number | null }> {
  return (await query<{ last: number; oldest: number | null }>(q, S.bounds))[0]!;
}

export const pruneEvents = (q: Queryable, retentionHours: number) => query(q, S.prune, [retentionHours]);
