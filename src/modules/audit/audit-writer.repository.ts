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

/** Sends the personal values a record names, each under its own salted ref. */
export function sendPersonalData(tx: Tx, subject: number | null, values: Array<{ ref: string; value: string; salt: string }>): void {
  send(tx, S.insertPersonalData, [values.map((p) => p.ref), subject, values.map((p) => p.value), values.map((p) => p.salt)]);
}
