// Reading the audit log: keyset pagination (newest first by id) over any combination of
// filters and search terms (q=), each backed by an index (actor, resource, action, timestamp;
// migrations/0010_audit_search.sql for the search's: docs/audit-search.md).
import { Params, where, type Condition } from '../../db/conditions.js';
import type { Queryable, Tx } from '../../db/database.js';
import { dynamicStatement, query, send, statements } from '../../db/statements.js';
import type { AuditSearch, BoundedRange, IpRef, ResourceRef, Terms, TimeRange } from './audit.search.js';

export interface AuditRow {
  id: number;
  actor_id: number | null;
  action: string;
  resource_type: string;
  resource_id: number | null;
  timestamp: string;
  result: string;
  metadata: Record<string, unknown>;
  ip: string | null;
  user_agent: string | null;
  request_id: string;
}

export interface AuditFilters {
  actor_id?: number;
  action?: string[];
  resource_type?: string;
  resource_id?: number;
  result?: string;
  from?: string;
  to?: string;
  /** The search as the request gave it (q=): what an export records. Queries use `search`. */
  q?: string;
  /** The parsed search with emails resolved (audit.service.ts, resolveSearch). */
  search?: ResolvedSearch;
}

/** An actor term once its email is looked up: the users it names (none for an unknown email), or no actor. */
export type ResolvedActor = { ids: number[] } | 'none';
export type ResolvedSearch = Omit<AuditSearch, 'actor'> & { actor?: Terms<ResolvedActor> };

export const SECURITY_LOG_ACTIONS = ['LOGIN_SUCCESS', 'LOGIN_FAILURE', 'LOGOUT', 'PASSWORD_CHANGED', 'SESSION_REVOKED', 'UPDATE_USER_EMAIL'];

const COLUMNS = 'id, actor_id, action, resource_type, resource_id, "timestamp", result, metadata, ip, user_agent, request_id';

/**
 * SQL: the record `a` (a row of audit_log) as a JSON object of its API fields, as the service
 * reads them but for the timestamp, which is PostgreSQL's text (db/timestamps.ts formats it).
 * For events that name a record (outbox.events.ts): they carry it when they are read.
 */
export const RECORD_JSON_SQL = `json_build_object('id', a.id, 'actor_id', a.actor_id, 'action', a.action, 'resource_type', a.resource_type,
  'resource_id', a.resource_id, 'timestamp', a."timestamp"::text, 'result', a.result, 'metadata', a.metadata, 'ip', a.ip,
  'user_agent', a.user_agent, 'request_id', a.request_id)`;

const S = statements('audit', {
  find: `SELECT ${COLUMNS} FROM audit_log WHERE id = $1`,
  findMany: `SELECT ${COLUMNS} FROM audit_log WHERE id = ANY ($1::bigint[]) ORDER BY id`,
  // A user's own security events: the records about their account of the kinds above.
  securityLog: `SELECT ${COLUMNS} FROM audit_log
   WHERE resource_type = 'USER' AND resource_id = $1 AND action = ANY ($2)
     AND ($3::bigint IS NULL OR id < $3)
   ORDER BY id DESC LIMIT $4`,
  personalData: 'SELECT ref, value FROM audit_personal_data WHERE ref = ANY ($1)',
  // Emails are stored lower-cased (docs/api.md 1); an email nobody holds now names nobody.
  usersByEmail: 'SELECT id, email FROM users WHERE email = ANY ($1::text[])',
  // The id ceiling and the list under it read one snapshot (queryAuditLogUnderCeiling).
  oneSnapshot: 'SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY',
  // The planner settings below hold from here to the rollback to this savepoint, which undoes
  // them (and nothing else: only reads happen in between).
  plannerSavepoint: 'SAVEPOINT id_ceiling',
  // For the statement after it only: the records past the first guess are found through the
  // BRIN's bitmap (migrations/0012), never by walking the primary key back from the newest id,
  // reading the window through the timestamp index, or scanning the table; no parallel workers
  // for a read of a few block ranges. Each named, not looked up in pg_settings (0.5 ms a scan).
  bitmapScansOnly: `SELECT set_config('enable_indexscan', 'off', true), set_config('enable_indexonlyscan', 'off', true),
   set_config('enable_seqscan', 'off', true), set_config('max_parallel_workers_per_gather', '0', true)`,
  plannerRestored: 'ROLLBACK TO SAVEPOINT id_ceiling',
  // The BRIN's filled block ranges get their summaries (migrations/0013: as the index's owner).
  summarizeTimeIndex: 'SELECT audit_summarize_time_index() AS ranges',
});

/**
 * The audit log's filters as conditions, in one place for the list and the export; `a` is the
 * table's alias in the statement ('' when it has none).
 */
export function auditFilterConditions(f: AuditFilters, a = ''): Condition[] {
  return [
    [(p) => `${a}actor_id = ${p}`, f.actor_id],
    [(p) => `${a}action = ANY(${p}::text[])`, f.action && f.action.length > 0 ? f.action : undefined],
    [(p) => `${a}resource_type = ${p}`, f.resource_type],
    [(p) => `${a}resource_id = ${p}`, f.resource_id],
    [(p) => `${a}result = ${p}`, f.result],
    [(p) => `${a}"timestamp" >= ${p}::timestamptz`, f.from, 'plan per value'],
    [(p) => `${a}"timestamp" < ${p}::timestamptz`, f.to, 'plan per value'],
    ...(f.search ? searchConditions(f.search, a) : []),
  ];
}

/** A piece of SQL with its own parameters: fragments combine before they become a condition. */
interface Fragment {
  sql: (...placeholders: string[]) => string;
  values: unknown[];
}

const fragment = (sql: Fragment['sql'], ...values: unknown[]): Fragment => ({ sql, values });
const NOTHING = fragment(() => 'false');

/** Fragments joined by OR (one alone as it is, so that an equality still leads an index to its order). */
function anyOf(fs: Fragment[]): Fragment {
  if (fs.length === 0) return NOTHING;
  if (fs.length === 1) return fs[0]!;
  return {
    values: fs.flatMap((f) => f.values),
    sql: (...ps) => {
      let at = 0;
      return fs.map((f) => `(${f.sql(...ps.slice(at, (at += f.values.length)))})`).join(' OR ');
    },
  };
}

/** Not matching: a record without a value for the key (a null) is kept, as "not this one" means. */
const negated = (f: Fragment): Fragment => ({ values: f.values, sql: (...ps) => `NOT COALESCE((${f.sql(...ps)}), false)` });

// Each term is planned for its values: a rare action or a narrow time range wants an index, a
// common one the newest rows first, and a partial index (result <> 'SUCCESS') is used only when
// the planner sees the value.
const condition = (f: Fragment): Condition => [(...ps) => `(${f.sql(...ps)})`, new Params(f.values), 'plan per value'];

/** A key whose values are plain text in one column: one value an equality, several an ANY, exclusions an ALL. */
function scalarConditions(column: string, terms: Terms<string> | undefined): Condition[] {
  if (!terms) return [];
  const out: Condition[] = [];
  if (terms.any.length === 1) out.push(condition(fragment((p) => `${column} = ${p}`, terms.any[0])));
  if (terms.any.length > 1) out.push(condition(fragment((p) => `${column} = ANY(${p}::text[])`, terms.any)));
  if (terms.not.length > 0) out.push(condition(fragment((p) => `${column} <> ALL(${p}::text[])`, terms.not)));
  return out;
}

function actorFragment(a: string, actor: ResolvedActor): Fragment {
  if (actor === 'none') return fragment(() => `${a}actor_id IS NULL`);
  if (actor.ids.length === 0) return NOTHING;
  return actor.ids.length === 1 ? fragment((p) => `${a}actor_id = ${p}`, actor.ids[0]) : fragment((p) => `${a}actor_id = ANY(${p}::bigint[])`, actor.ids);
}

const resourceFragment = (a: string, r: ResourceRef): Fragment =>
  r.id === undefined
    ? fragment((p) => `${a}resource_type = ${p}`, r.type)
    : fragment((t, id) => `${a}resource_type = ${t} AND ${a}resource_id = ${id}`, r.type, r.id);

// audit_ip (migrations/0010_audit_search.sql): the column as inet, null for text that is no
// address, so that no stored value makes a search fail; its index serves both forms.
const ipFragment = (a: string, ip: IpRef): Fragment =>
  ip.bits === (ip.family === 4 ? 32 : 128)
    ? fragment((p) => `audit_ip(${a}ip) = ${p}::inet`, ip.address)
    : fragment((p) => `audit_ip(${a}ip) <<= ${p}::inet`, `${ip.address}/${ip.bits}`);

function createdFragment(a: string, range: TimeRange): Fragment {
  const parts: Fragment[] = [];
  if (range.from) {
    const op = range.from.inclusive ? '>=' : '>';
    parts.push(fragment((p) => `${a}"timestamp" ${op} ${p}::timestamptz`, range.from.at));
  }
  if (range.to) {
    const op = range.to.inclusive ? '<=' : '<';
    parts.push(fragment((p) => `${a}"timestamp" ${op} ${p}::timestamptz`, range.to.at));
  }
  if (parts.length === 1) return parts[0]!;
  return { values: parts.flatMap((f) => f.values), sql: (from, to) => `${parts[0]!.sql(from!)} AND ${parts[1]!.sql(to!)}` };
}

function termConditions<T>(terms: Terms<T> | undefined, toFragment: (t: T) => Fragment): Condition[] {
  if (!terms) return [];
  return [...(terms.any.length > 0 ? [condition(anyOf(terms.any.map(toFragment)))] : []), ...terms.not.map((t) => condition(negated(toFragment(t))))];
}

/**
 * The search's terms as conditions: the terms of one key OR'd (those negated each excluded),
 * different keys ANDed, with the filters and the page. Every value is a parameter.
 */
export function searchConditions(s: ResolvedSearch, a = ''): Condition[] {
  return [
    ...scalarConditions(`${a}action`, s.action),
    ...termConditions(s.actor, (actor) => actorFragment(a, actor)),
    ...termConditions(s.resource, (r) => resourceFragment(a, r)),
    ...scalarConditions(`${a}result`, s.result),
    ...termConditions(s.ip, (ip) => ipFragment(a, ip)),
    ...scalarConditions(`${a}request_id`, s.request),
    ...termConditions(s.created, (range) => createdFragment(a, range)),
  ];
}

/**
 * A search for an address or a network picks the page's ids first, then reads their rows.
 * audit_log_ip_idx holds the address (migrations/0014) beside audit_ip(ip) and the id, so the
 * ids of a network come from the index alone (an index-only scan), its condition checked on
 * the index's value. Asked for whole rows instead, PostgreSQL reads every match's row and
 * calls audit_ip on each to check the range again: a /24 of 1,000 records a year apart took
 * 5.5 ms that way, 0.46 ms this way (docs/audit-search.md). Other keys read their rows anyway.
 */
const idsFirst = (f: AuditFilters) => (f.search?.ip?.any.length ?? 0) > 0;

function listStatement(f: AuditFilters, beforeId: number | undefined, limit: number, ceiling?: number) {
  const { clause, params, prepareAs } = where('audit_list', [
    ...auditFilterConditions(f),
    [(p) => `id < ${p}`, beforeId],
    // No record above it matches (idCeiling): the walk back by id starts there.
    [(p) => `id <= ${p}`, ceiling, 'plan per value'],
  ]);
  params.push(limit + 1);
  const page = `FROM audit_log ${clause} ORDER BY id DESC LIMIT $${params.length}`;
  const text = idsFirst(f)
    ? `SELECT ${COLUMNS} FROM audit_log WHERE id = ANY(ARRAY(SELECT id ${page})) ORDER BY id DESC`
    : `SELECT ${COLUMNS} ${page}`;
  return { text, params, prepareAs };
}

// One statement per combination of filters (db/conditions.ts); the SQL file shows the extremes.
dynamicStatement('audit', 'list', {
  'no filter': listStatement({}, undefined, 20).text,
  'every filter': listStatement({ actor_id: 1, action: ['LOGIN_SUCCESS'], resource_type: 'USER', resource_id: 1, result: 'SUCCESS', from: 'x', to: 'x' }, 1, 20).text,
  'a search of every key': listStatement(
    {
      search: {
        action: { any: ['LOGIN_FAILURE', 'LOGIN_SUCCESS'], not: ['LOGOUT'] },
        actor: { any: [{ ids: [7] }, 'none'], not: [{ ids: [8] }] },
        resource: { any: [{ type: 'TASK', id: 5 }, { type: 'USER' }], not: [] },
        result: { any: ['DENIED'], not: [] },
        ip: { any: [{ family: 4, address: '10.0.0.0', bits: 8 }], not: [{ family: 4, address: '10.0.0.1', bits: 32 }] },
        request: { any: ['x'], not: [] },
        created: { any: [{ from: { at: 'x', inclusive: true }, to: { at: 'x', inclusive: false } }], not: [{ to: { at: 'x', inclusive: true } }] },
      },
    },
    1,
    20,
  ).text,
  'an old created window, under its id ceiling': listStatement({ search: { created: { any: [{ to: { at: 'x', inclusive: false } }], not: [] } } }, 1, 20, 1).text,
  'a network, its ids first': listStatement({ search: { ip: { any: [{ family: 4, address: '10.0.0.0', bits: 24 }], not: [] } } }, 1, 20).text,
});

export function queryAuditLog(q: Queryable, f: AuditFilters, beforeId: number | undefined, limit: number, ceiling?: number): Promise<AuditRow[]> {
  const s = listStatement(f, beforeId, limit, ceiling);
  return q.query<AuditRow>(s.text, s.params, { prepareAs: s.prepareAs });
}

/** SQL with its parameters numbered from $1, from fragments (each given its own placeholders). */
function assembled(build: (sql: (f: Fragment) => string) => string): { text: string; params: unknown[] } {
  const params: unknown[] = [];
  const text = build((f) => f.sql(...f.values.map((v) => `$${params.push(v)}`)));
  return { text, params };
}

/**
 * The two questions whose answer is the highest id of any record inside the windows:
 * - `newest`: each window's newest record by audit_log_timestamp_idx (a walk back from its
 *   end, one entry each); the highest of their ids is a first guess, null when every window is
 *   empty.
 * - `beyond`: the highest id above that guess still inside a window, or null. Ids and
 *   timestamps are nearly in the same order, not strictly (concurrent inserts interleave,
 *   clocks step back), so such a record may exist anywhere in the table. The BRIN on
 *   ("timestamp", id) (migrations/0012) keeps only the block ranges whose ids reach past the
 *   guess and whose times overlap a window (and those not summarized yet), so an old window
 *   reads the few ranges around its end and any range that holds a straggler. Sent after
 *   bitmapScansOnly: without it PostgreSQL reads the whole window through the timestamp index.
 */
function ceilingStatements(windows: BoundedRange[]) {
  const window = (w: BoundedRange) => createdFragment('', w);
  return {
    newest: assembled((sql) => `SELECT greatest(${windows.map((w) => `(SELECT id FROM audit_log WHERE ${sql(window(w))} ORDER BY "timestamp" DESC LIMIT 1)`).join(', ')}) AS id`),
    beyond: (guess: number) =>
      assembled((sql) => `SELECT max(id) AS id FROM audit_log WHERE (${sql(anyOf(windows.map(window)))}) AND ${sql(fragment((p) => `id > ${p}`, guess))}`),
  };
}

const EXAMPLE_WINDOWS: BoundedRange[] = [{ to: { at: 'x', inclusive: false } }, { from: { at: 'x', inclusive: true }, to: { at: 'x', inclusive: true } }];
dynamicStatement('audit', 'idCeiling', {
  'newest in the windows': ceilingStatements(EXAMPLE_WINDOWS).newest.text,
  'any higher id in the windows': ceilingStatements(EXAMPLE_WINDOWS).beyond(1).text,
});

type Id = { id: number | null };

/**
 * The highest id of the records inside the windows (null: there is none), exactly: a record
 * above it is in none of them. See ceilingStatements.
 */
export async function idCeiling(tx: Tx, windows: BoundedRange[]): Promise<number | null> {
  const s = ceilingStatements(windows);
  const guess = (await tx.query<Id>(s.newest.text, s.newest.params))[0]?.id ?? null;
  if (guess === null) return null;
  const beyond = s.beyond(guess);
  send(tx, S.plannerSavepoint);
  send(tx, S.bitmapScansOnly);
  const higher = (await tx.query<Id>(beyond.text, beyond.params))[0]?.id ?? null;
  send(tx, S.plannerRestored);
  return higher === null ? guess : Math.max(guess, higher);
}

/**
 * Summarizes the block ranges of audit_log_time_brin filled since it last was, so that idCeiling
 * reads them only where they may hold an answer (a range without a summary is always read whole).
 * The number of ranges summarized; null when the table was busy (a VACUUM, which summarizes too,
 * or another instance summarizing): the next call does it. migrations/0013.
 */
export const summarizeAuditTimeIndex = async (q: Queryable): Promise<number | null> =>
  (await query<{ ranges: number | null }>(q, S.summarizeTimeIndex))[0]?.ranges ?? null;

/**
 * The list (queryAuditLog) of a search whose records all lie in `windows`, with the windows'
 * id ceiling as one more condition: it changes no result, and the walk back by id starts at
 * the windows' end instead of the newest record (80-190 ms on a million records for a window
 * months old, without it). Runs in `tx`, a transaction of its own: the ceiling and the list
 * read one snapshot, so a record committed in between cannot be above the ceiling and missed.
 */
export async function queryAuditLogUnderCeiling(tx: Tx, f: AuditFilters, windows: BoundedRange[], beforeId: number | undefined, limit: number): Promise<AuditRow[]> {
  send(tx, S.oneSnapshot);
  const ceiling = await idCeiling(tx, windows);
  return ceiling === null ? [] : queryAuditLog(tx, f, beforeId, limit, ceiling);
}

export const findAuditRecord = async (q: Queryable, id: number) => (await query<AuditRow>(q, S.find, [id]))[0];
export const findAuditRecords = (q: Queryable, ids: number[]) => query<AuditRow>(q, S.findMany, [ids]);

export const querySecurityLog = (q: Queryable, userId: number, beforeId: number | undefined, limit: number) =>
  query<AuditRow>(q, S.securityLog, [userId, SECURITY_LOG_ACTIONS, beforeId ?? null, limit + 1]);

export const findUsersByEmail = (q: Queryable, emails: string[]) => query<{ id: number; email: string }>(q, S.usersByEmail, [emails]);

export const findPersonalData = (q: Queryable, refs: string[]) => query<{ ref: string; value: string }>(q, S.personalData, [refs]);
