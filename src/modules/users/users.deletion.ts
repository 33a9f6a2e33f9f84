// Deleting a user is one use case with steps that other modules contribute (wired in
// src/services.ts, so that users depends on no other module): each step runs inside the
// deletion's transaction, before the user row goes, and may refuse (throw) to stop it (e.g.
// the user is some project's only OWNER). Sessions, refresh tokens and everything else with
// ON DELETE CASCADE go with the row; audit records never do.
import type { UnitOfWork } from '../../use-cases/runner.js';
import type { UserRow } from './users.repository.js';

export type UserDeletionStep = (uow: UnitOfWork, user: UserRow) => Promise<void>;
