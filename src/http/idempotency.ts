// Idempotency-Key on POST (API.md section 1): scoped to the caller, method and path; a retry
// with the same key and body within 24 h replays the first response and creates nothing;
// another body gets 409 IDEMPOTENCY_KEY_REUSED; a first request still running gets 409 with
// Retry-After. Kept in the database, so every instance sees every key.
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/database.js';
import { API_PREFIX, requestPath } from './conventions.js';
import { AppError, conflict, invalid } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    idempotency: { scope: string; path: string; key: string } | undefined;
  }
}

export const IDEMPOTENCY_TTL_HOURS = 24;
const ABANDONED_CLAIM_MINUTES = 5;

/** The same fields in another order are the same request. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}
const REPLAYED_HEADERS = ['content-type', 'location', 'etag'];

export function registerIdempotency(app: FastifyInstance, db: Database): void {
  app.decorateRequest('idempotency', undefined);

  app.addHook('preHandler', async (request, reply) => {
    if (request.method !== 'POST' || request.headers['idempotency-key'] === undefined) return;
    if (!request.url.startsWith(API_PREFIX) || request.url.startsWith(`${API_PREFIX}/auth/`)) return;
    const key = request.headers['idempotency-key'];
    if (typeof key !== 'string' || key.length < 1 || key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
      throw invalid('Idempotency-Key', 'must be 1..255 visible ASCII characters', 'header');
    }
    const scope = request.actor ? `user:${request.actor.id}` : `ip:${request.ip}`;
    const path = requestPath(request);
    const requestHash = createHash('sha256').update(canonicalJson(request.body ?? null)).digest('hex');

    // Claim the key; an expired claim (over 24 h old) is taken over as if absent.
    const claimed = await db.query(
      `INSERT INTO idempotency_keys (scope, method, path, key, request_hash) VALUES ($1, 'POST', $2, $3, $4)
       ON CONFLICT (scope, method, path, key) DO UPDATE
         SET request_hash = EXCLUDED.request_hash, status_code = NULL, response_headers = NULL, response_body = NULL, created_at = now()
         WHERE idempotency_keys.created_at < now() - make_interval(hours => $5)
            -- A claim never completed (its process died mid-request) is abandoned after
            -- longer than any request can run, instead of blocking the key for 24 h.
            OR (idempotency_keys.status_code IS NULL AND idempotency_keys.created_at < now() - make_interval(mins => $6))
       RETURNING 1`,
      [scope, path, key, requestHash, IDEMPOTENCY_TTL_HOURS, ABANDONED_CLAIM_MINUTES],
    );
    if (claimed.length === 1) {
      request.idempotency = { scope, path, key };
      return;
    }
    const rows = await db.query<{ request_hash: string; status_code: number | null; response_headers: Record<string, string> | null; response_body: string | null }>(
      `SELECT request_hash, status_code, response_headers, response_body FROM idempotency_keys
        WHERE scope = $1 AND method = 'POST' AND path = $2 AND key = $3`,
      [scope, path, key],
    );
    const first = rows[0];
    if (first && first.request_hash !== requestHash) {
      throw conflict('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used with a different request body');
    }
    if (!first || first.status_code === null) {
      throw new AppError(409, 'CONFLICT', 'A request with this Idempotency-Key is still in progress', { headers: { 'retry-after': '1' } });
    }
    for (const [name, value] of Object.entries(first.response_headers ?? {})) reply.header(name, value);
    reply.header('idempotent-replayed', 'true');
    return reply.code(first.status_code).send(first.response_body ?? '');
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const claim = request.idempotency;
    if (!claim) return payload;
    request.idempotency = undefined;
    if (reply.statusCode >= 500) {
      // Nothing was done: let a retry run again.
      await db.query(`DELETE FROM idempotency_keys WHERE scope = $1 AND method = 'POST' AND path = $2 AND key = $3`, [claim.scope, claim.path, claim.key]);
      return payload;
    }
    const headers: Record<string, string> = {};
    for (const name of REPLAYED_HEADERS) {
      const v = reply.getHeader(name);
      if (typeof v === 'string') headers[name] = v;
    }
    await db.query(
      `UPDATE idempotency_keys SET status_code = $4, response_headers = $5, response_body = $6
        WHERE scope = $1 AND method = 'POST' AND path = $2 AND key = $3`,
      [claim.scope, claim.path, claim.key, reply.statusCode, JSON.stringify(headers), typeof payload === 'string' ? payload : ''],
    );
    return payload;
  });
}
