// Reading the audit log: keyset pagination (newest first by id) over any combination of
// filters, each backed by an index (actor, resource, action, timestamp).
import { where, type Condition } from '../../db/conditions.js';
import type { Queryable } from '../../db/database.js';
import { dynamicStatement, query, statements } from '../../db/statements.js';

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
}

export const SECURITY_LOG_ACTIONS = ['LOGIN_SUCCESS', 'LOGIN_FAILURE', 'LOGOUT', 'PASSWORD_CHANGED', 'SESSION_REVOKED', 'UPDATE_USER_EMAIL'];

const COLUMNS = 'id, actor_id, action, resource_type, resource_id, "timestamp", result, metadata, ip, user_agent, request_id';

/**
 * SQL: the record `a` (a row of audit_log) as a JSON object of its API fields, as the service
 * reads them but for the timestamp, which is PostgreSQL's text (db/timestamps.ts formats it).
 * For events that name a record (outbox.ts): they carry it when they are read.
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
  ];
}

function listStatement(f: AuditFilters, beforeId: number | undefined, limit: number) {
  const { clause, params, prepareAs } = where('audit_list', [...auditFilterConditions(f), [(p) => `id < ${p}`, beforeId]]);
  params.push(limit + 1);
  return { text: `SELECT ${COLUMNS} FROM audit_log ${clause} ORDER BY id DESC LIMIT $${params.length}`, params, prepareAs };
}

// One statement per combination of filters (db/conditions.ts); the SQL file shows the extremes.
dynamicStatement('audit', 'list', {
  'no filter': listStatement({}, undefined, 20).text,
  'every filter': listStatement({ actor_id: 1, action: ['LOGIN_SUCCESS'], resource_type: 'USER', resource_id: 1, result: 'SUCCESS', from: 'x', to: 'x' }, 1, 20).text,
});

export function queryAuditLog(q: Queryable, f: AuditFilters, beforeId: number | undefined, limit: number): Promise<AuditRow[]> {
  const s = listStatement(f, beforeId, limit);
  return q.query<AuditRow>(s.text, s.params, { prepareAs: s.prepareAs });
}

export const findAuditRecord = async (q: Queryable, id: number) => (await query<AuditRow>(q, S.find, [id]))[0];
export const findAuditRecords = (q: Queryable, ids: number[]) => query<AuditRow>(q, S.findMany, [ids]);

export const querySecurityLog = (q: Queryable, userId: number, beforeId: number | undefined, limit: number) =>
  query<AuditRow>(q, S.securityLog, [userId, SECURITY_LOG_ACTIONS, beforeId ?? null, limit + 1]);

export const findPersonalData = (q: Queryable, refs: string[]) => query<{ ref: string; value: string }>(q, S.personalData, [refs]);
