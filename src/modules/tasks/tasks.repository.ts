// SQL for tasks.
import { where } from '../../db/conditions.js';
import type { Queryable } from '../../db/database.js';
import { SNAPSHOT, rowsAtSnapshot, withSnapshotRow, type SnapshotRead } from '../../db/read-snapshot.js';
import { dynamicStatement, query, statements } from '../../db/statements.js';
import { isoTimestampSql } from '../../db/timestamps.js';
import type { AloneChange } from '../../use-cases/ports.js';
import { TRANSITIONS, type TaskStatus } from './tasks.status.js';

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

const COLUMNS = 'id, project_id, title, description, status, assignee_id, created_by, version, created_at, updated_at';
const COLUMNS_OF_T = COLUMNS.split(', ').map((c) => `t.${c}`).join(', ');

const S = statements('tasks', {
  // A task and the user's role in its project, in one round trip (reads start here).
  findWithRole: {
    text: `SELECT ${COLUMNS_OF_T}, m.role AS member_role
  FROM tasks t LEFT JOIN project_members m ON m.project_id = t.project_id AND m.user_id = $2
 WHERE t.id = $1`,
    prepare: true,
    lookup: true,
  },
  // Taken after the project and memberships (projects.access.ts): the lock order everywhere.
  lock: {
    text: `SELECT ${COLUMNS} FROM tasks WHERE id = $1 FOR NO KEY UPDATE`,
    prepare: true,
    // A batch's runs lock their tasks in one statement, in id order (db/shared-transaction.ts).
    gathered: `SELECT i.ord, ${COLUMNS_OF_T} FROM unnest($1::bigint[]) WITH ORDINALITY AS i(id, ord)
  JOIN tasks t ON t.id = i.id ORDER BY t.id FOR NO KEY UPDATE OF t`,
  },
  insert: {
    text: `INSERT INTO tasks (project_id, title, description, assignee_id, created_by) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
    prepare: true,
    // A batch's creations in one statement (db/shared-transaction.ts): ids drawn first, beside
    // each row's place, so that each run gets its own task whatever order the rows go in.
    gathered: `WITH input AS (
    SELECT nextval('tasks_id_seq') AS id, i.*
      FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS i(project_id, title, description, assignee_id, created_by, ord)
  ), inserted AS (
    INSERT INTO tasks (id, project_id, title, description, assignee_id, created_by) OVERRIDING SYSTEM VALUE
    SELECT id, project_id, title, description, assignee_id, created_by FROM input ORDER BY ord
    RETURNING ${COLUMNS}
  )
  SELECT input.ord, ${COLUMNS.split(', ').map((c) => `inserted.${c}`).join(', ')} FROM inserted JOIN input ON input.id = inserted.id`,
  },
  // Applies the fields given (null: unchanged; $5 says whether the assignee is set) and bumps the version.
  update: {
    text: `UPDATE tasks SET
    title = COALESCE($2, title),
    description = COALESCE($3, description),
    status = COALESCE($4, status),
    assignee_id = CASE WHEN $5 THEN $6::bigint ELSE assignee_id END,
    version = version + 1, updated_at = now()
  WHERE id = $1 RETURNING ${COLUMNS}`,
    // A batch's changes of tasks in one statement (db/shared-transaction.ts). The runs of one batch
    // change different tasks (their batchKey), so each row of the input matches one task.
    gathered: `UPDATE tasks t SET
    title = COALESCE(i.title, t.title),
    description = COALESCE(i.description, t.description),
    status = COALESCE(i.status, t.status),
    assignee_id = CASE WHEN i.set_assignee THEN i.assignee_id ELSE t.assignee_id END,
    version = t.version + 1, updated_at = now()
  FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bool[], $6::bigint[])
       WITH ORDINALITY AS i(id, title, description, status, set_assignee, assignee_id, ord)
  WHERE t.id = i.id
  RETURNING i.ord, ${COLUMNS.split(', ').map((c) => `t.${c}`).join(', ')}`,
  },
  delete: 'DELETE FROM tasks WHERE id = $1',
  // A user's tasks lose their assignee: in one project ($2) when they leave it, or everywhere
  // (null) when they are deleted. A visible change: the version moves.
  unassign: `UPDATE tasks SET assignee_id = NULL, version = version + 1, updated_at = now()
  WHERE assignee_id = $1 AND ($2::bigint IS NULL OR project_id = $2) RETURNING ${COLUMNS}`,
});

export const findTaskWithRole = async (q: Queryable, id: number, userId: number) => {
  const row = (await query<TaskRow & { member_role: 'OWNER' | 'MEMBER' | null }>(q, S.findWithRole, [id, userId]))[0];
  if (!row) return undefined;
  const { member_role, ...task } = row;
  return { task: task as TaskRow, role: member_role ?? undefined };
};

export const lockTask = async (q: Queryable, id: number) => (await query<TaskRow>(q, S.lock, [id]))[0];

/**
 * A changed task as AloneChange's `change` row (from `task t`): the task, whether the change is
 * recorded, its record's resource and metadata (`metadata`, SQL), and its `event` (task-created
 * or task-updated). The record's metadata and the event are what tasks.service and taskEvent
 * build: test/one-statement.test.ts compares the forms.
 */
const taskChange = (event: 'task-created' | 'task-updated', metadata: string) => `${COLUMNS_OF_T}, true AS recorded, t.id AS resource_id,
           ${metadata} AS metadata,
           -- row_to_json writes compact JSON, as JSON.stringify does (json_build_object adds spaces)
           json_build_array((SELECT row_to_json(e) FROM (SELECT '${event}' AS name, 'project:' || t.project_id AS room, (
             SELECT row_to_json(p) FROM (SELECT t.id, t.project_id, t.title, t.description, t.status, t.assignee_id, t.created_by,
               ${isoTimestampSql('t.created_at')} AS created_at, ${isoTimestampSql('t.updated_at')} AS updated_at) p
           ) AS payload) e))::text AS events`;

const CREATED_TASK_CHANGE = taskChange('task-created', "jsonb_build_object('projectId', t.project_id, 'title', t.title, 'assigneeId', t.assignee_id)");

/**
 * A member's right, locked in a one-statement form as lockAccess locks it (projects.repository):
 * the project FOR KEY SHARE, then the caller's ($1) membership FOR SHARE, after the caller's rows.
 * `projectId`: the project, as SQL. No row in `membership`: not a member (or no such project).
 */
const lockMembership = (projectId: string) => `project AS MATERIALIZED (
    SELECT p.id FROM caller, projects p WHERE p.id = ${projectId} FOR KEY SHARE OF p
  ), membership AS MATERIALIZED (
    SELECT m.project_id FROM project JOIN project_members m ON m.project_id = project.id AND m.user_id = $1 FOR SHARE OF m
  )`;

/** The same for the runs of a form for many runs: `runs`, a CTE with each run's project_id and actor_id; each table's rows in key order. */
const lockMemberships = (runs: string) => `project AS MATERIALIZED (
    SELECT p.id FROM projects p WHERE p.id IN (SELECT project_id FROM ${runs}) ORDER BY p.id FOR KEY SHARE
  ), membership AS MATERIALIZED (
    SELECT m.project_id, m.user_id FROM project_members m
     WHERE (m.project_id, m.user_id) IN (SELECT r.project_id, r.actor_id FROM ${runs} r JOIN project ON project.id = r.project_id)
     ORDER BY m.project_id, m.user_id FOR SHARE
  )`;

/**
 * Creating a task as one statement with its record (AloneChange; the runner sends it for a lone
 * run, and its `many` form for a batch of them), for the common case only: the caller is a
 * member of the project, and the task has no assignee. The project (FOR KEY SHARE) and the
 * caller's membership (FOR SHARE) are locked after the caller's rows, as lockAccess locks them;
 * in the many form each table's rows in key order. What the use case decides otherwise (an ADMIN
 * who is not a member, an assignee and their notification, a refusal and its DENIED record)
 * leaves `change` without the run's row, and the run goes as usual.
 * $8 the project, $9 the title (trimmed), $10 the description.
 */
export const CREATE_TASK_ALONE: AloneChange = {
  name: 'createTask',
  action: 'CREATE_TASK',
  resourceType: 'TASK',
  events: 1,
  ctes: `${lockMembership('$8')}, task AS (
    INSERT INTO tasks (project_id, title, description, assignee_id, created_by)
    SELECT project_id, $9, $10, NULL, $1 FROM membership
    RETURNING ${COLUMNS}
  ), change AS (
    SELECT ${CREATED_TASK_CHANGE}
      FROM task t
  )`,
  // The tasks' ids are drawn first, beside each run's place, as the gathered insert draws them.
  many: {
    columns: [
      ['project_id', 'bigint'],
      ['title', 'text'],
      ['description', 'text'],
    ],
    ctes: `${lockMemberships('caller')}, new_task AS MATERIALIZED (
    SELECT nextval('tasks_id_seq') AS id, c.ord, c.project_id, c.title, c.description, c.actor_id
      FROM caller c JOIN membership m ON m.project_id = c.project_id AND m.user_id = c.actor_id ORDER BY c.ord
  ), task AS (
    INSERT INTO tasks (id, project_id, title, description, assignee_id, created_by) OVERRIDING SYSTEM VALUE
    SELECT id, project_id, title, description, NULL, actor_id FROM new_task ORDER BY id
    RETURNING ${COLUMNS}
  ), change AS (
    SELECT n.ord, ${CREATED_TASK_CHANGE}
      FROM task t JOIN new_task n ON n.id = t.id
  )`,
  },
};

/** The status machine's moves (tasks.status.ts) as SQL rows (from, to): built from the constant, never from input. */
const MOVES = `(VALUES ${Object.entries(TRANSITIONS).flatMap(([from, tos]) => tos.map((to) => `('${from}', '${to}')`)).join(', ')}) AS move(from_status, to_status)`;

/**
 * Whether a locked task `t` may be moved by `actor` to `status`, as tasks.service decides it, for
 * the case this form answers: the version is the one expected (`expected`; null: any), and the
 * status is the current one (a change without a record) or one the machine allows, with nobody
 * else to notify (the creator and the assignee are nobody or the caller: notifying someone is
 * left to the use case, as is every refusal).
 */
const statusChangeAllowed = (actor: string, status: string, expected: string) => `(${expected} IS NULL OR t.version = ${expected})
       AND (t.status = ${status} OR (EXISTS (SELECT 1 FROM ${MOVES} WHERE move.from_status = t.status AND move.to_status = ${status})
            AND (t.created_by IS NULL OR t.created_by = ${actor}) AND (t.assignee_id IS NULL OR t.assignee_id = ${actor})))`;

/** The row of a status change that changes nothing: the task as it is, answered with no record and no event. */
const UNCHANGED_TASK = `${COLUMNS_OF_T}, false AS recorded, NULL::bigint AS resource_id, NULL::jsonb AS metadata, '[]' AS events`;

const STATUS_CHANGE_METADATA = "jsonb_build_object('oldStatus', a.old_status, 'newStatus', t.status)";

/**
 * Moving a task to another status as one statement with its record (AloneChange; alone, and its
 * `many` form for a batch), for the common case: the caller is a member of the task's project,
 * the move is allowed, and nobody else is notified (statusChangeAllowed). The project (FOR KEY
 * SHARE), the caller's membership (FOR SHARE) and then the task (FOR NO KEY UPDATE) are locked
 * after the caller's rows, as lockForWork locks them; in the many form each table's rows in key
 * order. The current status again answers the task unchanged, with no record. What the use case
 * decides otherwise (an ADMIN who is not a member, a notification, a refused move, a version
 * other than the one expected, a task that does not exist) leaves `change` without the run's row.
 * $8 the task, $9 the new status, $10 the version expected (null: any).
 */
export const SET_TASK_STATUS_ALONE: AloneChange = {
  name: 'setTaskStatus',
  action: 'CHANGE_TASK_STATUS',
  resourceType: 'TASK',
  events: 1,
  ctes: `${lockMembership('(SELECT project_id FROM tasks WHERE id = $8)')}, locked AS MATERIALIZED (
    SELECT t.* FROM membership JOIN tasks t ON t.id = $8 AND t.project_id = membership.project_id FOR NO KEY UPDATE OF t
  ), allowed AS MATERIALIZED (
    SELECT t.id, t.status AS old_status, t.status <> $9::text AS moves FROM locked t
     WHERE ${statusChangeAllowed('$1', '$9::text', '$10::bigint')}
  ), moved AS (
    UPDATE tasks t SET status = $9::text, version = t.version + 1, updated_at = now()
      FROM allowed a WHERE t.id = a.id AND a.moves
    RETURNING ${COLUMNS_OF_T}
  ), change AS (
    SELECT ${taskChange('task-updated', STATUS_CHANGE_METADATA)} FROM moved t JOIN allowed a ON a.id = t.id
    UNION ALL
    SELECT ${UNCHANGED_TASK} FROM locked t JOIN allowed a ON a.id = t.id AND NOT a.moves
  )`,
  many: {
    columns: [
      ['task_id', 'bigint'],
      ['status', 'text'],
      ['expected', 'bigint'],
    ],
    // The runs of one batch move different tasks (their batchKey): one row of `caller` a task.
    ctes: `target AS MATERIALIZED (
    SELECT c.ord, c.actor_id, c.task_id, c.status, c.expected, t.project_id FROM caller c JOIN tasks t ON t.id = c.task_id
  ), ${lockMemberships('target')}, locked AS MATERIALIZED (
    SELECT t.* FROM tasks t
     WHERE t.id IN (SELECT g.task_id FROM target g JOIN membership m ON m.project_id = g.project_id AND m.user_id = g.actor_id)
     ORDER BY t.id FOR NO KEY UPDATE
  ), allowed AS MATERIALIZED (
    SELECT g.ord, t.id, g.status, t.status AS old_status, t.status <> g.status AS moves FROM target g JOIN locked t ON t.id = g.task_id
     WHERE ${statusChangeAllowed('g.actor_id', 'g.status', 'g.expected')}
  ), moved AS (
    UPDATE tasks t SET status = a.status, version = t.version + 1, updated_at = now()
      FROM allowed a WHERE t.id = a.id AND a.moves
    RETURNING a.ord, ${COLUMNS_OF_T}
  ), change AS (
    SELECT t.ord, ${taskChange('task-updated', STATUS_CHANGE_METADATA)} FROM moved t JOIN allowed a ON a.ord = t.ord
    UNION ALL
    SELECT a.ord, ${UNCHANGED_TASK} FROM locked t JOIN allowed a ON a.id = t.id AND NOT a.moves
  )`,
  },
};

/** The task a one-statement form answered (a row of CREATE_TASK_ALONE or SET_TASK_STATUS_ALONE, its record's columns aside). */
export function taskOfRow(row: Record<string, unknown>): TaskRow {
  const r = row as unknown as TaskRow;
  return {
    id: r.id,
    project_id: r.project_id,
    title: r.title,
    description: r.description,
    status: r.status,
    assignee_id: r.assignee_id,
    created_by: r.created_by,
    version: r.version,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

export async function insertTask(q: Queryable, t: { projectId: number; title: string; description: string; assigneeId: number | null; createdBy: number }): Promise<TaskRow> {
  return (await query<TaskRow>(q, S.insert, [t.projectId, t.title, t.description, t.assigneeId, t.createdBy]))[0]!;
}

export async function updateTask(q: Queryable, id: number, change: { title?: string; description?: string; status?: TaskStatus; assignee_id?: number | null }): Promise<TaskRow> {
  const rows = await query<TaskRow>(q, S.update, [id, change.title ?? null, change.description ?? null, change.status ?? null, 'assignee_id' in change, change.assignee_id ?? null]);
  return rows[0]!;
}

export const deleteTask = (q: Queryable, id: number) => query(q, S.delete, [id]);

export const unassignTasks = (q: Queryable, userId: number, projectId: number | null) => query<TaskRow>(q, S.unassign, [userId, projectId]);

export interface TaskFilters {
  /** Restrict to the projects this user belongs to (null: ADMIN, everything). */
  memberId: number | null;
  project_id?: number;
  assignee_id?: number;
  status?: TaskStatus;
  q?: string;
}

function listStatement(f: TaskFilters, beforeId: number | undefined, limit: number, unlessSnapshot: string | null) {
  const { clause, params, prepareAs } = where('tasks_list', [
    // An array from an InitPlan rather than a semi-join: the same scan, planned in a third of the time.
    [(p) => `project_id = ANY (ARRAY(SELECT project_id FROM project_members WHERE user_id = ${p}))`, f.memberId ?? undefined],
    [(p) => `project_id = ${p}`, f.project_id],
    [(p) => `assignee_id = ${p}`, f.assignee_id],
    [(p) => `status = ${p}`, f.status],
    // The expression of tasks_words_idx (migrations/0009), word for word: the index serves it.
    [(p) => `to_tsvector('simple', title || ' ' || description) @@ websearch_to_tsquery('simple', ${p})`, f.q, 'plan per value'],
    [(p) => `id < ${p}`, beforeId],
    // The rows only when a transaction committed since the snapshot the caller's copy was read
    // at (db/read-snapshot.ts): a one-time filter, so an unchanged page is never scanned.
    [(p) => `${SNAPSHOT} IS DISTINCT FROM ${p}`, unlessSnapshot],
  ]);
  params.push(limit + 1);
  return { text: withSnapshotRow(COLUMNS, `SELECT ${COLUMNS} FROM tasks ${clause} ORDER BY id DESC LIMIT $${params.length}`), params, prepareAs };
}

// One statement per combination of filters (db/conditions.ts); the SQL file shows the extremes.
dynamicStatement('tasks', 'list', {
  'no filter': listStatement({ memberId: null }, undefined, 20, null).text,
  'every filter': listStatement({ memberId: 1, project_id: 1, assignee_id: 1, status: 'TODO', q: 'x' }, 1, 20, null).text,
});

/**
 * A page of tasks, newest first, read at `snapshot`; `rows` is undefined when that snapshot is
 * `unlessSnapshot`, the one a copy of this page was read at: nothing has committed since, so
 * the copy is still the page (db/read-snapshot.ts).
 */
export async function listTasks(q: Queryable, f: TaskFilters, beforeId: number | undefined, limit: number, unlessSnapshot?: string): Promise<SnapshotRead<TaskRow[]>> {
  const s = listStatement(f, beforeId, limit, unlessSnapshot ?? null);
  return rowsAtSnapshot(unlessSnapshot, await q.query<TaskRow>(s.text, s.params, { prepareAs: s.prepareAs }));
}
