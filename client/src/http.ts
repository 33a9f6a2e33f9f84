// Every REST call goes through here: the base URL and /api/v1, the access token (refreshed and
// the call retried once on 401 TOKEN_EXPIRED), Idempotency-Key on creations (one key per call,
// the same on each retry), If-Match from the versions seen, retries of what is safe to retry
// (a network failure, 503, a 429 or 409 that says when), and problems as TeamlogError.
import type { Auth } from './auth.js';
import { TeamlogError, clientProblem, codeOfStatus } from './errors.js';
import type { Problem } from './types.js';

export const API_PREFIX = '/api/v1';

export interface HttpOptions {
  baseUrl: string;
  fetch: typeof fetch;
  /** Retries of a call that failed in a way a retry can fix (default 2). */
  retries: number;
  /** The longest Retry-After the client waits for by itself, in seconds (default 5); beyond it the error is thrown. */
  maxRetryAfter: number;
  /** Send If-Match with the ETag last seen of the resource a PUT changes (default true). */
  ifMatch: boolean;
  headers: Record<string, string>;
}

export interface CallOptions {
  /** Query parameters; undefined and null are left out, arrays repeat the key. */
  query?: object | undefined;
  body?: unknown;
  /** false: no Authorization (login, public routes). */
  auth?: boolean;
  /** For POST: the Idempotency-Key (default: a new one per call, reused by its retries); false: none. */
  idempotencyKey?: string | false;
  /** For PUT: the ETag to send in If-Match (default: the last one seen of the resource); false: none. */
  ifMatch?: string | false;
  headers?: Record<string, string>;
  /** What to read the body as (default: JSON). */
  as?: 'json' | 'text' | 'bytes' | 'response';
  signal?: AbortSignal;
}

export interface Answer<T> {
  data: T;
  status: number;
  headers: Headers;
}

/** The resource a path names, whose ETag a change of it or its sub-resources checks: `/tasks/5/status` → `/tasks/5`. */
export function resourceOf(path: string): string | undefined {
  const m = /^\/[a-z-]+\/\d+/.exec(path);
  return m?.[0];
}

/** A random UUID, also where crypto.randomUUID is missing (a page served over plain HTTP). */
export function newKey(): string {
  const c = globalThis.crypto;
  if (typeof c.randomUUID === 'function') return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function queryString(query: object | undefined): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value === undefined || value === null) continue;
    for (const v of Array.isArray(value) ? value : [value]) params.append(key, String(v));
  }
  const s = params.toString();
  return s ? `?${s}` : '';
}

export class Http {
  /** The ETag last seen of each resource (its path), for If-Match. */
  private readonly versions = new Map<string, string>();
  auth: Auth | undefined;

  constructor(readonly options: HttpOptions) {}

  /** The absolute URL of an API path (under /api/v1) with its query. */
  url(path: string, query?: object): string {
    return `${this.options.baseUrl.replace(/\/+$/, '')}${API_PREFIX}${path}${queryString(query)}`;
  }

  /** The ETag last seen of a resource (`/tasks/5`), if any. */
  versionOf(resource: string): string | undefined {
    return this.versions.get(resource);
  }

  async call<T>(method: string, path: string, opts: CallOptions = {}): Promise<Answer<T>> {
    const headers: Record<string, string> = { accept: 'application/json, application/problem+json;q=0.9, */*;q=0.1', ...this.options.headers, ...opts.headers };
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] = 'application/json';
    }
    // The same key on every retry: the service answers a retry of a creation with the first answer.
    if (method === 'POST' && opts.idempotencyKey !== false && !path.startsWith('/auth/')) headers['idempotency-key'] = opts.idempotencyKey ?? newKey();
    const resource = resourceOf(path);
    if (method === 'PUT' && opts.ifMatch !== false) {
      const etag = opts.ifMatch ?? (this.options.ifMatch && resource ? this.versions.get(resource) : undefined);
      if (etag) headers['if-match'] = etag;
    }
    const retriable = method !== 'POST' || headers['idempotency-key'] !== undefined || path === '/auth/refresh';
    let refreshed = false;
    for (let attempt = 0; ; attempt++) {
      const token = opts.auth === false || !this.auth ? undefined : await this.auth.accessToken();
      if (token) headers.authorization = `Bearer ${token}`;
      let res: Response;
      try {
        res = await this.options.fetch(this.url(path, opts.query), { method, headers, body, signal: opts.signal });
      } catch (err) {
        // Never reached the service, or the answer was lost: safe to send again only if idempotent.
        if (retriable && attempt < this.options.retries && !opts.signal?.aborted) {
          await sleep(250 * 2 ** attempt);
          continue;
        }
        throw err;
      }
      if (res.ok || res.status === 304) {
        const etag = res.headers.get('etag');
        if (etag && resource && method !== 'GET' && method !== 'DELETE') this.versions.set(resource, etag);
        else if (etag && resource && path === resource) this.versions.set(resource, etag);
        if (method === 'DELETE' && resource === path) this.versions.delete(resource);
        const created = res.headers.get('location');
        if (etag && method === 'POST' && created?.startsWith(API_PREFIX)) this.versions.set(created.slice(API_PREFIX.length), etag);
        return { data: await read<T>(res, opts.as), status: res.status, headers: res.headers };
      }
      const error = await problemOf(res, path);
      if (res.status === 401 && token && !refreshed && this.auth) {
        refreshed = true;
        if ((await this.auth.onRefused(error, token)) === 'retry') continue;
        throw error;
      }
      if (res.status === 403 && error.code === 'ACCOUNT_DEACTIVATED' && token && this.auth) await this.auth.onRefused(error, token);
      const wait = error.retryAfter;
      const retryable =
        (res.status === 503 && retriable) ||
        ((res.status === 429 || (res.status === 409 && error.code === 'CONFLICT')) && wait !== undefined && retriable);
      if (retryable && attempt < this.options.retries && (wait ?? 1) <= this.options.maxRetryAfter) {
        await sleep((wait ?? 2 ** attempt) * 1000);
        continue;
      }
      throw error;
    }
  }
}

async function read<T>(res: Response, as: CallOptions['as']): Promise<T> {
  if (as === 'response') return res as T;
  if (res.status === 204 || res.status === 304) return undefined as T;
  if (as === 'text') return (await res.text()) as T;
  if (as === 'bytes') return new Uint8Array(await res.arrayBuffer()) as T;
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

async function problemOf(res: Response, path: string): Promise<TeamlogError> {
  const header = res.headers.get('retry-after');
  const retryAfter = header !== null && /^\d+$/.test(header) ? Number(header) : undefined;
  let problem: Problem | undefined;
  if (/json/.test(res.headers.get('content-type') ?? '')) {
    try {
      const body = (await res.json()) as Partial<Problem>;
      if (typeof body.code === 'string') problem = body as Problem;
    } catch {
      problem = undefined;
    }
  }
  return new TeamlogError(problem ?? clientProblem(res.status, codeOfStatus(res.status), `${res.status} ${res.statusText || 'error'}`, `${API_PREFIX}${path}`), retryAfter);
}
