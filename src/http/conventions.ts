// HTTP conventions of docs/api.md section 1 that apply to every response: request ids, the API
// version, content negotiation, Cache-Control, ETag/304, and 404 vs 405 for unknown routes.
import { hash, randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { invalid } from '../domain/errors.js';
import { AppError } from './errors.js';
import { sendProblem } from './error-handler.js';

export const API_PREFIX = '/api/v1';

const SANE_REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

/**
 * A UUIDv7 (RFC 9562 §5.7): the first 48 bits are the Unix time in milliseconds, the rest random.
 * Request ids are stored in every audit record, and audit search finds them through an index on
 * request_id (migrations/0011): time-ordered ids land at that index's end, where random ones
 * (v4) would write a different leaf page per record, a full-page image of WAL after each
 * checkpoint (7.3 KB a record measured, docs/audit-search.md).
 */
export function uuidv7(now: number = Date.now()): string {
  // randomUUID's v4 (`xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx`) has the variant already, and its
  // random bits come from a cache Node fills in bulk: a quarter of the cost of randomBytes(16)
  // per id. Its first 48 bits become the time, its version digit (character 14) a 7.
  const t = now.toString(16).padStart(12, '0');
  return `${t.slice(0, 8)}-${t.slice(8)}-7${randomUUID().slice(15)}`;
}

/** Takes the caller's X-Request-Id when it is sane, so their logs and ours line up; else a new UUIDv7. */
export function requestId(req: { headers: Record<string, string | string[] | undefined> }): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : uuidv7();
}

/** Whether a URL (path and query) is under the current version's prefix, /api/v1. */
export const isApiUrl = (url: string): boolean => url === API_PREFIX || url.startsWith(`${API_PREFIX}/`) || url.startsWith(`${API_PREFIX}?`);

/** A path that matched no route but is the API's however it is spelled: `/API/v1`, `//api/v1`, `/api%2Fv1/…`. */
const LOOSELY_API = /^(?:\/|%2f)+api(?:[/?#]|%2f|$)/i;

/**
 * Whether a request is the API's, for every decision that depends on it (the rate limit,
 * authentication): judged on the route Fastify matched, never on how the URL was spelled. One
 * that matched no route (a 404, a 405) is judged on its path read loosely, so that an unknown
 * spelling of /api is refused like any unknown route and counted like one.
 */
export function isApiRequest(request: FastifyRequest): boolean {
  const route = request.routeOptions.url;
  return route === undefined ? LOOSELY_API.test(request.url) : isApiUrl(route);
}

/** Characters that mean the same percent-encoded or not (RFC 3986 section 2.3, unreserved). */
const UNRESERVED = /^[A-Za-z0-9._~-]$/;
const ESCAPE = /%([0-9A-Fa-f]{2})/g;

/** `.` and `..` segments of an absolute path resolved (RFC 3986 section 5.2.4): `/api/v1/./tasks` is `/api/v1/tasks`. */
function withoutDotSegments(path: string): string {
  const segments = path.split('/');
  const out: string[] = [];
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]!;
    if (segment !== '.' && segment !== '..') {
      out.push(segment);
      continue;
    }
    if (segment === '..') out.pop();
    // A dot segment at the end leaves its directory: `/a/b/..` is `/a/`.
    if (i === segments.length - 1) out.push('');
  }
  return `/${out.join('/')}`;
}

/**
 * The request target in its canonical spelling (RFC 3986 section 6.2.2): percent-encoded
 * unreserved characters decoded (`/%61pi` is `/api`), other escapes in upper case, dot segments
 * resolved; the query as it came. Fastify's router decodes a path before it matches it, so
 * `/%61pi/v1/auth/login` reached the login route while the hooks that read request.url saw a
 * path outside /api: the rate limit did not count it, authentication skipped it, idempotency
 * keyed it apart. Once rewritten, request.url is the path the route was matched on. Doubled
 * slashes and case are left as they are: the router matches neither, so such a path is an
 * unknown route (a 404, counted: isApiRequest).
 */
export function canonicalUrl(url: string): string {
  if (!url.startsWith('/')) return url;
  const percent = url.indexOf('%');
  const dot = url.indexOf('/.');
  if (percent === -1 && dot === -1) return url;
  let end = url.search(/[?#]/);
  if (end === -1) end = url.length;
  if ((percent === -1 || percent > end) && (dot === -1 || dot > end)) return url;
  let path = url.slice(0, end);
  if (percent !== -1 && percent < end) {
    path = path.replace(ESCAPE, (_, hex: string) => {
      const char = String.fromCharCode(parseInt(hex, 16));
      return UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`;
    });
  }
  if (path.includes('/.')) path = withoutDotSegments(path);
  return path + url.slice(end);
}

/** The request target canonical (canonicalUrl), and `/api/<rest>` served as the current version, `/api/v1/<rest>`. */
export function rewriteUrl(raw: string): string {
  const url = canonicalUrl(raw);
  if (isApiUrl(url)) return url;
  if (url.startsWith('/api/')) {
    return API_PREFIX + url.slice(4);
  }
  if (url === '/api' || url.startsWith('/api?')) return API_PREFIX + url.slice(4);
  return url;
}

const JSON_TYPES = ['*/*', 'application/*', 'application/json', 'application/problem+json'];

/** Whether Accept allows JSON, or one of the other types the route can answer with. */
function acceptable(accept: string | undefined, produces: readonly string[]): boolean {
  // What clients send nearly always (fetch's `*/*`, an API client's `application/json`), without parsing.
  if (!accept || accept === '*/*' || accept === 'application/json') return true;
  return accept.split(',').some((part) => {
    const [type = '', ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (q && Number(q.slice(2)) === 0) return false;
    const t = type.trim();
    return JSON_TYPES.includes(t) || produces.includes(t) || (t.endsWith('/*') && produces.some((p) => p.startsWith(t.slice(0, -1))));
  });
}

/**
 * Route config of a route that can also answer in another media type than JSON (the audit
 * export's NDJSON and CSV, a checkpoint's signed note): Accept naming it is not a 406.
 */
export interface ProducesConfig {
  produces?: readonly string[];
}

/** Weak comparison (RFC 9110 8.8.3.2) of If-None-Match against an ETag. */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  const bare = (t: string) => t.trim().replace(/^W\//, '');
  return header.split(',').some((t) => bare(t) === bare(etag));
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** Query strings of /api routes that declare none: any parameter is unknown, hence 400. */
const NO_QUERY = { type: 'object', properties: {}, additionalProperties: false };

/** A route that declares no body takes none: nothing, or an empty object, and nothing else. */
async function refuseBody(request: FastifyRequest): Promise<void> {
  const body: unknown = request.body;
  if (body === undefined) return;
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const [first] = Object.keys(body);
    if (first === undefined) return;
    throw invalid(`/${first}`, 'is not allowed');
  }
  throw new AppError(400, 'VALIDATION_FAILED', 'This route takes no body', { errors: [{ field: '/', message: 'must be empty', in: 'body' }] });
}

type Hook = (request: FastifyRequest) => Promise<void>;

export function registerConventions(app: FastifyInstance): void {
  // Only JSON is parsed: anything else (text/plain included) is 415, never silently ignored.
  if (app.hasContentTypeParser('text/plain')) app.removeContentTypeParser('text/plain');

  // Unknown query parameters and body fields are 400 on every /api route, including the
  // ones whose schema declares no query string or no body (docs/api.md section 1).
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith(`${API_PREFIX}/`)) return;
    const schema = (route.schema ?? {}) as Record<string, unknown>;
    if (schema.querystring === undefined) route.schema = { ...schema, querystring: NO_QUERY };
    const methods = ([] as string[]).concat(route.method);
    if (schema.body === undefined && methods.some((m) => BODY_METHODS.has(m))) {
      const existing = route.preValidation;
      const hooks = (existing === undefined ? [] : ([] as unknown[]).concat(existing)) as Hook[];
      route.preValidation = [refuseBody, ...hooks] as typeof route.preValidation;
    }
  });

  // Route patterns by method, for telling 405 (path exists, other method) from 404.
  const routes: Array<{ re: RegExp; methods: Set<string> }> = [];
  app.addHook('onRoute', (route) => {
    const pattern = route.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z_]+/g, '[^/]+');
    const re = new RegExp(`^${pattern}$`);
    const methods = ([] as string[]).concat(route.method);
    const existing = routes.find((r) => r.re.source === re.source);
    if (existing) methods.forEach((m) => existing.methods.add(m));
    else routes.push({ re, methods: new Set(methods) });
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('api-version', '1');
    reply.header('x-request-id', request.id);
    const produces = (request.routeOptions.config as ProducesConfig | undefined)?.produces ?? [];
    if (request.url.startsWith('/api/') && !acceptable(request.headers.accept, produces)) {
      throw new AppError(406, 'NOT_ACCEPTABLE', `This ${produces.length > 0 ? 'route' : 'API'} answers with application/json${produces.map((p) => ` or ${p}`).join('')} only`);
    }
    // Bodies are read as they arrive: a compressed one would be parsed as if it were plain
    // (RFC 9110 15.5.16: answer 415, and say which codings are accepted).
    const coding = request.headers['content-encoding'];
    const hasBody = request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;
    if (hasBody && coding !== undefined && coding.trim().toLowerCase() !== 'identity') {
      reply.header('accept-encoding', 'identity');
      throw new AppError(415, 'UNSUPPORTED_MEDIA_TYPE', `Content-Encoding ${coding.slice(0, 40)} is not accepted: send the body uncompressed`);
    }
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const status = reply.statusCode;
    const isRead = request.method === 'GET' || request.method === 'HEAD';
    if (!reply.hasHeader('cache-control')) {
      const cacheable = isRead && status < 300 && request.url.startsWith(API_PREFIX) && !request.url.startsWith(`${API_PREFIX}/auth/`);
      reply.header('cache-control', cacheable ? 'private, no-cache' : 'no-store');
    }
    if (!isRead || status !== 200) return payload;
    if (!reply.hasHeader('etag') && typeof payload === 'string' && request.url.startsWith(API_PREFIX)) {
      // A list's (or any unversioned body's) ETag is a hash of the body. The body is encoded
      // once, for the hash and for the socket alike, and hashed in one call (no Hash object).
      const bytes = Buffer.from(payload);
      reply.header('etag', `"${hash('sha1', bytes, 'base64url')}"`);
      payload = bytes;
    }
    const etag = reply.getHeader('etag');
    if (typeof etag === 'string' && etagMatches(request.headers['if-none-match'], etag)) {
      reply.code(304);
      reply.removeHeader('content-type');
      reply.removeHeader('content-length');
      return '';
    }
    return payload;
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    const allowed = routes.filter((r) => r.re.test(path)).flatMap((r) => [...r.methods]);
    if (allowed.length > 0) {
      // OPTIONS asks what a path allows (RFC 9110 9.3.7). A CORS preflight that the CORS plugin
      // did not answer (no CORS_ORIGINS, or an origin not in it) lands here too, and a 204
      // without Access-Control-* headers is how a browser is told no.
      if (request.method === 'OPTIONS') {
        return reply.code(204).header('allow', [...new Set([...allowed, 'OPTIONS'])].sort().join(', ')).send();
      }
      const allow = [...new Set(allowed)].sort().join(', ');
      reply.header('allow', allow);
      return sendProblem(request, reply, new AppError(405, 'METHOD_NOT_ALLOWED', `${request.method} is not allowed here; use ${allow}`));
    }
    // Routes have no trailing slash; say so rather than leave the caller guessing.
    const bare = path.length > 1 && path.endsWith('/') ? path.replace(/\/+$/, '') : undefined;
    const hint = bare !== undefined && routes.some((r) => r.re.test(bare) && r.methods.has(request.method)) ? ` (routes have no trailing slash: ${request.method} ${bare})` : '';
    return sendProblem(request, reply, new AppError(404, 'NOT_FOUND', `No route ${request.method} ${path}${hint}`));
  });
}

export function requestPath(request: FastifyRequest): string {
  return request.url.split('?')[0] ?? request.url;
}
