// What a project and a member look like from the outside.
import type { MemberRow, ProjectRow } from './projects.repository.js';

export function presentProject(p: ProjectRow) {
  return { id: p.id, name: p.name, description: p.description, created_by: p.created_by, created_at: p.created_at, updated_at: p.updated_at, member_count: p.member_count };
}

export const presentMember = (m: MemberRow) => ({ user_id: m.user_id, role: m.role, added_at: m.added_at });
