import { where } from '../../db/conditions.js';
import type { Queryable } from '../../db/database.js';
import type { ProjectRole } from '../projects/projects.policy.js';
import type { TaskStatus } from './task-status.js';

export interface TaskRow {
  id: number;
  project_id: number;
  title: string;
  description: string;
  status: TaskStatus;
  assignee_id: number | null;
  created_by: number | null;
  version: number;
  created_at: string;
  updated_at: string;
}

export const TASK_COLUMNS = 'id, project_id, title, description, status, assignee_id, created_by, version, created_at, updated_at';
const TASK_COLUMNS_OF_T = TASK_COLUMNS.split(', ').map((c) => `t.${c}`).join(', ');

export async function findTask(q: Queryable, id: number, opts: { forUpdate?: boolean } = {}): Promise<TaskRow | undefined> {
  return (await q.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1${opts.forUpdate ? ' FOR UPDATE' : ''}`, [id]))[0];
}

/** A task and the user's role in its project, in one round trip (every task route starts here). */
export async function findTaskWithRole(q: Queryable, id: number, userId: number): Promise<{ task: TaskRow; role: ProjectRole | undefined } | undefined> {
  const rows = await q.query<TaskRow & { member_role: ProjectRole | null }>(
    `SELECT ${TASK_COLUMNS_OF_T}, m.role AS member_role
       FROM tasks t LEFT JOIN project_members m ON m.project_id = t.project_id AND m.user_id = $2
      WHERE t.id = $1`,
    [id, userId],
    { prepareAs: 'task_with_role', lookup: true },
  );
  const row = rows[0];
  if (!row) return undefined;
  const { member_role, ...task } = row;
  return { task, role: member_role ?? undefined };
}

export async function insertTask(
  q: Queryable,
  t: { projectId: number; title: string; description: string; assigneeId: number | null; createdBy: number },
): Promise<TaskRow> {
  const rows = await q.query<TaskRow>(
    `INSERT INTO tasks (project_id, title, description, assignee_id, created_by) VALUES ($1, $2, $3, $4, $5) RETURNING ${TASK_COLUMNS}`,
    [t.projectId, t.title, t.description, t.assigneeId, t.createdBy],
    { prepareAs: 'task_insert' },
  );
  return rows[0]!;
}

export async function updateTask(
  q: Queryable,
  id: number,
  change: { title?: string; description?: string; status?: TaskStatus; assignee_id?: number | null },
): Promise<TaskRow> {
  const rows = await q.query<TaskRow>(
    `UPDATE tasks SET
       title = COALESCE($2, title),
       description = COALESCE($3, description),
       status = COALESCE($4, status),
       assignee_id = CASE WHEN $5 THEN $6::bigint ELSE assignee_id END,
       version = version + 1, updated_at = now()
     WHERE id = $1 RETURNING ${TASK_COLUMNS}`,
    [id, change.title ?? null, change.description ?? null, change.status ?? null, 'assignee_id' in change, change.assignee_id ?? null],
  );
  return rows[0]!;
}

export interface TaskFilters {
  /** Restrict to the projects this user belongs to (null: ADMIN, everything). */
  memberId: number | null;
  project_id?: number;
  assignee_id?: number;
  status?: TaskStatus;
  q?: string;
}

export async function listTasks(q: Queryable, f: TaskFilters, beforeId: number | undefined, limit: number): Promise<TaskRow[]> {
  const { clause, params, prepareAs } = where('tasks_list', [
    // An array from an InitPlan rather than a semi-join: the same scan, planned in a third of the time.
    [(p) => `project_id = ANY (ARRAY(SELECT project_id FROM project_members WHERE user_id = ${p}))`, f.memberId ?? undefined],
    [(p) => `project_id = ${p}`, f.project_id],
    [(p) => `assignee_id = ${p}`, f.assignee_id],
    [(p) => `status = ${p}`, f.status],
    [(p) => `search @@ websearch_to_tsquery('simple', ${p})`, f.q, 'plan per value'],
    [(p) => `id < ${p}`, beforeId],
  ]);
  params.push(limit + 1);
  return q.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks ${clause} ORDER BY id DESC LIMIT $${params.length}`, params, { prepareAs });
}
