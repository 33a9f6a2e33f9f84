// Errors as HTTP answers. Domain errors (domain/errors.ts) carry a kind and a code; this is
// the one place that gives each kind its status. A wrong query parameter or header is a domain
// `invalid` that names where it is (FieldError.in); AppError is for what only HTTP knows: 405,
// 406, 413, 415, a body where none is taken. error-handler.ts turns both into RFC 9457
// problem+json.
import { DomainError, type ErrorKind, type FieldError } from '../domain/errors.js';

export interface ErrorExtras {
  headers?: Record<string, string>;
  errors?: FieldError[];
  /** Extra members of the problem document (e.g. allowed_transitions). */
  members?: Record<string, unknown>;
}

export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly extras: ErrorExtras = {},
  ) {
    super(detail);
    this.name = 'AppError';
  }
}

export const TITLES: Record<number, string> = {
  400: 'Invalid request',
  401: 'Unauthenticated',
  403: 'Forbidden',
  404: 'Not found',
  405: 'Method not allowed',
  406: 'Not acceptable',
  408: 'Request timeout',
  409: 'Conflict',
  412: 'Precondition failed',
  413: 'Payload too large',
  415: 'Unsupported media type',
  429: 'Too many requests',
  431: 'Request header fields too large',
  500: 'Internal server error',
  503: 'Service unavailable',
};

export const STATUS_OF: Record<ErrorKind, number> = {
  invalid: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  precondition: 412,
  rate_limited: 429,
  unavailable: 503,
};

/** A domain error as an HTTP answer: its kind's status, and the headers that status calls for. */
export function fromDomain(err: DomainError): AppError {
  const headers: Record<string, string> = {};
  if (err.kind === 'unauthenticated') headers['www-authenticate'] = 'Bearer';
  if (err.details.retryAfterSeconds !== undefined) headers['retry-after'] = String(err.details.retryAfterSeconds);
  return new AppError(STATUS_OF[err.kind], err.code, err.detail, {
    headers,
    errors: err.details.fields?.map((f) => ({ field: f.field, message: f.message, in: f.in ?? 'body' })),
    members: err.details.members,
  });
}

export const unavailable = () =>
  new AppError(503, 'UNAVAILABLE', 'The database is unreachable; nothing was written. Try again shortly.', {
    headers: { 'retry-after': '5' },
  });

export const rateLimitedAnswer = (retryAfterSeconds: number, detail: string) =>
  new AppError(429, 'RATE_LIMITED', detail, { headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) } });

export { DomainError };
