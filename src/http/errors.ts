// Typed errors with stable codes. Services throw these; one handler (error-handler.ts) turns
// them into RFC 9457 problem+json. Nothing HTTP-specific beyond the status lives in services.

export interface FieldError {
  field: string;
  message: string;
  in?: 'body' | 'query' | 'path' | 'header';
}

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

export const invalid = (field: string, message: string, where: FieldError['in'] = 'body') =>
  new AppError(400, 'VALIDATION_FAILED', `${field.replace(/^\//, '')} ${message}`, {
    errors: [{ field, message, in: where }],
  });

export const notFound = (what = 'Resource') => new AppError(404, 'NOT_FOUND', `${what} not found`);

export const forbidden = (detail = 'You are not allowed to do this') => new AppError(403, 'FORBIDDEN', detail);

export const conflict = (code: string, detail: string, members?: Record<string, unknown>) =>
  new AppError(409, code, detail, { members });

export const unauthenticated = (code: 'UNAUTHENTICATED' | 'TOKEN_EXPIRED' | 'TOKEN_REVOKED' | 'INVALID_CREDENTIALS', detail: string) =>
  new AppError(401, code, detail, { headers: { 'www-authenticate': 'Bearer' } });

export const rateLimited = (retryAfterSeconds: number, detail = 'Too many attempts; try again later') =>
  new AppError(429, 'RATE_LIMITED', detail, { headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) } });

export const preconditionFailed = () =>
  new AppError(412, 'PRECONDITION_FAILED', 'If-Match does not match the current version of the resource');

export const unavailable = () =>
  new AppError(503, 'UNAVAILABLE', 'The database is unreachable; nothing was written. Try again shortly.', {
    headers: { 'retry-after': '5' },
  });
