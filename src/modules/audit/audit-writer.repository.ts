// The statements of the audit writer (audit/audit.writer.ts, which only the use-case runner
// calls): a record with its transaction's outbox row, and the personal values it names. Both are
// sent, not awaited (Tx.send): they travel with COMMIT.
import type { Tx } from '../../db/database.js';
import { send, statements } from '../../db/statements.js';
import { RECORD_EVENT, type OutboxEvent } from '../outbox/outbox.events.js';
import { itemsParam, outboxInsert } from '../outbox/outbox.repository.js';

const S = statements('audit-writer', {
  // The record, then the transaction's outbox row: the change's events ($10, a JSON array,
  // possibly empty, as text) and, appended to them, the record's /admin event, which names it.
  insert: {
    text: `WITH record AS (
    INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id
  )
  ${outboxInsert(`(left($10::text, -1) || CASE WHEN $10::text = '[]' THEN '' ELSE ',' END
    || '{"name":"${RECORD_EVENT}","room":"admin","payload":{"id":' || record.id || '}}]')::json FROM record`)}`,
    prepare: true,
  },
  // A batch's records and its one outbox row (use-cases/batch.ts), in one statement. Each run's
  // record id is drawn first, beside its run's number (ord), so that its /admin event follows
  // that run's events whatever order the rows are inserted in. $1…$9 the records' columns (null
  // for a run without a record), $10 each run's events (JSON arrays, as text), $11 whether it
  // has a record. A batch with no events at all writes no outbox row.
  insertBatch: {
    text: `WITH input AS (
    SELECT CASE WHEN r.audited THEN nextval('audit_log_id_seq') END AS id, r.*
      FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bool[])
           WITH ORDINALITY AS r(actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id, events, audited, ord)
  ), records AS (
    INSERT INTO audit_log (id, actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
    OVERRIDING SYSTEM VALUE
    SELECT id, actor_id, action, resource_type, resource_id, result, metadata::jsonb, ip, user_agent, request_id FROM input WHERE audited ORDER BY id
  )
  ${outboxInsert(`json_agg(x.item ORDER BY x.ord, x.n) FROM (
      SELECT i.ord, e.n, e.item FROM input i CROSS JOIN LATERAL json_array_elements(i.events::json) WITH ORDINALITY AS e(item, n)
      UNION ALL
      SELECT i.ord, 2147483647, json_build_object('name', '${RECORD_EVENT}', 'room', 'admin', 'payload', json_build_object('id', i.id)) FROM input i WHERE i.audited
    ) x HAVING count(*) > 0`)}`,
    prepare: true,
  },
  // Salted refs are never shared, so no conflict is expected: one would fail the transaction
  // rather than leave a record pointing at another record's row.
  insertPersonalData: `INSERT INTO audit_personal_data (ref, subject_user_id, value, salt)
  SELECT ref, $2::bigint, value, decode(salt, 'hex') FROM unnest($1::text[], $3::text[], $4::text[]) AS p(ref, value, salt)`,
});

/**
 * Sends a record, its columns in the order of the insert (actor_id … request_id), with the
 * transaction's outbox row: `events`, then the record's own /admin event.
 */
export function sendAuditRecord(tx: Tx, columns: unknown[], events: OutboxEvent[]): void {
  send(tx, S.insert, [...columns, itemsParam(events)]);
}

/**
 * Sends a batch's records (`records[i]`: run i's columns as sendAuditRecord takes them, or
 * undefined for a run without one) and its one outbox row: run by run, the run's events, then its
 * record's /admin event.
 */
export function sendAuditBatch(tx: Tx, records: ReadonlyArray<unknown[] | undefined>, events: ReadonlyArray<OutboxEvent[]>): void {
  const column = (i: number) => records.map((r) => (r ? r[i] : null));
  send(tx, S.insertBatch, [...Array.from({ length: 9 }, (_, i) => column(i)), events.map(itemsParam), records.map((r) => r !== undefined)]);
}

/** Sends the personal values a record names, each under its own salted ref. */
export function sendPersonalData(tx: Tx, subject: number | null, values: Array<{ ref: string; value: string; salt: string }>): void {
  send(tx, S.insertPersonalData, [values.map((p) => p.ref), subject, values.map((p) => p.value), values.map((p) => p.salt)]);
}
