// What the team domain adds to a user's deletion (see users/user-deletion.ts). Their posts,
// likes (like_count follows by trigger), messages, notifications and memberships go by
// foreign-key cascade with the user row; these steps handle what a cascade cannot.
import { conflict } from '../../http/errors.js';
import { addEvents } from '../outbox/outbox.js';
import { taskEvent } from '../tasks/tasks.presenter.js';
import { TASK_COLUMNS, type TaskRow } from '../tasks/tasks.repository.js';
import type { UserDeletionStep } from '../users/user-deletion.js';
import { lockProjectsOwnedBy, projectsSolelyOwnedBy } from './projects.repository.js';

/** A user who is some project's only OWNER cannot be deleted until ownership is handed over. */
export const refuseSoleOwner: UserDeletionStep = async (tx, user) => {
  // Without the lock, a co-OWNER leaving (or stepping down) concurrently counts this user as
  // the other OWNER while this check counts them: both pass and the project has none left.
  await lockProjectsOwnedBy(tx, user.id);
  const projects = await projectsSolelyOwnedBy(tx, user.id);
  if (projects.length > 0) {
    throw conflict('LAST_OWNER', `The user is the only OWNER of ${projects.map((p) => `"${p.name}" (${p.id})`).join(', ')}; hand over or delete these projects first`, {
      projects,
    });
  }
};

/** Their tasks are unassigned (a visible change: version bump and task-updated events). */
export const unassignTasks: UserDeletionStep = async (tx, user) => {
  const tasks = await tx.query<TaskRow>(
    `UPDATE tasks SET assignee_id = NULL, version = version + 1, updated_at = now() WHERE assignee_id = $1 RETURNING ${TASK_COLUMNS}`,
    [user.id],
  );
  addEvents(tx, tasks.map((t) => taskEvent('task-updated', t)));
};

export const teamDeletionSteps: UserDeletionStep[] = [refuseSoleOwner, unassignTasks];
