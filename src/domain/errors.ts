// Typed domain errors with the contract's stable codes (docs/api.md section 2). Services, use cases
// and repositories throw these and know nothing of HTTP; one place (http/errors.ts) maps a
// kind to a status, and a socket acknowledgement or the CLI can show the same code.

/** What went wrong, in the domain's words; each kind has one HTTP status (http/errors.ts). */
export type ErrorKind =
  | 'invalid' // the input is wrong (400)
  | 'unauthenticated' // no, bad, expired or revoked credentials (401)
  | 'forbidden' // the caller may see this but not do it (403)
  | 'not_found' // no such thing, or one the caller may not know exists (404)
  | 'conflict' // the state does not allow it (409)
  | 'precondition' // the caller's version is stale (412)
  | 'rate_limited' // too many attempts (429)
  | 'unavailable'; // the database does not answer (503)

/**
 * A field of the input that is wrong: a JSON pointer into the body (or a parameter's or a
 * header's name), what is wrong with it, and where it is. The one shape of a field error, in
 * problem+json's `errors` (http/errors.ts) as in a domain error.
 */
export interface FieldError {
  field: string;
  message: string;
  /** The body when unsaid; a query parameter, a path parameter or a header only HTTP has. */
  in?: 'body' | 'query' | 'path' | 'header';
}

export interface DomainErrorDetails {
  fields?: FieldError[];
  /** Extra members of the answer (e.g. allowed_transitions, projects). */
  members?: Record<string, unknown>;
  /** For rate_limited and retryable conflicts: when to try again. */
  retryAfterSeconds?: number;
}

export class DomainError extends Error {
  constructor(
    readonly kind: ErrorKind,
    readonly code: string,
    readonly detail: string,
    readonly details: DomainErrorDetails = {},
  ) {
    super(detail);
    this.name = 'DomainError';
  }
}

/** A wrong value of the input (`where`: the body unless said), the one VALIDATION_FAILED a service or the HTTP layer throws. */
export const invalid = (field: string, message: string, where?: FieldError['in']) =>
  new DomainError('invalid', 'VALIDATION_FAILED', `${field.replace(/^\//, '')} ${message}`, { fields: [{ field, message, ...(where ? { in: where } : {}) }] });

/** An audit search (q=) its syntax refuses: the detail quotes the term and says what is wrong (audit.search.ts). */
export const invalidQuery = (detail: string) => new DomainError('invalid', 'INVALID_QUERY', detail);

export const notFound = (what = 'Resource') => new DomainError('not_found', 'NOT_FOUND', `${what} not found`);

export const forbidden = (detail = 'You are not allowed to do this') => new DomainError('forbidden', 'FORBIDDEN', detail);

export const conflict = (code: string, detail: string, members?: Record<string, unknown>) =>
  new DomainError('conflict', code, detail, { members });

export type UnauthenticatedCode = 'UNAUTHENTICATED' | 'TOKEN_EXPIRED' | 'TOKEN_REVOKED' | 'INVALID_CREDENTIALS';
export const unauthenticated = (code: UnauthenticatedCode, detail: string) => new DomainError('unauthenticated', code, detail);

export const accountDeactivated = () => new DomainError('forbidden', 'ACCOUNT_DEACTIVATED', 'This account is deactivated');

/** A wrong current_password: the caller is authenticated, so this is 403, not 401. */
export const wrongCurrentPassword = () => new DomainError('forbidden', 'INVALID_CREDENTIALS', 'current_password is wrong');

export const rateLimited = (retryAfterSeconds: number, detail = 'Too many attempts; try again later') =>
  new DomainError('rate_limited', 'RATE_LIMITED', detail, { retryAfterSeconds: Math.max(1, Math.ceil(retryAfterSeconds)) });

export const preconditionFailed = () =>
  new DomainError('precondition', 'PRECONDITION_FAILED', 'If-Match does not match the current version of the resource');

