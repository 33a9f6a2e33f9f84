import type { Queryable } from '../../db/database.js';
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

export async function findProject(q: Queryable, id: number, opts: { forUpdate?: boolean } = {}): Promise<ProjectRow | undefined> {
  const rows = await q.query<ProjectRow>(`SELECT ${COLUMNS} FROM projects p WHERE p.id = $1${opts.forUpdate ? ' FOR UPDATE OF p' : ''}`, [id]);
  return rows[0];
}

/** Whether the project exists and the user's role in it, in one round trip (hot path: task creation). */
export async function projectAndRole(q: Queryable, projectId: number, userId: number): Promise<{ exists: boolean; role: ProjectRole | undefined }> {
  const rows = await q.query<{ role: ProjectRole | null }>(
    `SELECT m.role FROM projects p LEFT JOIN project_members m ON m.project_id = p.id AND m.user_id = $2 WHERE p.id = $1`,
    [projectId, userId],
    { prepareAs: 'project_and_role', lookup: true },
  );
  return { exists: rows.length > 0, role: rows[0]?.role ?? undefined };
}

export async function memberRole(q: Queryable, projectId: number, userId: number): Promise<ProjectRole | undefined> {
  const rows = await q.query<{ role: ProjectRole }>('SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2', [projectId, userId]);
  return rows[0]?.role;
}

export async function insertProject(q: Queryable, p: { name: string; description: string; createdBy: number }): Promise<number> {
  const rows = await q.query<{ id: number }>('INSERT INTO projects (name, description, created_by) VALUES ($1, $2, $3) RETURNING id', [p.name, p.description, p.createdBy]);
  return rows[0]!.id;
}

export async function bumpProject(q: Queryable, id: number, change: { name?: string; description?: string } = {}): Promise<void> {
  await q.query(
    `UPDATE projects SET name = COALESCE($2, name), description = COALESCE($3, description), version = version + 1, updated_at = now() WHERE id = $1`,
    [id, change.name ?? null, change.description ?? null],
  );
}

export async function listProjects(q: Queryable, memberId: number | null, beforeId: number | undefined, limit: number): Promise<ProjectRow[]> {
  return q.query<ProjectRow>(
    `SELECT ${COLUMNS} FROM projects p
      WHERE ($1::bigint IS NULL OR p.id IN (SELECT project_id FROM project_members WHERE user_id = $1))
        AND ($2::bigint IS NULL OR p.id < $2)
      ORDER BY p.id DESC LIMIT $3`,
    [memberId, beforeId ?? null, limit + 1],
  );
}

export async function listMembers(q: Queryable, projectId: number, afterUserId: number | undefined, limit: number): Promise<MemberRow[]> {
  // Members are listed by user id ascending (stable and natural for a roster).
  return q.query<MemberRow>(
    `SELECT user_id, role, added_at FROM project_members
      WHERE project_id = $1 AND ($2::bigint IS NULL OR user_id > $2) ORDER BY user_id LIMIT $3`,
    [projectId, afterUserId ?? null, limit + 1],
  );
}

export async function countOwners(q: Queryable, projectId: number): Promise<number> {
  const rows = await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM project_members WHERE project_id = $1 AND role = 'OWNER'`, [projectId]);
  return rows[0]!.n;
}

/**
 * Locks (FOR UPDATE, in id order) every project the user is an OWNER of: the same row lock
 * that member changes take before counting OWNERs, so a co-OWNER stepping down and this
 * user's deletion cannot both pass their last-OWNER checks at once.
 */
export async function lockProjectsOwnedBy(q: Queryable, userId: number): Promise<void> {
  await q.query(
    `SELECT p.id FROM projects p
      WHERE p.id IN (SELECT project_id FROM project_members WHERE user_id = $1 AND role = 'OWNER')
      ORDER BY p.id FOR UPDATE OF p`,
    [userId],
  );
}

/** Projects where the user is the only OWNER (they block the user's deletion). */
export async function projectsSolelyOwnedBy(q: Queryable, userId: number): Promise<Array<{ id: number; name: string }>> {
  return q.query<{ id: number; name: string }>(
    `SELECT p.id, p.name FROM projects p JOIN project_members m ON m.project_id = p.id
      WHERE m.user_id = $1 AND m.role = 'OWNER'
        AND NOT EXISTS (SELECT 1 FROM project_members o WHERE o.project_id = p.id AND o.role = 'OWNER' AND o.user_id <> $1)
      ORDER BY p.id`,
    [userId],
  );
}
