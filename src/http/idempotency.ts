// Idempotency-Key on POST (docs/api.md section 1): scoped to the caller, method and path; a retry
// with the same key and body within 24 h replays the first response and creates nothing;
// another body gets 409 IDEMPOTENCY_KEY_REUSED; a first request still running gets 409 with
// Retry-After. Kept in the database, so every instance sees every key.
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/database.js';
import { API_PREFIX, requestPath } from './conventions.js';
import { invalid } from '../domain/errors.js';
import { AppError } from './errors.js';
import { claimKey, completeKey, findKey, releaseKey, type KeyRef } from './idempotency.repository.js';

declare module 'fastify' {
  interface FastifyRequest {
    idempotency: KeyRef | undefined;
  }
}


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

    const ref = { scope, path, key };
    if (await claimKey(db, ref, requestHash)) {
      request.idempotency = ref;
      return;
    }
    const first = await findKey(db, ref);
    if (first && first.request_hash !== requestHash) {
      throw new AppError(409, 'IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used with a different request body');
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
      await releaseKey(db, claim);
      return payload;
    }
    const headers: Record<string, string> = {};
    for (const name of REPLAYED_HEADERS) {
      const v = reply.getHeader(name);
      if (typeof v === 'string') headers[name] = v;
    }
    await completeKey(db, claim, reply.statusCode, headers, typeof payload === 'string' ? payload : '');
    return payload;
  });
}
