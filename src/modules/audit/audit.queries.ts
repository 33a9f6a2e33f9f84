// Reading the audit log: keyset pagination (newest first by id) over any combination of
// filters, each backed by an index (actor, resource, action, timestamp).
import { where } from '../../db/conditions.js';
import type { Queryable } from '../../db/database.js';
import { PERSONAL_MARKER } from './audit.writer.js';

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

const COLUMNS = 'id, actor_id, action, resource_type, resource_id, "timestamp", result, metadata, ip, user_agent, request_id';

export async function queryAuditLog(q: Queryable, f: AuditFilters, beforeId: number | undefined, limit: number): Promise<AuditRow[]> {
  const { clause, params, prepareAs } = where('audit_list', [
    [(p) => `actor_id = ${p}`, f.actor_id],
    [(p) => `action = ANY(${p}::text[])`, f.action && f.action.length > 0 ? f.action : undefined],
    [(p) => `resource_type = ${p}`, f.resource_type],
    [(p) => `resource_id = ${p}`, f.resource_id],
    [(p) => `result = ${p}`, f.result],
    [(p) => `"timestamp" >= ${p}::timestamptz`, f.from, 'plan per value'],
    [(p) => `"timestamp" < ${p}::timestamptz`, f.to, 'plan per value'],
    [(p) => `id < ${p}`, beforeId],
  ]);
  params.push(limit + 1);
  return q.query<AuditRow>(`SELECT ${COLUMNS} FROM audit_log ${clause} ORDER BY id DESC LIMIT $${params.length}`, params, { prepareAs });
}

export async function findAuditRecord(q: Queryable, id: number): Promise<AuditRow | undefined> {
  return (await q.query<AuditRow>(`SELECT ${COLUMNS} FROM audit_log WHERE id = $1`, [id]))[0];
}

export const SECURITY_LOG_ACTIONS = ['LOGIN_SUCCESS', 'LOGIN_FAILURE', 'LOGOUT', 'PASSWORD_CHANGED', 'SESSION_REVOKED', 'UPDATE_USER_EMAIL'];

/** A user's own security events: the records about their account of the kinds above. */
export async function querySecurityLog(q: Queryable, userId: number, beforeId: number | undefined, limit: number): Promise<AuditRow[]> {
  return q.query<AuditRow>(
    `SELECT ${COLUMNS} FROM audit_log
      WHERE resource_type = 'USER' AND resource_id = $1 AND action = ANY($2)
        AND ($3::bigint IS NULL OR id < $3)
      ORDER BY id DESC LIMIT $4`,
    [userId, SECURITY_LOG_ACTIONS, beforeId ?? null, limit + 1],
  );
}

export const REDACTED = '[redacted]';

/** Puts personal data back into records: the stored value while it exists, else "[redacted]". */
export async function resolvePersonalData(q: Queryable, rows: AuditRow[]): Promise<AuditRow[]> {
  const isRef = (v: unknown): v is Record<string, string> =>
    typeof v === 'object' && v !== null && typeof (v as Record<string, unknown>)[PERSONAL_MARKER] === 'string';
  const refs = new Set<string>();
  for (const row of rows) for (const v of Object.values(row.metadata)) if (isRef(v)) refs.add(v[PERSONAL_MARKER]!);
  if (refs.size === 0) return rows;
  const found = await q.query<{ ref: string; value: string }>('SELECT ref, value FROM audit_personal_data WHERE ref = ANY($1)', [[...refs]]);
  const values = new Map(found.map((r) => [r.ref, r.value]));
  return rows.map((row) => {
    if (!Object.values(row.metadata).some(isRef)) return row;
    const metadata = Object.fromEntries(
      Object.entries(row.metadata).map(([k, v]) => [k, isRef(v) ? (values.get(v[PERSONAL_MARKER]!) ?? REDACTED) : v]),
    );
    return { ...row, metadata };
  });
}
