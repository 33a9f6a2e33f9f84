// Who may do what to a post. Every user sees every post, so a refusal here is 403.
import type { Actor } from '../../context.js';
import { definePolicy } from '../../domain/authorization.js';

export const postsPolicy = definePolicy<Actor, 'delete', { authorId: number }>(
  {
    see: () => true,
    delete: (actor, post) => actor.role === 'ADMIN' || post?.authorId === actor.id,
  },
  { delete: 'Only the author or an ADMIN may delete a post' },
);
