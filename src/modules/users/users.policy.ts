// Who may do what to a user. Every user may see every user (with email only for self and
// ADMINs), so refusals here are 403, never 404.
import type { Actor } from '../../context.js';
import { definePolicy } from '../../domain/authorization.js';

const admin = (actor: Actor) => actor.role === 'ADMIN';

export const usersPolicy = definePolicy<Actor, 'create' | 'update' | 'changeRole' | 'changeActive' | 'delete', { userId: number }>(
  {
    see: () => true,
    create: admin,
    update: (actor, target) => admin(actor) || actor.id === target?.userId,
    changeRole: admin,
    changeActive: admin,
    delete: admin,
  },
  { create: 'Only an ADMIN may create users' },
);
