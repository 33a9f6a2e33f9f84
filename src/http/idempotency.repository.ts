// SQL for idempotency keys (http/idempotency.ts).
import type { Queryable } from '../db/database.js';
import { query, statements } from '../db/statements.js';

export const IDEMPOTENCY_TTL_HOURS = 24;
const ABANDONED_CLAIM_MINUTES = 5;

export interface KeyRef {
  scope: string;
  path: string;
  key: string;
}

export interface StoredResponse {
  request_hash: string;
  status_code: number | null;
  response_headers: Record<string, string> | null;
  response_body: string | null;
}

const S = statements('idempotency', {
  // Claims the key; an expired claim (over 24 h old) is taken over as if absent.
  claim: `INSERT INTO idempotency_keys (scope, method, path, key, request_hash) VALUES ($1, 'POST', $2, $3, $4)
  ON CONFLICT (scope, method, path, key) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, status_code = NULL, response_headers = NULL, response_body = NULL, created_at = now()
    WHERE idempotency_keys.created_at < now() - make_interval(hours => $5)
       -- A claim never completed (its process died mid-request) is abandoned after
       -- longer than any request can run, instead of blocking the key for 24 h.
       OR (idempotency_keys.status_code IS NULL AND idempotency_keys.created_at < now() - make_interval(mins => $6))
  RETURNING 1`,
  find: `SELECT request_hash, status_code, response_headers, response_body FROM idempotency_keys
   WHERE scope = $1 AND method = 'POST' AND path = $2 AND key = $3`,
  complete: `UPDATE idempotency_keys SET status_code = $4, response_headers = $5, response_body = $6
   WHERE scope = $1 AND method = 'POST' AND path = $2 AND key = $3`,
  release: `DELETE FROM idempotency_keys WHERE scope = $1 AND method = 'POST' AND path = $2 AND key = $3`,
  prune: `DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(hours => $1)`,
});

export async function claimKey(q: Queryable, k: KeyRef, requestHash: string): Promise<boolean> {
  return (await query(q, S.claim, [k.scope, k.path, k.key, requestHash, IDEMPOTENCY_TTL_HOURS, ABANDONED_CLAIM_MINUTES])).length === 1;
}

export const findKey = async (q: Queryable, k: KeyRef) => (await query<StoredResponse>(q, S.find, [k.scope, k.path, k.key]))[0];

export const completeKey = (q: Queryable, k: KeyRef, status: number, headers: Record<string, string>, body: string) =>
  query(q, S.complete, [k.scope, k.path, k.key, status, JSON.stringify(headers), body]);

/** Nothing was done (a 5xx): a retry may run again. */
export const releaseKey = (q: Queryable, k: KeyRef) => query(q, S.release, [k.scope, k.path, k.key]);

export const pruneIdempotencyKeys = (q: Queryable) => query(q, S.prune, [IDEMPOTENCY_TTL_HOURS]);
