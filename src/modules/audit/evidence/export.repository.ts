// The statements of the audit log's export (audit/evidence/export.stream.ts): the records, sealed or
// not, that match the filters, a block at a time. Each combination of filters is its own
// statement (db/conditions.ts).
import type { Queryable } from '../../../db/database.js';
import { where } from '../../../db/conditions.js';
import { auditFilterConditions, type AuditFilters, type AuditRow } from '../audit.repository.js';
import { SEALED_FORM_JSON } from './record.sealed-form.js';

const RECORD_COLUMNS = 'a.id, a.actor_id, a.action, a.resource_type, a.resource_id, a."timestamp", a.result, a.metadata, a.ip, a.user_agent, a.request_id';

export type SealedExportRow = AuditRow & { seq: number; leaf: string };
/** A sealed record for an NDJSON line: its sealed form as JSON text, made by PostgreSQL. */
export type SealedLineRow = { seq: number; leaf: string; record_json: string };

/**
 * Sealed records with seq in [from, to) that match the filters, in seq order: as columns (CSV)
 * or as the sealed form's JSON text (NDJSON). The seal's batches are unnested once each; each
 * record by its key (the lateral subquery is not flattened): a block costs the same whatever the
 * filters and the statistics, where a join left to the planner could scan all of audit_log for
 * each block.
 */
export function sealedChunk<R>(q: Queryable, form: 'columns' | 'json', f: AuditFilters, from: number, to: number) {
  const w = where(`export_sealed_${form}`, [
    [(p) => `b.first_seq >= (SELECT COALESCE(max(first_seq), 0) FROM audit_seal_batches WHERE first_seq <= ${p})`, from],
    [(p) => `b.first_seq < ${p}`, to],
    [(p) => `b.first_seq + u.ord - 1 >= ${p}`, from],
    [(p) => `b.first_seq + u.ord - 1 < ${p}`, to],
    ...auditFilterConditions(f, 'a.'),
  ]);
  w.params.push(to - from);
  const columns = form === 'json' ? `${SEALED_FORM_JSON} AS record_json` : RECORD_COLUMNS;
  return q.query<R>(
    `SELECT b.first_seq + u.ord - 1 AS seq, encode(u.leaf, 'base64') AS leaf, ${columns}
       FROM audit_seal_batches b CROSS JOIN LATERAL unnest(b.record_ids, b.leaves) WITH ORDINALITY AS u(id, leaf, ord)
       JOIN LATERAL (SELECT * FROM audit_log r WHERE r.id = u.id OFFSET 0) a ON true
       ${w.clause} ORDER BY b.first_seq, u.ord LIMIT $${w.params.length}`,
    w.params,
    { prepareAs: w.prepareAs },
  );
}

/** Records of these ids that match the filters, in the ids' order. */
export function matchingRecords(q: Queryable, f: AuditFilters, ids: number[]) {
  const w = where('export_pending', [[(p) => `a.id = ANY (${p}::bigint[])`, ids], ...auditFilterConditions(f, 'a.')]);
  w.params.push(ids);
  return q.query<AuditRow>(`SELECT ${RECORD_COLUMNS} FROM audit_log a ${w.clause} ORDER BY array_position($${w.params.length}::bigint[], a.id)`, w.params, { prepareAs: w.prepareAs });
}

