// A use case's access to a project, decided inside its transaction (docs/api.md section 3): the
// project and the memberships that decide the right are locked (projects.repository,
// lockAccess), and the caller's role comes from the runner's lock on their own row.
import type { UnitOfWork } from '../../use-cases/runner.js';
import { accessOf, type ProjectAccess, type ProjectRole } from './projects.policy.js';
import { lockAccess, lockAccessByTask, type AccessRow } from './projects.repository.js';

export interface LockedAccess {
  /** The project, or undefined when it (or the task naming it) does not exist. */
  projectId: number | undefined;
  /** The caller's access, by their role as it is now. */
  access: ProjectAccess;
  /** The project roles of the users asked about (the caller and `others`); absent: not a member. */
  roles: Map<number, ProjectRole>;
}

/**
 * Locks the project (or the task's project) and the memberships of the caller and `others`,
 * then decides the caller's access. Sent at once: with the runner's caller lock before it and
 * the use case's own statements after it, all of it costs one round trip.
 */
export async function lockProjectAccess(
  uow: UnitOfWork,
  target: { projectId: number } | { taskId: number },
  others: ReadonlyArray<number | null | undefined> = [],
): Promise<LockedAccess> {
  const callerId = uow.ctx.actor?.id;
  const userIds = [...new Set([callerId, ...others].filter((id): id is number => typeof id === 'number'))].sort((a, b) => a - b);
  const caller = uow.actor();
  const rows: AccessRow[] = 'projectId' in target ? await lockAccess(uow.tx, target.projectId, userIds) : await lockAccessByTask(uow.tx, target.taskId, userIds);
  const actor = await caller;
  const roles = new Map<number, ProjectRole>();
  for (const row of rows) if (row.user_id !== null && row.role !== null) roles.set(row.user_id, row.role);
  return { projectId: rows[0]?.project_id, access: accessOf(actor, roles.get(actor.id)), roles };
}
