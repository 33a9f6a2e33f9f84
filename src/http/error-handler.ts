// The one place that turns any error into RFC 9457 problem+json. A 5xx body never carries a
// stack trace, SQL or driver message; the log keeps them, tied to the request id.
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isUnavailableError, pgErrorCode } from '../db/database.js';
import { DomainError, type FieldError } from '../domain/errors.js';
import { describeIssue, type AjvIssue } from '../validation/issues.js';
import { AppError, TITLES, fromDomain, unavailable } from './errors.js';
import { noteProblem } from './request-context.js';

const PROBLEM_TYPES: Record<string, string> = {
  VALIDATION_FAILED: '/problems/validation',
  MALFORMED_JSON: '/problems/malformed-json',
};

export function problemType(code: string): string {
  return PROBLEM_TYPES[code] ?? `/problems/${code.toLowerCase().replace(/_/g, '-')}`;
}

export function sendProblem(request: FastifyRequest, reply: FastifyReply, err: AppError): FastifyReply {
  noteProblem(reply, err.code);
  for (const [name, value] of Object.entries(err.extras.headers ?? {})) reply.header(name, value);
  const body: Record<string, unknown> = {
    type: problemType(err.code),
    title: TITLES[err.status] ?? 'Error',
    status: err.status,
    detail: err.detail,
    code: err.code,
    instance: request.url.split('?')[0],
    request_id: request.id,
    ...(err.extras.errors ? { errors: err.extras.errors } : {}),
    ...err.extras.members,
  };
  return reply
    .code(err.status)
    .header('content-type', 'application/problem+json; charset=utf-8')
    .header('cache-control', 'no-store')
    .serializer(JSON.stringify)
    .send(body);
}

const PART_NAMES: Record<string, FieldError['in']> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

/** Maps a Fastify validation failure to our VALIDATION_FAILED problem. */
function validationError(err: FastifyError): AppError {
  const where = PART_NAMES[err.validationContext ?? 'body'] ?? 'body';
  const errors = (err.validation as AjvIssue[]).map((issue) => ({ ...describeIssue(issue), in: where }));
  const first = errors[0]!;
  const prefix = where === 'body' ? '' : `${where} parameter `;
  return new AppError(400, 'VALIDATION_FAILED', `${prefix}${first.field.replace(/^\//, '') || 'value'} ${first.message}`, { errors });
}

const FASTIFY_CODES: Record<string, [number, string, string]> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'UNSUPPORTED_MEDIA_TYPE', 'Send the body as application/json'],
  FST_ERR_CTP_INVALID_TYPE: [415, 'UNSUPPORTED_MEDIA_TYPE', 'Send the body as application/json'],
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'PAYLOAD_TOO_LARGE', 'The body is larger than 1 MiB'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'MALFORMED_JSON', 'The body is empty but the content type is application/json'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'MALFORMED_JSON', 'The body is not valid JSON'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'VALIDATION_FAILED', 'Content-Length does not match the body'],
  FST_ERR_BAD_URL: [400, 'VALIDATION_FAILED', 'The URL is malformed'],
  FST_ERR_MAX_PARAM_LENGTH: [400, 'VALIDATION_FAILED', 'A path segment is too long'],
  FST_ERR_ASYNC_CONSTRAINT: [400, 'VALIDATION_FAILED', 'The request is malformed'],
};

/** Driver errors that mean the input could not be represented, not that the code is wrong. */
const INPUT_PG_CODES = new Set(['22P05', '22021', '22003', '22P02', '22007', '22008', '54000']);
/**
 * A race the transaction lost (a referenced row deleted meanwhile, a deadlock, a
 * serialization failure): the whole transaction rolled back, so a retry is safe.
 */
const CONCURRENCY_PG_CODES = new Set(['23503', '40P01', '40001']);

export function toAppError(err: unknown): AppError | undefined {
  if (err instanceof AppError) return err;
  if (err instanceof DomainError) return fromDomain(err);
  const e = err as FastifyError;
  if (e && e.validation) return validationError(e);
  if (e && typeof e.code === 'string' && FASTIFY_CODES[e.code]) {
    const [status, code, detail] = FASTIFY_CODES[e.code]!;
    return new AppError(status, code, detail);
  }
  if (e instanceof SyntaxError && e.statusCode === 400) return new AppError(400, 'MALFORMED_JSON', 'The body is not valid JSON');
  if (isUnavailableError(err)) return unavailable();
  const pgCode = pgErrorCode(err);
  if (pgCode && INPUT_PG_CODES.has(pgCode)) return new AppError(400, 'VALIDATION_FAILED', 'A value in the request cannot be stored');
  if (pgCode && CONCURRENCY_PG_CODES.has(pgCode)) {
    return new AppError(409, 'CONFLICT', 'Something this request depends on changed at the same moment; nothing was written. Retry.', {
      headers: { 'retry-after': '1' },
    });
  }
  // A unique constraint without a domain answer of its own (use-cases/runner.ts names those).
  if (pgCode === '23505') return new AppError(409, 'CONFLICT', 'This conflicts with something that already exists; nothing was written');
  if (e && typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new AppError(e.statusCode, e.statusCode === 404 ? 'NOT_FOUND' : 'VALIDATION_FAILED', e.message);
  }
  return undefined;
}

export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err, request, reply) => {
    const known = toAppError(err);
    if (!known) {
      request.log.error({ err }, 'unhandled error');
      return sendProblem(request, reply, new AppError(500, 'INTERNAL', 'An unexpected error occurred. It has been logged with the request id.'));
    }
    if (known.status === 503) {
      request.log.warn({ err }, 'database unavailable');
    } else {
      // A client's mistake or a refusal is an answer, not an incident: one short line, no
      // stack, at debug (the access log line at info already has the status). Logging more
      // would let anyone fill the log with bad requests.
      request.log.debug({ status: known.status, code: known.code, sqlstate: pgErrorCode(err) }, known.detail);
    }
    return sendProblem(request, reply, known);
  });
}

/**
 * Fastify's `frameworkErrors` option: errors raised before routing (a malformed URL such as
 * `/api/v1/users/%zz`, an over-long path segment) skip every hook, so this handler adds the
 * headers every response carries and answers problem+json like any other error.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('api-version', '1').header('x-request-id', request.id);
  sendProblem(request, reply, toAppError(error) ?? new AppError(400, 'VALIDATION_FAILED', 'The request is malformed'));
}

const CLIENT_ERRORS: Record<string, [number, string, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'HEADERS_TOO_LARGE', 'The request line and headers are larger than the server accepts'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'REQUEST_TIMEOUT', 'The request took too long to arrive'],
};

/**
 * Fastify's `clientErrorHandler` option: requests Node's HTTP parser refuses (huge or invalid
 * headers) never reach Fastify. They still get problem+json with API-Version and a request id.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, detail] = CLIENT_ERRORS[err.code ?? ''] ?? [400, 'VALIDATION_FAILED', 'The request is not valid HTTP'];
  const id = randomUUID();
  const body = JSON.stringify({ type: problemType(code), title: TITLES[status] ?? 'Error', status, detail, code, request_id: id });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${TITLES[status] ?? 'Error'}\r\n` +
        'Content-Type: application/problem+json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        'Cache-Control: no-store\r\n' +
        'API-Version: 1\r\n' +
        `X-Request-Id: ${id}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
  }
  socket.destroy(err);
}
