// Who may do what to a user. Every user may see every user (with email only for self and
// ADMINs), so refusals here are 403, never 404.
import type { Actor } from '../../context.js';

export const usersPolicy = {
  create: (actor: Actor) => actor.role === 'ADMIN',
  update: (actor: Actor, targetId: number) => actor.role === 'ADMIN' || actor.id === targetId,
  changeRole: (actor: Actor) => actor.role === 'ADMIN',
  changeActive: (actor: Actor) => actor.role === 'ADMIN',
  delete: (actor: Actor) => actor.role === 'ADMIN',
};
