// The statement of delivery (delivery.ts): how old the batches of events it sent are, for the
// emit lag of events another instance numbered.
import type { Queryable } from '../db/database.js';
import { query, statements } from '../db/statements.js';

const S = statements('delivery', {
  // How long ago the batches holding events from $1 on were numbered, by the database's clock
  // (which stamped them): a range of the primary key, at most $2 batches.
  batchAges: `SELECT first_event_id, last_event_id, EXTRACT(EPOCH FROM clock_timestamp() - created_at)::float8 AS age_seconds
   FROM outbox_batches WHERE last_event_id >= $1 AND event_count > 0 ORDER BY last_event_id LIMIT $2`,
});

/** The batches holding events from `fromEventId` on (at most `limit`), each with how long ago it was numbered. */
export const batchAges = (db: Queryable, fromEventId: number, limit: number) =>
  query<{ first_event_id: number; last_event_id: number; age_seconds: number }>(db, S.batchAges, [fromEventId, limit]);
