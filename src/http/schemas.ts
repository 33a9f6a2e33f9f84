// Building blocks for route schemas. One schema per route gives validation, static types,
// response whitelisting (fast serialization) and the OpenAPI document at once.
import { Type, type TSchema } from 'typebox';

/**
 * What a value that fails a pattern is told: the pattern itself means nothing to a client, so
 * every pattern a schema uses is declared with its message (error-handler.ts reads them).
 */
const PATTERN_MESSAGES = new Map<string, (value: unknown) => string>();

/** A pattern and what to tell a value that does not match it. */
export function pattern(source: string, message: string | ((value: unknown) => string)): string {
  PATTERN_MESSAGES.set(source, typeof message === 'string' ? () => message : message);
  return source;
}

export const patternMessage = (source: string, value: unknown): string =>
  PATTERN_MESSAGES.get(source)?.(value) ?? `must match the pattern ${source}`;

const hasNul = (v: unknown) => typeof v === 'string' && v.includes('\u0000');

/** PostgreSQL text cannot hold NUL, so no string the API accepts may contain one. */
const NO_NUL = pattern('^[^\\u0000]*$', 'must not contain NUL characters');
/** At least one non-blank character, and no NUL. */
const NOT_BLANK = pattern('^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$', (v) => (hasNul(v) ? 'must not contain NUL characters' : 'must not be blank'));

export const Id = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'A positive integer id' });

export const IdParams = Type.Object({ id: Id }, { additionalProperties: false });

/** A required, non-blank string of 1..max characters. */
export const Text = (max: number, opts: { description?: string } = {}) =>
  Type.String({ minLength: 1, maxLength: max, pattern: NOT_BLANK, ...opts });

/** An optional-content string (may be empty) of at most max characters. */
export const FreeText = (max: number, opts: { description?: string } = {}) =>
  Type.String({ maxLength: max, pattern: NO_NUL, ...opts });

export const Email = Type.String({
  minLength: 3,
  maxLength: 254,
  pattern: pattern('^[^\\s@\\u0000]+@[^\\s@\\u0000]+$', (v) => (hasNul(v) ? 'must not contain NUL characters' : 'must be an email address')),
  description: 'An email address; compared and stored lower-cased',
});

/** Login and current passwords: any length the hash accepts, capped to keep hashing cheap. */
export const PasswordInput = Type.String({ minLength: 1, maxLength: 1024, pattern: NO_NUL });
/** New passwords: at least 10 characters. */
export const NewPassword = Type.String({ minLength: 10, maxLength: 1024, pattern: NO_NUL, description: 'At least 10 characters' });

/** Rows carry timestamps already as ISO 8601 UTC with milliseconds (db/timestamps.ts). */
export const Timestamp = Type.Unsafe<string>({ type: 'string', format: 'date-time', description: 'ISO 8601 UTC with milliseconds' });

export const NoContent = Type.Null({ description: 'No content' });

// Response schemas say "one of these strings" and "this or null" without a union: for a union
// (anyOf) fast-json-stringify runs the validator on every value it serializes to pick the
// branch, which on a page of 50 tasks was most of the serializer's time.

/** One of a fixed set of strings (`type: string` with `enum`). */
export const StringEnum = <T extends string>(values: readonly T[], opts: { description?: string } = {}) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...opts });

/** An integer or null (one JSON-schema type list, as OpenAPI 3.1 writes it). */
export const NullableInteger = (opts: { description?: string } = {}) => Type.Unsafe<number | null>({ type: ['integer', 'null'], ...opts });

/** A string or null. */
export const NullableString = (opts: { description?: string } = {}) => Type.Unsafe<string | null>({ type: ['string', 'null'], ...opts });

export const Role = StringEnum(['USER', 'ADMIN']);

export const PageQuery = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Page size, 1..100' })),
  cursor: Type.Optional(
    Type.String({ minLength: 1, maxLength: 200, pattern: pattern('^[A-Za-z0-9_-]+$', 'is not a cursor this API issued'), description: 'Opaque cursor from next_cursor' }),
  ),
};

export const Page = <T extends TSchema>(item: T) =>
  Type.Object({
    data: Type.Array(item),
    next_cursor: NullableString({ description: 'Pass as ?cursor= for the next page; null on the last page' }),
  });

export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.String(),
    instance: Type.String(),
    request_id: Type.String(),
    errors: Type.Optional(
      Type.Array(Type.Object({ field: Type.String(), message: Type.String(), in: Type.Optional(Type.String()) })),
    ),
  },
  { additionalProperties: true, description: 'RFC 9457 problem details' },
);

/** Standard error responses a route documents besides its success response. */
export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((s) => [s, { ...Problem, description: 'Problem details (application/problem+json)' }]));

/** The If-Match header a PUT accepts (API.md section 1): the resource's ETag; a stale one gets 412. */
export const IfMatchHeader = (what: string) =>
  Type.Object({ 'if-match': Type.Optional(Type.String({ description: `ETag of the ${what}; a stale one gets 412` })) });
