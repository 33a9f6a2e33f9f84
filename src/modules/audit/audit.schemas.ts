import { Type } from 'typebox';
import { Id, NullableId, NullableString, PageQuery, StringEnum, Timestamp, named } from '../../http/schemas.js';
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
