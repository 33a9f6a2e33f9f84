// The reusable parts of the OpenAPI document (http/openapi.ts): the tags, the headers of
// docs/api.md section 1, the request headers every route of a kind takes, and the shared
// application/problem+json response of each error status (docs/api.md section 2).
import { problemType } from './error-handler.js';
import { TITLES } from './errors.js';
import { PROBLEM_CODES } from './schemas.js';

type Json = Record<string, unknown>;

export const TAGS = [
  { name: 'auth', description: 'Log in, refresh the token pair, log out, change your password' },
  { name: 'users', description: 'Users and their roles; email is shown only to ADMINs and to the user themself' },
  { name: 'profile', description: 'The caller: their own user and security events' },
  { name: 'projects', description: 'Projects and their members (OWNER, MEMBER)' },
  { name: 'tasks', description: 'Tasks of a project, assigned to members, moving through a status machine' },
  { name: 'posts', description: 'The team feed, with likes' },
  { name: 'messages', description: 'Chat rooms: general, and one per project (also over Socket.IO)' },
  { name: 'notifications', description: "The caller's notifications" },
  { name: 'audit', description: 'The append-only, tamper-evident audit log, its proofs and exports (ADMIN)' },
  { name: 'operations', description: 'Health probes (no /api prefix, no authentication)' },
];

const REQUEST_ID = { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:@-]+$' };
const SECONDS = (max: number) => ({ type: 'integer', minimum: 0, maximum: max, format: 'int32' });

/** The response headers of docs/api.md section 1 (components.headers). */
export const HEADERS: Record<string, Json> = {
  'API-Version': {
    description: 'The version of the API that answered. On every response.',
    required: true,
    schema: { type: 'string', enum: ['1'] },
  },
  'X-Request-Id': {
    description:
      "Names the request in the service's logs and audit records: the caller's own X-Request-Id when it sent a sane one " +
      '(1..128 of A-Z a-z 0-9 . _ : @ -), else a new UUID. On every response.',
    required: true,
    schema: REQUEST_ID,
    example: '0b7d5c1e-5a3f-4f0e-9c8b-2f1d6e4a7b90',
  },
  'Cache-Control': {
    description: 'private, no-cache on an authenticated read (revalidate with If-None-Match); no-store on changes, /auth and errors; public, max-age=300 on the OpenAPI document.',
    schema: { type: 'string', enum: ['private, no-cache', 'no-store', 'public, max-age=300'] },
  },
  'RateLimit-Limit': {
    description:
      'Requests a minute this caller may make (RATE_LIMIT_PER_MINUTE), counted per user when authenticated, else per address. Every ' +
      '/api request counts, whatever it answers (a 401 for a missing, bad or revoked token, a 404, an unknown route: against the ' +
      'address); an address whose minute is spent is refused before its token is looked up. A request counts as the route it reaches, ' +
      'however its path is spelled, and a Socket.IO handshake counts too. Not sent while the limit is off (0).',
    schema: { type: 'integer', minimum: 1, maximum: 2_147_483_647, format: 'int32' },
    example: 3000,
  },
  'RateLimit-Remaining': {
    description: 'Requests left in the current minute (sent with RateLimit-Limit).',
    schema: { type: 'integer', minimum: 0, maximum: 2_147_483_647, format: 'int32' },
    example: 2987,
  },
  'RateLimit-Reset': {
    description: 'Seconds until the current window ends (sent with RateLimit-Limit).',
    schema: SECONDS(60),
    example: 42,
  },
  'Retry-After': {
    description: 'Seconds to wait before trying again.',
    schema: { ...SECONDS(86_400), minimum: 1 },
    example: 30,
  },
  ETag: {
    description:
      'A strong ETag: of the resource version for a single resource (bumped by any change to it or its sub-resources), ' +
      'a hash of the body for a list. Send it back in If-None-Match (reads) or If-Match (changes).',
    schema: { type: 'string', maxLength: 200, pattern: '^"[^"]*"$' },
    example: '"task-58-v3"',
  },
  Link: {
    description: 'The next page, when there is one: `<path?query&cursor=…>; rel="next"` (RFC 8288).',
    schema: { type: 'string', maxLength: 16_384, pattern: '^<[^>]+>; rel="next"$' },
    example: '</api/v1/tasks?limit=20&cursor=eyJiIjo0MX0>; rel="next"',
  },
  Location: {
    description: 'The path of the created resource.',
    schema: { type: 'string', maxLength: 200, format: 'uri-reference' },
    example: '/api/v1/tasks/58',
  },
  'Idempotent-Replayed': {
    description: 'true: this is the stored answer to an earlier request with the same Idempotency-Key, and nothing was done again.',
    schema: { type: 'string', enum: ['true'] },
  },
  'Access-Control-Allow-Origin': {
    description: 'Sent to a cross-origin request from one of the origins in CORS_ORIGINS (by default none: same origin only).',
    schema: { type: 'string', maxLength: 2048 },
    example: 'https://teamlog.example.com',
  },
};

/** The request headers of docs/api.md section 1 (components.parameters). */
export const PARAMETERS: Record<string, Json> = {
  IfMatch: {
    in: 'header',
    name: 'If-Match',
    description: 'The ETag of the resource as you last saw it: the change is made only if it still is that version, else 412 PRECONDITION_FAILED.',
    required: false,
    schema: { type: 'string', maxLength: 1024 },
  },
  IfNoneMatch: {
    in: 'header',
    name: 'If-None-Match',
    description: 'An ETag of an earlier answer: while it still matches, 304 Not Modified with no body.',
    required: false,
    schema: { type: 'string', maxLength: 1024 },
  },
  IdempotencyKey: {
    in: 'header',
    name: 'Idempotency-Key',
    description:
      'Makes a retry safe: within 24 h the same key and body (for the same caller, method and path) answer the first response ' +
      'again and create nothing; another body is 409 IDEMPOTENCY_KEY_REUSED; while the first is still running, 409 CONFLICT with Retry-After.',
    required: false,
    schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7E]+$' },
  },
  XRequestId: {
    in: 'header',
    name: 'X-Request-Id',
    description: 'Your own id for this request, echoed in X-Request-Id and kept in the logs and audit records (when sane; else a new one is made).',
    required: false,
    schema: REQUEST_ID,
  },
};

export interface ErrorResponse {
  name: string;
  status: keyof typeof PROBLEM_CODES;
  description: string;
  retryAfter?: true;
  example: { code: string; detail: string; instance: string; errors?: Json[] };
}

/** The shared error responses (docs/api.md section 2), one per status (components.responses). */
export const ERRORS: ErrorResponse[] = [
  { name: 'BadRequest', status: 400, description: 'A bad body, query or path parameter', example: { code: 'VALIDATION_FAILED', detail: 'title must have at most 200 characters', instance: '/api/v1/tasks', errors: [{ field: '/title', message: 'must have at most 200 characters', in: 'body' }] } },
  { name: 'Unauthorized', status: 401, description: 'No, bad, expired or revoked credentials; a failed login', example: { code: 'TOKEN_EXPIRED', detail: 'The access token has expired; refresh it', instance: '/api/v1/tasks' } },
  { name: 'Forbidden', status: 403, description: 'Not allowed, to a caller who can see the resource; a deactivated account; a wrong current_password', example: { code: 'FORBIDDEN', detail: 'Only an OWNER of the project or an ADMIN may do this', instance: '/api/v1/projects/12' } },
  { name: 'NotFound', status: 404, description: 'No such resource, or one the caller may not know exists', example: { code: 'NOT_FOUND', detail: 'Task not found', instance: '/api/v1/tasks/58' } },
  { name: 'NotAcceptable', status: 406, description: 'Accept allows none of the media types the route answers with', example: { code: 'NOT_ACCEPTABLE', detail: 'This API answers with application/json only', instance: '/api/v1/tasks' } },
  { name: 'Conflict', status: 409, description: 'The state does not allow it', retryAfter: true, example: { code: 'LAST_OWNER', detail: 'The last OWNER of a project can be neither removed nor demoted', instance: '/api/v1/projects/12/members/7' } },
  { name: 'PreconditionFailed', status: 412, description: 'If-Match names a version the resource no longer has', example: { code: 'PRECONDITION_FAILED', detail: 'If-Match does not match the current version of the resource', instance: '/api/v1/tasks/58' } },
  { name: 'PayloadTooLarge', status: 413, description: 'A body over 1 MiB', example: { code: 'PAYLOAD_TOO_LARGE', detail: 'The body is larger than 1 MiB', instance: '/api/v1/posts' } },
  { name: 'UnsupportedMediaType', status: 415, description: 'A body that is not uncompressed application/json', example: { code: 'UNSUPPORTED_MEDIA_TYPE', detail: 'Send the body as application/json', instance: '/api/v1/posts' } },
  { name: 'TooManyRequests', status: 429, description: 'Over the rate limit, or a locked login', retryAfter: true, example: { code: 'RATE_LIMITED', detail: 'More than 3000 requests a minute; try again in 42 seconds', instance: '/api/v1/tasks' } },
  { name: 'InternalError', status: 500, description: 'A defect: logged with the request id; the body never carries a stack trace or SQL', example: { code: 'INTERNAL', detail: 'An unexpected error occurred. It has been logged with the request id.', instance: '/api/v1/tasks' } },
  { name: 'Unavailable', status: 503, description: 'The database does not answer, or too many writes are waiting; nothing was written', retryAfter: true, example: { code: 'UNAVAILABLE', detail: 'The database is not answering; try again shortly', instance: '/api/v1/tasks' } },
];
export const ERROR_BY_STATUS = new Map<string, ErrorResponse>(ERRORS.map((e) => [String(e.status), e]));

export const ref = (kind: 'schemas' | 'headers' | 'parameters' | 'responses', name: string) => ({ $ref: `#/components/${kind}/${name}` });

export function errorComponent(e: ErrorResponse, isApi: boolean): Json {
  return {
    description: `${e.description}: ${PROBLEM_CODES[e.status].join(', ')}${e.retryAfter ? ' (with Retry-After when retrying may help)' : ''}`,
    headers: headersFor(isApi, e.retryAfter ? ['Retry-After'] : []),
    content: {
      'application/problem+json': {
        schema: ref('schemas', 'Problem'),
        example: {
          type: problemType(e.example.code),
          title: TITLES[e.status],
          status: e.status,
          ...e.example,
          request_id: '0b7d5c1e-5a3f-4f0e-9c8b-2f1d6e4a7b90',
        },
      },
    },
  };
}

/** The headers of a response: those every response has, then `extra`. */
export function headersFor(isApi: boolean, extra: readonly string[]): Record<string, { $ref: string }> {
  const names = ['API-Version', 'X-Request-Id', 'Cache-Control', ...(isApi ? ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'] : []), 'Access-Control-Allow-Origin', ...extra];
  return Object.fromEntries([...new Set(names)].map((n) => [n, ref('headers', n)]));
}

export const STATUS_TEXT: Record<string, string> = { 200: 'OK', 201: 'Created', 204: 'No content', 304: 'Not modified' };
