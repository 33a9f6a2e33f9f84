// What a leaf commits to (docs/audit-integrity.md §1): the record in its API shape, with each
// personal value as the {"$personal": ref} the row stores, canonicalized by RFC 8785.
import type { AuditRow } from '../audit.repository.js';
import { canonicalize } from './jcs.js';
import { leafHash, type Hash } from './merkle.js';

export type SealedRecord = Pick<AuditRow, 'id' | 'actor_id' | 'action' | 'resource_type' | 'resource_id' | 'timestamp' | 'result' | 'metadata' | 'ip' | 'user_agent' | 'request_id'>;

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

/** SHA-256(0x00 ‖ JCS(sealed record)). */
export const recordLeaf = (record: SealedRecord): Hash => leafHash(canonicalize(record));
