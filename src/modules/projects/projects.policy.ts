// Who may do what in a project. Non-members (other than ADMINs) may not know a project
// exists: a refusal is 404 for them. Members who may see but not change get 403.
import type { Actor } from '../../context.js';
import { definePolicy } from '../../domain/authorization.js';

export type ProjectRole = 'OWNER' | 'MEMBER';

export interface ProjectAccess {
  /** Who asks. */
  actorId: number;
  /** The caller's role in the project, if a member. */
  role: ProjectRole | undefined;
  admin: boolean;
}

/** What an action in a project is aimed at, when the rule depends on it. */
export interface ProjectTarget {
  /** The member concerned (removeMember). */
  userId?: number;
  /** The task's creator (deleteTask). */
  createdBy?: number | null;
}

export const accessOf = (actor: Actor, role: ProjectRole | undefined): ProjectAccess => ({ actorId: actor.id, role, admin: actor.role === 'ADMIN' });

const member = (a: ProjectAccess) => a.role !== undefined;

export const projectPolicy = definePolicy<ProjectAccess, 'manage' | 'removeMember' | 'workOnTasks' | 'deleteTask' | 'useRoom', ProjectTarget>({
  see: (a) => a.admin || member(a),
  manage: (a) => a.admin || a.role === 'OWNER',
  // A member may leave; only an OWNER or an ADMIN removes someone else.
  removeMember: (a, t) => a.admin || a.role === 'OWNER' || (member(a) && t?.userId === a.actorId),
  workOnTasks: (a) => a.admin || member(a),
  // The task's creator, an OWNER or an ADMIN.
  deleteTask: (a, t) => a.admin || a.role === 'OWNER' || (member(a) && t?.createdBy === a.actorId),
  useRoom: (a) => a.admin || member(a),
});
