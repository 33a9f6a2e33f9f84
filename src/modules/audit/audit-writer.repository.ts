// The statements of the audit writer (audit/audit.writer.ts, which only the use-case runner
// calls): a record with its transaction's outbox row, and the personal values it names. Both are
// sent, not awaited (Tx.send): they travel with COMMIT.
import type { Queryable, Tx } from '../../db/database.js';
import { query, send, statements, type Statement } from '../../db/statements.js';
import type { AloneChange } from '../../use-cases/ports.js';
import { RECORD_EVENT, type OutboxEvent } from '../outbox/outbox.events.js';
import { itemsParam, outboxInsert } from '../outbox/outbox.repository.js';
import { CREATE_TASK_ALONE, SET_TASK_STATUS_ALONE } from '../tasks/tasks.repository.js';

/** The record's /admin event appended to a JSON array of events (`events`, text); `id` names the record. */
const withRecordEvent = (events: string, id: string) => `(left(${events}, -1) || CASE WHEN ${events} = '[]' THEN '' ELSE ',' END
    || '{"name":"${RECORD_EVENT}","room":"admin","payload":{"id":' || ${id} || '}}]')::json`;

/**
 * A batch's one outbox row: run by run (`ord`), the run's events (`events`, a JSON array as text,
 * of each row of `runs`), then its record's /admin event (`id`, of each row of `records`). No
 * row when there is no event at all.
 */
const batchOutboxInsert = (runs: string, records: string) =>
  outboxInsert(`json_agg(x.item ORDER BY x.ord, x.n) FROM (
      SELECT r.ord, e.n, e.item FROM ${runs} r CROSS JOIN LATERAL json_array_elements(r.events::json) WITH ORDINALITY AS e(item, n)
      UNION ALL
      SELECT r.ord, 2147483647, json_build_object('name', '${RECORD_EVENT}', 'room', 'admin', 'payload', json_build_object('id', r.id)) FROM ${records} r
    ) x HAVING count(*) > 0`);

const S = statements('audit-writer', {
  // The record, then the transaction's outbox row: the change's events ($10, a JSON array,
  // possibly empty, as text) and, appended to them, the record's /admin event, which names it.
  insert: {
    text: `WITH record AS (
    INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id
  )
  ${outboxInsert(`${withRecordEvent('$10::text', 'record.id')} FROM record`)}`,
    prepare: true,
  },
  // A batch's records and its one outbox row (use-cases/batch.ts), in one statement. Each run's
  // record id is drawn first, beside its run's number (ord), so that its /admin event follows
  // that run's events whatever order the rows are inserted in. $1…$9 the records' columns (null
  // for a run without a record), $10 each run's events (JSON arrays, as text), $11 whether it
  // has a record. A batch with no events at all writes no outbox row.
  insertBatch: {
    text: `WITH input AS (
    SELECT CASE WHEN r.audited THEN nextval('audit_log_id_seq') END AS id, r.*
      FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bool[])
           WITH ORDINALITY AS r(actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id, events, audited, ord)
  ), records AS (
    INSERT INTO audit_log (id, actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
    OVERRIDING SYSTEM VALUE
    SELECT id, actor_id, action, resource_type, resource_id, result, metadata::jsonb, ip, user_agent, request_id FROM input WHERE audited ORDER BY id
  )
  ${batchOutboxInsert('input', '(SELECT ord, id FROM input WHERE audited)')}`,
    prepare: true,
  },
  // Salted refs are never shared, so no conflict is expected: one would fail the transaction
  // rather than leave a record pointing at another record's row.
  insertPersonalData: `INSERT INTO audit_personal_data (ref, subject_user_id, value, salt)
  SELECT ref, $2::bigint, value, decode(salt, 'hex') FROM unnest($1::text[], $3::text[], $4::text[]) AS p(ref, value, salt)`,
});

/**
 * A change and its record in one statement (AloneChange, use-cases/ports.ts): what a lone run of
 * a use case that offers this form sends instead of BEGIN, its statements and COMMIT, in one round
 * trip. The caller's check is the runner's caller lock and liveActor's verdict (session-verdict.ts)
 * as a condition: their user and session rows locked FOR KEY SHARE, users first, and one row only
 * while the user is active and the session neither revoked nor expired. Whatever condition fails,
 * `change` is empty, and so nothing is written: the runner then runs the use case as usual, which
 * answers why. A row of `change` that is not `recorded` (a change that changed nothing) is answered
 * with no record and no event. $1 the caller, $2 their session, $3…$7 the record's action, resource type, ip, user
 * agent and request id; the change's own parameters from $8.
 */
const aloneText = (c: AloneChange) => `WITH caller AS MATERIALIZED (
    SELECT u.id FROM users u JOIN sessions s ON s.user_id = u.id
     WHERE u.id = $1 AND s.id = $2 AND u.active AND s.revoked_at IS NULL AND s.expires_at > now()
       FOR KEY SHARE OF u, s
  ), ${c.ctes.trim()},
  record AS (
    INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
    SELECT $1, $3, $4, change.resource_id, 'SUCCESS', change.metadata, $5, $6, $7 FROM change WHERE change.recorded RETURNING id
  ), outbox_row AS (
    ${outboxInsert(`${withRecordEvent('change.events', 'record.id')} FROM change, record`)}
  )
  SELECT change.* FROM change`;

/**
 * The same change for many runs in one statement (AloneChange.many; a batch whose runs all offer
 * it, use-cases/batch.ts). The callers are checked as aloneText checks one: the users locked
 * first, then the sessions, each in id order, and a run has a `caller` row only while its user is
 * active and its session live. Each record's id is drawn beside its run's place (ord), so that
 * the outbox row lists run by run the run's events, then its record's /admin event, as a batch's
 * insertBatch does. $1 the callers, $2 their sessions, $3 and $4 the records' action and resource
 * type, $5…$7 each run's ip, user agent and request id; the change's columns from $8, one array
 * each.
 */
const manyText = ({ columns, ctes }: NonNullable<AloneChange['many']>) => {
  const arrays = columns.map(([, type], i) => `$${8 + i}::${type}[]`).join(', ');
  const names = columns.map(([name]) => name).join(', ');
  return `WITH input AS MATERIALIZED (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $5::text[], $6::text[], $7::text[], ${arrays})
      WITH ORDINALITY AS i(actor_id, session_id, ip, user_agent, request_id, ${names}, ord)
  ), caller_user AS MATERIALIZED (
    SELECT u.id FROM users u WHERE u.id IN (SELECT actor_id FROM input) AND u.active ORDER BY u.id FOR KEY SHARE
  ), caller_session AS MATERIALIZED (
    SELECT s.id, s.user_id FROM sessions s
     WHERE s.id IN (SELECT session_id FROM input) AND s.user_id IN (SELECT id FROM caller_user)
       AND s.revoked_at IS NULL AND s.expires_at > now()
     ORDER BY s.id FOR KEY SHARE
  ), caller AS MATERIALIZED (
    SELECT i.ord, i.actor_id, ${columns.map(([name]) => `i.${name}`).join(', ')}
      FROM input i JOIN caller_session s ON s.id = i.session_id AND s.user_id = i.actor_id
  ), ${ctes.trim()},
  record_id AS MATERIALIZED (
    SELECT nextval('audit_log_id_seq') AS id, change.ord FROM change WHERE change.recorded ORDER BY change.ord
  ), record AS (
    INSERT INTO audit_log (id, actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
    OVERRIDING SYSTEM VALUE
    SELECT r.id, i.actor_id, $3, $4, change.resource_id, 'SUCCESS', change.metadata, i.ip, i.user_agent, i.request_id
      FROM record_id r JOIN change ON change.ord = r.ord JOIN input i ON i.ord = r.ord ORDER BY r.id
  ), outbox_row AS (
    ${batchOutboxInsert('change', 'record_id')}
  )
  SELECT change.* FROM change`;
};

const WITH_ONE_STATEMENT_FORM: readonly AloneChange[] = [CREATE_TASK_ALONE, SET_TASK_STATUS_ALONE];

/** Every change with a one-statement form, composed once (and shown in sql/audit-writer.sql). */
const ALONE: ReadonlyMap<string, Statement> = new Map(
  Object.values(statements('audit-writer.alone', Object.fromEntries(WITH_ONE_STATEMENT_FORM.map((c) => [c.name, { text: aloneText(c), prepare: true }])))).map((s) => [s.name, s]),
);

/** Every change with a form for many runs (AloneChange.many), composed once (and shown in sql/audit-writer.sql). */
const MANY: ReadonlyMap<string, Statement> = new Map(
  Object.values(
    statements(
      'audit-writer.many',
      Object.fromEntries(WITH_ONE_STATEMENT_FORM.flatMap((c) => (c.many ? [[c.name, { text: manyText(c.many), prepare: true }]] : []))),
    ),
  ).map((s) => [s.name, s]),
);

/**
 * Runs `change` and its record as one statement (autocommit) for `caller`; `request`: the record's
 * ip, user agent and request id. Answers the change's rows.
 */
export function runAlone(
  q: Queryable,
  change: AloneChange,
  caller: { id: number; sessionId: number },
  request: readonly [string | null, string | null, string],
  params: readonly unknown[],
): Promise<Record<string, unknown>[]> {
  const statement = ALONE.get(`audit-writer.alone.${change.name}`);
  if (statement === undefined) throw new Error(`no one-statement form is declared for ${change.name}`);
  return query(q, statement, [caller.id, caller.sessionId, change.action, change.resourceType, ...request, ...params]);
}

/**
 * Runs `change` and its records as one statement for many runs (AloneChange.many): `runs[i]`, the
 * i-th run's caller, its record's request columns (ip, user agent, request id) and the change's
 * own parameters. Answers the change's rows, each with its run's `ord` (1-based).
 */
export function runMany(
  q: Queryable,
  change: AloneChange,
  runs: ReadonlyArray<{ caller: { id: number; sessionId: number }; request: readonly [string | null, string | null, string]; params: readonly unknown[] }>,
): Promise<Record<string, unknown>[]> {
  const statement = MANY.get(`audit-writer.many.${change.name}`);
  if (statement === undefined || change.many === undefined) throw new Error(`no form for many runs is declared for ${change.name}`);
  return query(q, statement, [
    runs.map((r) => r.caller.id),
    runs.map((r) => r.caller.sessionId),
    change.action,
    change.resourceType,
    ...[0, 1, 2].map((i) => runs.map((r) => r.request[i])),
    ...change.many.columns.map((_, i) => runs.map((r) => r.params[i])),
  ]);
}

/**
 * Sends a record, its columns in the order of the insert (actor_id … request_id), with the
 * transaction's outbox row: `events`, then the record's own /admin event.
 */
export function sendAuditRecord(tx: Tx, columns: unknown[], events: OutboxEvent[]): void {
  send(tx, S.insert, [...columns, itemsParam(events)]);
}

/**
 * Sends a batch's records (`records[i]`: run i's columns as sendAuditRecord takes them, or
 * undefined for a run without one) and its one outbox row: run by run, the run's events, then its
 * record's /admin event.
 */
export function sendAuditBatch(tx: Tx, records: ReadonlyArray<unknown[] | undefined>, events: ReadonlyArray<OutboxEvent[]>): void {
  const column = (i: number) => records.map((r) => (r ? r[i] : null));
  send(tx, S.insertBatch, [...Array.from({ length: 9 }, (_, i) => column(i)), events.map(itemsParam), records.map((r) => r !== undefined)]);
}

/** Sends the personal values a record names, each under its own salted ref. */
export function sendPersonalData(tx: Tx, subject: number | null, values: Array<{ ref: string; value: string; salt: string }>): void {
  send(tx, S.insertPersonalData, [values.map((p) => p.ref), subject, values.map((p) => p.value), values.map((p) => p.salt)]);
}
