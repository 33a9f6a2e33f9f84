// Deleting a user is one use case with steps that other modules contribute: each step runs
// inside the deletion's transaction, before the user row goes, and may refuse (throw) to
// stop the deletion (e.g. the user is some project's only OWNER). Sessions, refresh tokens
// and everything else with ON DELETE CASCADE go with the row; audit records never do.
import type { Tx } from '../../db/database.js';
import { teamDeletionSteps } from '../projects/projects.user-deletion.js';
import type { UserRow } from './users.repository.js';

export type UserDeletionStep = (tx: Tx, user: UserRow) => Promise<void>;

/**
 * The steps, in order: refusals first, then clean-ups. Modules add theirs here.
 * Team domain: refuse a project's only OWNER (409 LAST_OWNER), unassign their tasks.
 */
export const userDeletionSteps: UserDeletionStep[] = [...teamDeletionSteps];
