// Who may do what in a project. Non-members (other than ADMINs) may not know a project
// exists: they get 404. Members who may see but not change get 403.
import type { Actor } from '../../context.js';

export type ProjectRole = 'OWNER' | 'MEMBER';

export interface ProjectAccess {
  /** The caller's role in the project, if a member. */
  role: ProjectRole | undefined;
  admin: boolean;
}

export const accessOf = (actor: Actor, role: ProjectRole | undefined): ProjectAccess => ({ role, admin: actor.role === 'ADMIN' });

export const projectPolicy = {
  see: (a: ProjectAccess) => a.admin || a.role !== undefined,
  manage: (a: ProjectAccess) => a.admin || a.role === 'OWNER',
  removeMember: (a: ProjectAccess, actor: Actor, userId: number) => a.admin || a.role === 'OWNER' || (a.role !== undefined && actor.id === userId),
  workOnTasks: (a: ProjectAccess) => a.admin || a.role !== undefined,
  deleteTask: (a: ProjectAccess, actor: Actor, task: { created_by: number | null }) =>
    a.admin || a.role === 'OWNER' || (a.role !== undefined && task.created_by === actor.id),
  useRoom: (a: ProjectAccess) => a.admin || a.role !== undefined,
};
