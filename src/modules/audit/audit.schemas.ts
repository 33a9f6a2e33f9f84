import { Type, type Static } from 'typebox';
import { Count, Id, NullableId, NullableString, Page, PageQuery, StringEnum, Timestamp, exampleOf, named } from '../../http/schemas.js';
import { MAX_BUCKETS, STATS_INTERVALS, TOP } from './audit-stats.service.js';
import { AUDIT_ACTIONS, AUDIT_RESULTS, RESOURCE_TYPES } from './audit.writer.js';

/** An action or resource type as the database holds it (a CHECK constraint): new ones may come. */
const UPPER_NAME = { maxLength: 64, pattern: '^[A-Z][A-Z_]*$' };

export const AuditRecord = named(
  'AuditRecord',
  Type.Object({
    id: Id,
    actor_id: NullableId({ description: 'The user who acted; null for an unknown email at login, or the CLI' }),
    action: Type.String({ ...UPPER_NAME, description: `One of ${AUDIT_ACTIONS.join(', ')}` }),
    resource_type: Type.String({ ...UPPER_NAME, description: `One of ${RESOURCE_TYPES.join(', ')}` }),
    resource_id: NullableId({ description: 'The resource acted on (a login: the user); null for a refused creation or an export' }),
    timestamp: Timestamp,
    // Typed as a string, as the rows are; documented as the enum it is.
    result: Type.Unsafe<string>({ type: 'string', enum: [...AUDIT_RESULTS] }),
    metadata: Type.Object({}, { additionalProperties: true, description: 'Context; camelCase keys. Personal data shows as "[redacted]" once erased.' }),
    ip: NullableString(64, { description: "The actor's network address; null for the CLI" }),
    user_agent: NullableString(16384),
    request_id: Type.String({ maxLength: 128, pattern: '^[A-Za-z0-9._:@-]+$', description: 'Ties the record to the request and its log lines' }),
  }),
  {
    id: 1042,
    actor_id: 1,
    action: 'CHANGE_USER_ROLE',
    resource_type: 'USER',
    resource_id: 7,
    timestamp: '2026-11-22T08:15:30.512Z',
    result: 'SUCCESS',
    metadata: { oldRole: 'USER', newRole: 'ADMIN' },
    ip: '203.0.113.24',
    user_agent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36',
    request_id: '0b7d5c1e-5a3f-4f0e-9c8b-2f1d6e4a7b90',
  },
);

/** The search syntax, as the docs page shows it (docs/api.md 4; audit.search.ts parses it; docs/audit-search.md). */
const SEARCH_DESCRIPTION =
  'Search, GitHub audit-log style: terms separated by spaces, each `key:value` (a value with spaces in double quotes). ' +
  'Terms of different keys combine with AND, terms of one key with OR; a leading `-` excludes (a record with no value for the key is kept). ' +
  'ANDed with the other filters; pages as usual. Keys: `action:NAME`; `actor:<id>`, `actor:<email>` (case-insensitive; the user holding ' +
  'that email now; an unknown email matches nothing) or `actor:none`; `resource:TYPE` or `resource:TYPE/<id>`; `result:SUCCESS|FAILURE|DENIED`; ' +
  '`ip:<address>` or `ip:<CIDR>` (IPv4 or IPv6); `request:<request id>`; `created:>=DATE`, `created:>DATE`, `created:<DATE`, `created:<=DATE`, ' +
  '`created:DATE..DATE`. A DATE is `2026-11-26` (a whole UTC day: `<=2026-11-26` takes all of it, `>2026-11-26` starts the next day, a range ' +
  'includes both days) or an ISO 8601 date-time (UTC without an offset). Names and results are case-insensitive. Repeated `created` terms are ' +
  'alternatives too: a range is `created:A..B`. An unknown key, a bad value, a bare word, an unbalanced quote, an empty value, more than 20 ' +
  'terms or more than 500 characters is 400 INVALID_QUERY, whose `detail` quotes the term and says what is wrong. Example: ' +
  '`actor:alice@example.com -result:SUCCESS created:2026-11-01..2026-11-26`.';

export const AuditQuery = Type.Object(
  {
    actor_id: Type.Optional(Id),
    action: Type.Optional(Type.Array(StringEnum(AUDIT_ACTIONS), { maxItems: 25, description: 'Repeatable: ?action=A&action=B' })),
    resource_type: Type.Optional(StringEnum(RESOURCE_TYPES)),
    resource_id: Type.Optional(Id),
    result: Type.Optional(StringEnum(AUDIT_RESULTS)),
    from: Type.Optional(Type.String({ format: 'date-time', maxLength: 64, description: 'Inclusive lower bound on timestamp' })),
    to: Type.Optional(Type.String({ format: 'date-time', maxLength: 64, description: 'Exclusive upper bound on timestamp' })),
    q: Type.Optional(Type.String({ maxLength: 16384, description: SEARCH_DESCRIPTION, examples: ['actor:alice@example.com -result:SUCCESS created:2026-11-01..2026-11-26'] })),
    ...PageQuery,
  },
  { additionalProperties: false },
);

/** The list's query: the filters, `include=actors`, and the page (the export takes the filters alone: evidence.schemas.ts). */
export const AuditListQuery = Type.Object(
  {
    ...AuditQuery.properties,
    include: Type.Optional(
      StringEnum(['actors'], { description: 'actors: adds beside `data` an `actors` object naming each actor of the page by id; the records keep their shape' }),
    ),
  },
  { additionalProperties: false },
);

export const AuditActor = named(
  'AuditActor',
  Type.Object({
    email: NullableString(254, {
      description: "The user's email now; for a user deleted since, the one their DELETE_USER record holds (\"[redacted]\" once erased); null when unknown",
    }),
    name: NullableString(100, { description: "The user's name now; null for a user deleted since" }),
  }),
  { email: 'alice@example.com', name: 'Alice' },
);

const AUDIT_LIST_EXAMPLE = { data: [exampleOf(AuditRecord) as Static<typeof AuditRecord>], next_cursor: 'eyJiIjo0MX0' };

/** A page of records; with include=actors, the page's actors beside it. */
export const AuditListPage = named(
  'AuditListPage',
  Type.Object({
    ...Page(AuditRecord).properties,
    actors: Type.Optional(
      Type.Record(Type.String({ pattern: '^[1-9][0-9]*$' }), AuditActor, {
        description: 'With include=actors: each actor_id of the page (not null) once, by id as a string',
      }),
    ),
  }),
  { ...AUDIT_LIST_EXAMPLE, actors: { '1': { email: 'alice@example.com', name: 'Alice' } } },
);

const { limit: _limit, cursor: _cursor, ...FILTERS } = AuditQuery.properties;

export const AuditStatsQuery = Type.Object(
  {
    ...FILTERS,
    interval: Type.Optional(
      StringEnum(STATS_INTERVALS, {
        description:
          'Bucket size, in UTC. Default: hour for a window of up to 2 days, else day. At most 31 days of hours or 1,000 days; wider is 400 WINDOW_TOO_WIDE',
      }),
    ),
  },
  { additionalProperties: false },
);

export const AuditStats = named(
  'AuditStats',
  Type.Object({
    interval: StringEnum(STATS_INTERVALS),
    from: Timestamp,
    to: Timestamp,
    buckets: Type.Array(Type.Object({ start: Timestamp, count: Count() }), {
      maxItems: MAX_BUCKETS.day,
      description: 'Every bucket of the window, oldest first, 0 when empty: the UTC hour or day starting at `start`',
    }),
    top_actions: Type.Array(Type.Object({ action: Type.String({ ...UPPER_NAME }), count: Count() }), { maxItems: TOP, description: 'Most frequent first; ties by name' }),
    top_actors: Type.Array(
      Type.Object({
        actor_id: NullableId({ description: 'null: the records without an actor (an unknown email at login, the CLI)' }),
        email: AuditActor.properties.email,
        name: AuditActor.properties.name,
        count: Count(),
      }),
      { maxItems: TOP, description: 'Most frequent first; ties by id, no actor last' },
    ),
    total: Count({ description: 'The records counted: the sum of the buckets' }),
  }),
  {
    interval: 'day',
    from: '2026-10-29T08:00:00.000Z',
    to: '2026-11-28T08:00:00.000Z',
    buckets: [
      { start: '2026-10-29T00:00:00.000Z', count: 412 },
      { start: '2026-10-30T00:00:00.000Z', count: 0 },
    ],
    top_actions: [{ action: 'CREATE_TASK', count: 210 }],
    top_actors: [{ actor_id: 1, email: 'alice@example.com', name: 'Alice', count: 130 }],
    total: 412,
  },
);
