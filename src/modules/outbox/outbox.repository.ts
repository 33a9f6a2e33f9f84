// The statements of the outbox (outbox/outbox.events.ts says what it holds): a transaction's row written
// with it, the relay's reader and its batches, what the dispatcher and replay read back, pruning.
import { committedReader, type PositionColumns } from '../../db/commit-order.js';
import type { Queryable, Tx } from '../../db/database.js';
import { query, send, statements } from '../../db/statements.js';
import { RECORD_JSON_SQL } from '../audit/audit.repository.js';
import type { NumberedEvent, OutboxEvent, OutboxRow } from './outbox.events.js';

export interface OutboxBatchRow extends PositionColumns {
  last_event_id: number;
}

/** An outbox row's items as the one json parameter (text) it is written with. */
export const itemsParam = (events: OutboxEvent[]): string => JSON.stringify(events);

/** The insert of one outbox row whose items are the json expression `items` (the audit writer appends its record's event to the change's). */
export const outboxInsert = (items: string) => `INSERT INTO outbox (items) SELECT ${items}`;

// The outbox never reads after a point of the previous release's order (the migration numbered
// what that release left): its batches have no after_xact and after_id.
const POSITION_COLUMNS = 'after_snapshot::text, NULL::text AS after_xact, NULL::bigint AS after_id, snapshot::text, through_id';

/**
 * The items of the batches from the one holding event `$1 + 1` on (the first to end past it),
 * each with its event_id: a batch's events are its rows' items in row order, numbered from
 * first_event_id. Batches and their rows are pruned together, so no row of a kept batch is missing.
 */
const numberedFrom = (filter: string) => `SELECT b.first_event_id + x.n - 1 AS event_id, x.item->>'name' AS name, x.item->>'room' AS room, x.item->'payload' AS payload
  FROM outbox_batches b
  CROSS JOIN LATERAL (
    SELECT i.item, row_number() OVER (ORDER BY r.ord, i.ord) AS n
      FROM unnest(b.row_ids) WITH ORDINALITY AS r(id, ord)
      JOIN outbox o ON o.id = r.id
      CROSS JOIN LATERAL json_array_elements(o.items) WITH ORDINALITY AS i(item, ord)
  ) x
 WHERE b.last_event_id > $1 AND b.first_event_id + x.n - 1 > $1${filter}
 ORDER BY b.last_event_id, x.n LIMIT $2`;

const S = statements('outbox', {
  insert: { text: `INSERT INTO outbox (items) VALUES ($1::json)`, prepare: true },
  lastBatch: `SELECT last_event_id, ${POSITION_COLUMNS} FROM outbox_batches ORDER BY last_event_id DESC LIMIT 1`,
  insertBatch: `INSERT INTO outbox_batches (first_event_id, event_count, row_ids, after_snapshot, snapshot, through_id)
   VALUES ($1, $2, $3::bigint[], $4::pg_snapshot, $5::pg_snapshot, $6)`,
  // Tells every instance's dispatcher (LISTEN) that events up to $1 are numbered; sent at commit.
  announce: `SELECT pg_notify('teamlog_events', $1::text)`,
  after: numberedFrom(''),
  // What a reconnecting client missed: the replayable events of its rooms, in order.
  replay: numberedFrom(` AND x.item->>'room' = ANY ($3) AND x.item->>'name' = ANY ($4)`),
  // The records that record events name, as those events carry them to clients.
  records: `SELECT ${RECORD_JSON_SQL} AS record FROM audit_log a WHERE a.id = ANY ($1::bigint[])`,
  // The last event_id given out, and the oldest still kept (null when none is).
  bounds: `SELECT (SELECT max(last_event_id) FROM outbox_batches) AS last,
     (SELECT first_event_id FROM outbox_batches WHERE event_count > 0 ORDER BY last_event_id LIMIT 1) AS oldest`,
  // The oldest batches first, a bounded number at a time, with their rows; never the newest batch
  // (it says where the relay stands and which event_id comes next).
  prune: `WITH doomed AS (
    DELETE FROM outbox_batches WHERE last_event_id IN (
      SELECT last_event_id FROM outbox_batches
       WHERE created_at < now() - make_interval(hours => $1)
         AND last_event_id < (SELECT max(last_event_id) FROM outbox_batches)
       ORDER BY last_event_id LIMIT $2)
    RETURNING row_ids
  ), rows AS (
    DELETE FROM outbox WHERE id IN (SELECT unnest(row_ids) FROM doomed)
  )
  SELECT count(*)::int AS n FROM doomed`,
});

/**
 * The relay's reader: committed outbox rows, in commit order (db/commit-order.ts). Their record
 * events name their records ({id}); delivery reads a record only when a socket of its instance
 * is in the event's room (realtime/delivery.ts): building every record as JSON here was the
 * relay's largest cost under load, for an /admin room nobody had joined (docs/performance.md).
 */
export const committedOutbox = committedReader<OutboxRow>('outbox-reader', 'outbox', 't.items');

/** The events of a transaction, as its one outbox row (none for none). */
export function addEvents(tx: Tx, events: OutboxEvent[]): void {
  if (events.length === 0) return;
  send(tx, S.insert, [itemsParam(events)]);
}

export const lastOutboxBatch = async (q: Queryable) => (await query<OutboxBatchRow>(q, S.lastBatch))[0];

export function insertOutboxBatch(tx: Tx, firstEventId: number, eventCount: number, rowIds: number[], p: PositionColumns): void {
  send(tx, S.insertBatch, [firstEventId, eventCount, rowIds, p.after_snapshot, p.snapshot, p.through_id]);
}

export const announceEvents = (tx: Tx, upTo: number) => send(tx, S.announce, [upTo]);
export const eventsAfter = (q: Queryable, eventId: number, limit: number) => query<NumberedEvent>(q, S.after, [eventId, limit]);
export const replayEvents = (q: Queryable, afterId: number, rooms: string[], names: readonly string[], limit: number) =>
  query<NumberedEvent>(q, S.replay, [afterId, limit, rooms, names]);

/** The records of these ids as record events carry them (RECORD_JSON_SQL), by id; a record that is gone is missing. */
export async function recordsByIds(q: Queryable, ids: number[]): Promise<Map<number, Record<string, unknown>>> {
  const rows = await query<{ record: Record<string, unknown> }>(q, S.records, [ids]);
  return new Map(rows.map((r) => [Number(r.record.id), r.record]));
}

export async function eventBounds(q: Queryable): Promise<{ last: number; oldest: number | null }> {
  const row = (await query<{ last: number | null; oldest: number | null }>(q, S.bounds))[0]!;
  return { last: row.last ?? 0, oldest: row.oldest };
}

/** Deletes the batches (and their rows) older than the retention, `chunk` batches a statement; answers how many batches went. */
export async function pruneEvents(q: Queryable, retentionHours: number, chunk = 10_000): Promise<number> {
  let pruned = 0;
  for (;;) {
    const n = (await query<{ n: number }>(q, S.prune, [retentionHours, chunk]))[0]!.n;
    pruned += n;
    if (n < chunk) return pruned;
  }
}
