// Building blocks for route schemas. One schema per route gives validation, static types,
// response whitelisting (fast serialization) and the OpenAPI document at once.
import { Type, type Static, type TSchema } from 'typebox';
import { pattern } from '../validation/patterns.js';

const hasNul = (v: unknown) => typeof v === 'string' && v.includes('\u0000');

/** PostgreSQL text cannot hold NUL, so no string the API accepts may contain one. */
const NO_NUL = pattern('^[^\\u0000]*$', 'must not contain NUL characters');
/** At least one non-blank character, and no NUL. */
const NOT_BLANK = pattern('^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$', (v) => (hasNul(v) ? 'must not contain NUL characters' : 'must not be blank'));

/** The largest integer a JSON number carries exactly (2^53 − 1): the bound of every id and count. */
const MAX_INT = Number.MAX_SAFE_INTEGER;

export const Id = Type.Integer({ minimum: 1, maximum: MAX_INT, format: 'int64', description: 'A positive integer id' });

export const IdParams = Type.Object({ id: Id }, { additionalProperties: false });

/** A count of things (0 or more). */
export const Count = (opts: { description?: string } = {}) => Type.Integer({ minimum: 0, maximum: MAX_INT, format: 'int64', ...opts });

/** A required, non-blank string of 1..max characters. */
export const Text = (max: number, opts: { description?: string } = {}) =>
  Type.String({ minLength: 1, maxLength: max, pattern: NOT_BLANK, ...opts });

/** An optional-content string (may be empty) of at most max characters. */
export const FreeText = (max: number, opts: { description?: string } = {}) =>
  Type.String({ maxLength: max, pattern: NO_NUL, ...opts });

const EMAIL_PATTERN = pattern('^[^\\s@\\u0000]+@[^\\s@\\u0000]+$', (v) => (hasNul(v) ? 'must not contain NUL characters' : 'must be an email address'));
export const Email = Type.String({
  minLength: 3,
  maxLength: 254,
  pattern: EMAIL_PATTERN,
  description: 'An email address; compared and stored lower-cased',
});

/** Login and current passwords: any length the hash accepts, capped to keep hashing cheap. */
export const PasswordInput = Type.String({ minLength: 1, maxLength: 1024, pattern: NO_NUL });
/** New passwords: at least 10 characters. */
export const NewPassword = Type.String({ minLength: 10, maxLength: 1024, pattern: NO_NUL, description: 'At least 10 characters' });

/** Rows carry timestamps already as ISO 8601 UTC with milliseconds (db/timestamps.ts). */
export const Timestamp = Type.Unsafe<string>({ type: 'string', format: 'date-time', maxLength: 24, description: 'ISO 8601 UTC with milliseconds' });

export const NoContent = Type.Null({ description: 'No content' });

// Response schemas say "one of these strings" and "this or null" without a union: for a union
// (anyOf) fast-json-stringify runs the validator on every value it serializes to pick the
// branch, which on a page of 50 tasks was most of the serializer's time.

/** One of a fixed set of strings (`type: string` with `enum`). */
export const StringEnum = <T extends string>(values: readonly T[], opts: { description?: string } = {}) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...opts });

/** An id or null (one JSON-schema type list, as OpenAPI 3.1 writes it). */
export const NullableId = (opts: { description?: string } = {}) =>
  Type.Unsafe<number | null>({ type: ['integer', 'null'], minimum: 1, maximum: MAX_INT, format: 'int64', ...opts });

/** A string of at most max characters, or null. */
export const NullableString = (max: number, opts: { description?: string; pattern?: string; format?: string } = {}) =>
  Type.Unsafe<string | null>({ type: ['string', 'null'], maxLength: max, ...opts });


/** How a response names a cursor: what `?cursor=` takes. */
const CURSOR = { maxLength: 200, pattern: pattern('^[A-Za-z0-9_-]+$', 'is not a cursor this API issued') };

export const PageQuery = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20, format: 'int32', description: 'Page size, 1..100' })),
  cursor: Type.Optional(Type.String({ minLength: 1, ...CURSOR, description: 'Opaque cursor from next_cursor' })),
};

// Named schemas: the OpenAPI document (http/openapi.ts) shows each as one component,
// `#/components/schemas/<name>`, referenced wherever a route uses it, and takes its example
// from here. The name is the schema's `title`, a plain JSON Schema annotation, so validation
// and serialization are exactly as without it.

interface NamedSchema {
  schema: TSchema;
  example: unknown;
}
const NAMED = new Map<string, NamedSchema>();

/** The schemas given a name with named(), by name. */
export const namedSchemas = (): ReadonlyMap<string, NamedSchema> => NAMED;

/**
 * Names `schema` in the OpenAPI document and gives it a realistic example (type-checked against
 * the schema here, and validated against it by the Spectral lint of test/openapi.test.ts).
 */
export function named<T extends TSchema>(name: string, schema: T, example: Static<T>): T {
  if (NAMED.has(name)) throw new Error(`Two schemas are named ${name}`);
  // A copy that keeps TypeBox's own non-enumerable markers (its kind, optionality).
  const copy = Object.defineProperties({}, Object.getOwnPropertyDescriptors(schema)) as T;
  Object.assign(copy, { title: name, examples: [example] });
  NAMED.set(name, { schema: copy, example });
  return copy;
}

/** The example named() gave the schema, if it has a name. */
export const exampleOf = (schema: TSchema): unknown => {
  const name = nameOf(schema);
  return name === undefined ? undefined : NAMED.get(name)?.example;
};

/** The name named() gave the schema, if any. */
export const nameOf = (schema: TSchema): string | undefined => {
  const { title } = schema as { title?: unknown };
  return typeof title === 'string' && NAMED.has(title) ? title : undefined;
};

export const Role = named('Role', StringEnum(['USER', 'ADMIN'], { description: 'ADMIN may do everything' }), 'USER');

/** At most this many items on one page (PageQuery's limit). */
export const MAX_PAGE_SIZE = 100;

const pages = new WeakMap<TSchema, TSchema>();

/**
 * A page of `item`s. A named item gives a named page (`<item>Page`) whose example holds the
 * item's example and a next cursor.
 */
export const Page = <T extends TSchema>(item: T) => {
  const page = Type.Object({
    data: Type.Array(item, { maxItems: MAX_PAGE_SIZE }),
    next_cursor: NullableString(CURSOR.maxLength, { pattern: CURSOR.pattern, description: 'Pass as ?cursor= for the next page; null on the last page' }),
  });
  const itemName = nameOf(item);
  if (itemName === undefined) return page;
  const known = pages.get(item) as typeof page | undefined;
  if (known) return known;
  const namedPage = named(`${itemName}Page`, page, { data: [exampleOf(item)], next_cursor: 'eyJiIjo0MX0' } as Static<typeof page>);
  pages.set(item, namedPage);
  return namedPage;
};

/** Every code a problem can carry (docs/api.md section 2), and the statuses that carry it. */
export const PROBLEM_CODES = {
  400: ['VALIDATION_FAILED', 'MALFORMED_JSON', 'INVALID_QUERY', 'WINDOW_TOO_WIDE'],
  401: ['UNAUTHENTICATED', 'INVALID_CREDENTIALS', 'TOKEN_EXPIRED', 'TOKEN_REVOKED'],
  403: ['FORBIDDEN', 'ACCOUNT_DEACTIVATED', 'INVALID_CREDENTIALS'],
  404: ['NOT_FOUND'],
  405: ['METHOD_NOT_ALLOWED'],
  406: ['NOT_ACCEPTABLE'],
  408: ['REQUEST_TIMEOUT'],
  409: ['CONFLICT', 'INVALID_TRANSITION', 'LAST_ADMIN', 'LAST_OWNER', 'EMAIL_TAKEN', 'IDEMPOTENCY_KEY_REUSED'],
  412: ['PRECONDITION_FAILED'],
  413: ['PAYLOAD_TOO_LARGE'],
  415: ['UNSUPPORTED_MEDIA_TYPE'],
  431: ['HEADERS_TOO_LARGE'],
  429: ['RATE_LIMITED'],
  500: ['INTERNAL'],
  503: ['UNAVAILABLE'],
} as const;

/** Every code, once (a code such as INVALID_CREDENTIALS comes with more than one status). */
export const PROBLEM_CODE_LIST = [...new Set(Object.values(PROBLEM_CODES).flat())];
export type ProblemCode = (typeof PROBLEM_CODES)[keyof typeof PROBLEM_CODES][number];

const TASK_STATUSES = ['TODO', 'IN_PROGRESS', 'IN_REVIEW', 'DONE', 'CANCELED'] as const;

export const Problem = named(
  'Problem',
  Type.Object(
    {
      type: Type.String({ maxLength: 100, pattern: '^/problems/[a-z-]+$', description: 'A URI reference naming the kind of problem' }),
      title: Type.String({ maxLength: 100, pattern: '^[A-Za-z ]+$', description: 'The status in words' }),
      status: Type.Integer({ minimum: 400, maximum: 599, format: 'int32', description: 'The HTTP status, repeated' }),
      // A problem's detail may name what the request named (a path, the projects a user solely
      // owns), so its bound is the body limit rather than a sentence's.
      detail: Type.String({ maxLength: 1024 * 1024, description: 'What went wrong with this request, in words' }),
      code: StringEnum(PROBLEM_CODE_LIST, { description: 'A stable, machine-readable code (docs/api.md section 2)' }),
      instance: Type.String({ maxLength: 16384, description: 'The path of the request' }),
      request_id: Type.String({ maxLength: 128, pattern: '^[A-Za-z0-9._:@-]+$', description: 'As in X-Request-Id: quote it when reporting a problem' }),
      errors: Type.Optional(
        Type.Array(
          Type.Object({
            field: Type.String({ maxLength: 1024, description: 'A JSON pointer into the part of the request, or the name of the parameter' }),
            message: Type.String({ maxLength: 1024, description: 'What is wrong with it' }),
            in: Type.Optional(StringEnum(['body', 'query', 'path', 'header'])),
          }),
          { maxItems: 100, description: 'Each invalid field (400 VALIDATION_FAILED)' },
        ),
      ),
      current_status: Type.Optional(StringEnum(TASK_STATUSES, { description: "The task's status now (409 INVALID_TRANSITION)" })),
      allowed_transitions: Type.Optional(
        Type.Array(StringEnum(TASK_STATUSES), { maxItems: TASK_STATUSES.length, description: 'The statuses the task may move to from current_status (409 INVALID_TRANSITION)' }),
      ),
      projects: Type.Optional(
        Type.Array(Type.Object({ id: Id, name: Type.String({ maxLength: 200 }) }), {
          maxItems: 10_000,
          description: 'The projects the user is the only OWNER of, to hand over or delete first (409 LAST_OWNER on DELETE /users/{id})',
        }),
      ),
    },
    { additionalProperties: true, description: 'RFC 9457 problem details. Some problems add members, declared here: errors (VALIDATION_FAILED), current_status and allowed_transitions (INVALID_TRANSITION), projects (LAST_OWNER).' },
  ),
  {
    type: '/problems/validation',
    title: 'Invalid request',
    status: 400,
    detail: 'title must have at most 200 characters',
    code: 'VALIDATION_FAILED',
    instance: '/api/v1/tasks',
    request_id: '0b7d5c1e-5a3f-4f0e-9c8b-2f1d6e4a7b90',
    errors: [{ field: '/title', message: 'must have at most 200 characters', in: 'body' }],
  },
);

/**
 * Standard error responses a route documents besides its success response. Errors are sent as
 * application/problem+json by the error handler, never through these schemas; the OpenAPI
 * document turns each into the shared response of its status (http/openapi.ts).
 */
export const errorResponses = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, Problem]));

/** The If-Match header a PUT accepts (docs/api.md section 1): the resource's ETag; a stale one gets 412. */
export const IfMatchHeader = (what: string) =>
  Type.Object({ 'if-match': Type.Optional(Type.String({ maxLength: 1024, description: `ETag of the ${what}; a stale one gets 412` })) });

/** Headers a route's successful responses carry besides those every response has, by status (OpenAPI only). */
export type ResponseHeaders = Partial<Record<200 | 201, ReadonlyArray<'ETag' | 'Location'>>>;

declare module 'fastify' {
  interface FastifySchema {
    /** Headers the route's successful responses carry besides the ones every response has (http/openapi.ts). */
    'x-response-headers'?: ResponseHeaders;
  }
}
