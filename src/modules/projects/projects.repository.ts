// SQL for projects and their members.
import type { Queryable } from '../../db/database.js';
import { query, statements } from '../../db/statements.js';
import type { ProjectRole } from './projects.policy.js';

export interface ProjectRow {
  id: number;
  name: string;
  description: string;
  created_by: number | null;
  version: number;
  created_at: string;
  updated_at: string;
  member_count: number;
}

export interface MemberRow {
  user_id: number;
  role: ProjectRole;
  added_at: string;
}

const COLUMNS = `p.id, p.name, p.description, p.created_by, p.version, p.created_at, p.updated_at,
    (SELECT count(*)::int FROM project_members pm WHERE pm.project_id = p.id) AS member_count`;

/**
 * The rows that decide what users may do in a project, locked: the project FOR KEY SHARE
 * (so it cannot be deleted meanwhile), then the given users' memberships FOR SHARE, in user
 * order (so a removal or a change of role waits for the use case, or is seen by it). The
 * lateral join fixes that order. No row: no such project; a null user_id: none of them is a
 * member. `project` is the SQL naming the project.
 */
const accessText = (project: string) => `WITH p AS (SELECT id FROM projects WHERE id = ${project} FOR KEY SHARE)
  SELECT p.id AS project_id, m.user_id, m.role
    FROM p LEFT JOIN LATERAL (
      SELECT user_id, role FROM project_members
       WHERE project_id = p.id AND user_id = ANY ($2::bigint[]) ORDER BY user_id FOR SHARE
    ) m ON true`;

const S = statements('projects', {
  find: `SELECT ${COLUMNS} FROM projects p WHERE p.id = $1`,
  // Member changes, renames and the last-OWNER checks of a project queue on its row. NO KEY
  // UPDATE, not UPDATE: task creation in the project (its foreign key takes KEY SHARE) goes on.
  lockForChange: `SELECT ${COLUMNS} FROM projects p WHERE p.id = $1 FOR NO KEY UPDATE OF p`,
  lockForDelete: `SELECT ${COLUMNS} FROM projects p WHERE p.id = $1 FOR UPDATE OF p`,
  // Locks only: runs of one batch that ask the same share one execution (QueryOptions.shareable).
  access: { text: accessText('$1'), prepare: true, shareable: true },
  accessByTask: { text: accessText('(SELECT project_id FROM tasks WHERE id = $1)'), prepare: true, shareable: true },
  // Read-only, for reads: whether the project exists and the user's role in it, in one round trip.
  projectAndRole: {
    text: 'SELECT m.role FROM projects p LEFT JOIN project_members m ON m.project_id = p.id AND m.user_id = $2 WHERE p.id = $1',
    prepare: true,
    lookup: true,
  },
  insert: 'INSERT INTO projects (name, description, created_by) VALUES ($1, $2, $3) RETURNING id',
  // Bumps the version (the ETag) with any change to the project or its members.
  update: `UPDATE projects SET name = COALESCE($2, name), description = COALESCE($3, description),
    version = version + 1, updated_at = now() WHERE id = $1`,
  delete: 'DELETE FROM projects WHERE id = $1',
  countTasks: 'SELECT count(*)::int AS n FROM tasks WHERE project_id = $1',
  list: `SELECT ${COLUMNS} FROM projects p
   WHERE ($1::bigint IS NULL OR p.id IN (SELECT project_id FROM project_members WHERE user_id = $1))
     AND ($2::bigint IS NULL OR p.id < $2)
   ORDER BY p.id DESC LIMIT $3`,
  findMember: 'SELECT user_id, role, added_at FROM project_members WHERE project_id = $1 AND user_id = $2',
  // The projects whose rooms a user's sockets join.
  projectsOf: 'SELECT project_id FROM project_members WHERE user_id = $1 ORDER BY project_id',
  insertMember: 'INSERT INTO project_members (project_id, user_id, role) VALUES ($1, $2, $3)',
  updateMemberRole: 'UPDATE project_members SET role = $3 WHERE project_id = $1 AND user_id = $2',
  deleteMember: 'DELETE FROM project_members WHERE project_id = $1 AND user_id = $2',
  // Members are listed by user id ascending (stable and natural for a roster).
  listMembers: `SELECT user_id, role, added_at FROM project_members
   WHERE project_id = $1 AND ($2::bigint IS NULL OR user_id > $2) ORDER BY user_id LIMIT $3`,
  countOwners: `SELECT count(*)::int AS n FROM project_members WHERE project_id = $1 AND role = 'OWNER'`,
  // The same row lock member changes take before counting OWNERs, on every project the user
  // owns (in id order), so that a co-OWNER stepping down and this user's deletion cannot both
  // pass their last-OWNER checks at once.
  lockOwnedBy: `SELECT p.id FROM projects p
   WHERE p.id IN (SELECT project_id FROM project_members WHERE user_id = $1 AND role = 'OWNER')
   ORDER BY p.id FOR NO KEY UPDATE OF p`,
  solelyOwnedBy: `SELECT p.id, p.name FROM projects p JOIN project_members m ON m.project_id = p.id
   WHERE m.user_id = $1 AND m.role = 'OWNER'
     AND NOT EXISTS (SELECT 1 FROM project_members o WHERE o.project_id = p.id AND o.role = 'OWNER' AND o.user_id <> $1)
   ORDER BY p.id`,
});

const first = <T>(rows: T[]): T | undefined => rows[0];

export const findProject = async (q: Queryable, id: number) => first(await query<ProjectRow>(q, S.find, [id]));
export const lockProjectForChange = async (q: Queryable, id: number) => first(await query<ProjectRow>(q, S.lockForChange, [id]));
export const lockProjectForDelete = async (q: Queryable, id: number) => first(await query<ProjectRow>(q, S.lockForDelete, [id]));

export interface AccessRow {
  project_id: number;
  user_id: number | null;
  role: ProjectRole | null;
}

/** Locks a project and these users' memberships in it (see accessText). */
export const lockAccess = (q: Queryable, projectId: number, userIds: number[]) => query<AccessRow>(q, S.access, [projectId, userIds]);
/** The same, for the project of a task (a task never moves to another project). */
export const lockAccessByTask = (q: Queryable, taskId: number, userIds: number[]) => query<AccessRow>(q, S.accessByTask, [taskId, userIds]);

/** Whether the project exists and the user's role in it (unlocked: for reads). */
export async function projectAndRole(q: Queryable, projectId: number, userId: number): Promise<{ exists: boolean; role: ProjectRole | undefined }> {
  const rows = await query<{ role: ProjectRole | null }>(q, S.projectAndRole, [projectId, userId]);
  return { exists: rows.length > 0, role: rows[0]?.role ?? undefined };
}

export async function insertProject(q: Queryable, p: { name: string; description: string; createdBy: number }): Promise<number> {
  return (await query<{ id: number }>(q, S.insert, [p.name, p.description, p.createdBy]))[0]!.id;
}

export const bumpProject = (q: Queryable, id: number, change: { name?: string; description?: string } = {}) =>
  query(q, S.update, [id, change.name ?? null, change.description ?? null]);

export const deleteProject = (q: Queryable, id: number) => query(q, S.delete, [id]);
export const countTasks = async (q: Queryable, projectId: number) => (await query<{ n: number }>(q, S.countTasks, [projectId]))[0]!.n;

export const listProjects = (q: Queryable, memberId: number | null, beforeId: number | undefined, limit: number) =>
  query<ProjectRow>(q, S.list, [memberId, beforeId ?? null, limit + 1]);

export const projectsOf = async (q: Queryable, userId: number) => (await query<{ project_id: number }>(q, S.projectsOf, [userId])).map((r) => r.project_id);
export const findMember = async (q: Queryable, projectId: number, userId: number) => first(await query<MemberRow>(q, S.findMember, [projectId, userId]));
export const insertMember = (q: Queryable, projectId: number, userId: number, role: ProjectRole) => query(q, S.insertMember, [projectId, userId, role]);
export const updateMemberRole = (q: Queryable, projectId: number, userId: number, role: ProjectRole) => query(q, S.updateMemberRole, [projectId, userId, role]);
export const deleteMember = (q: Queryable, projectId: number, userId: number) => query(q, S.deleteMember, [projectId, userId]);

export const listMembers = (q: Queryable, projectId: number, afterUserId: number | undefined, limit: number) =>
  query<MemberRow>(q, S.listMembers, [projectId, afterUserId ?? null, limit + 1]);

export const countOwners = async (q: Queryable, projectId: number) => (await query<{ n: number }>(q, S.countOwners, [projectId]))[0]!.n;
export const lockProjectsOwnedBy = (q: Queryable, userId: number) => query(q, S.lockOwnedBy, [userId]);
export const projectsSolelyOwnedBy = (q: Queryable, userId: number) => query<{ id: number; name: string }>(q, S.solelyOwnedBy, [userId]);
