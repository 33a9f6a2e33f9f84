// What a leaf commits to (docs/audit-integrity.md §1): the record in its API shape, with each
// personal value as the {"$personal": ref} the row stores, canonicalized by RFC 8785.
import type { AuditRow } from '../audit.repository.js';
import { canonicalize, fieldsCanonicalizer } from './jcs.js';
import { leafHash, type Hash } from './merkle.js';

/** The sealed form's fields, in the API's order (export.ts builds the same form in SQL). */
export const SEALED_FIELDS = ['id', 'actor_id', 'action', 'resource_type', 'resource_id', 'timestamp', 'result', 'metadata', 'ip', 'user_agent', 'request_id'] as const;

export type SealedField = (typeof SEALED_FIELDS)[number];

export type SealedRecord = Pick<AuditRow, SealedField>;

/** The sealed form of a stored row: exactly the API's fields (a row may carry more columns). */
export function sealedForm(row: AuditRow): SealedRecord {
  return {
    id: row.id,
    actor_id: row.actor_id,
    action: row.action,
    resource_type: row.resource_type,
    resource_id: row.resource_id,
    timestamp: row.timestamp,
    result: row.result,
    metadata: row.metadata,
    ip: row.ip,
    user_agent: row.user_agent,
    request_id: row.request_id,
  };
}

/** SHA-256(0x00 ‖ JCS(record)) of a sealed form as it stands, every key it has included: for sealed forms read from outside (an export), where an extra key must change the leaf. */
export const recordLeaf = (record: SealedRecord): Hash => leafHash(canonicalize(record));

const canonicalSealedForm = fieldsCanonicalizer(SEALED_FIELDS);

/** recordLeaf(sealedForm(row)) without the copy: the sealer and the verifier run it on every row they read. */
export const rowLeaf = (row: SealedRecord): Hash => leafHash(canonicalSealedForm(row));
