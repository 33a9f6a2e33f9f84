// What the projects module adds to a user's deletion (see users/users.deletion.ts). Their
// memberships go by foreign-key cascade with the user row; this step refuses what a cascade
// cannot handle.
import { conflict } from '../../domain/errors.js';
import type { UserDeletionStep } from '../users/users.deletion.js';
import { lockProjectsOwnedBy, projectsSolelyOwnedBy } from './projects.repository.js';

/** A user who is some project's only OWNER cannot be deleted until ownership is handed over. */
export const refuseSoleOwner: UserDeletionStep = async (uow, user) => {
  // Without the lock, a co-OWNER leaving (or stepping down) concurrently counts this user as
  // the other OWNER while this check counts them: both pass and the project has none left.
  await lockProjectsOwnedBy(uow.tx, user.id);
  const projects = await projectsSolelyOwnedBy(uow.tx, user.id);
  if (projects.length > 0) {
    throw conflict('LAST_OWNER', `The user is the only OWNER of ${projects.map((p) => `"${p.name}" (${p.id})`).join(', ')}; hand over or delete these projects first`, {
      projects,
    });
  }
};
