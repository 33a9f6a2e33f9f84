// Outbox events that no client receives: they tell every instance's real-time layer what a
// committed change means for the sockets it holds (realtime/delivery.ts applies them), in the
// same order as every other event. A revocation disconnects within moments on every instance,
// and a membership change moves sockets between project rooms.
import type { OutboxEvent } from './outbox.events.js';

/** One session ended (logout, a spent refresh token presented again): its sockets disconnect. */
export const sessionRevoked = (userId: number, sessionId: number): OutboxEvent => ({
  name: 'session-revoked', room: `user:${userId}`, payload: { user_id: userId, session_id: sessionId },
});

/** All of a user's sessions ended (deactivation, deletion), or all but one (a password change). */
export const userSessionsRevoked = (userId: number, exceptSessionId?: number): OutboxEvent => ({
  name: 'user-sessions-revoked', room: `user:${userId}`, payload: { user_id: userId, except_session_id: exceptSessionId ?? null },
});

/** A user's role changed: a demoted ADMIN's /admin sockets disconnect. */
export const roleChanged = (userId: number, role: string): OutboxEvent => ({
  name: 'role-changed', room: `user:${userId}`, payload: { user_id: userId, role },
});

/** A user joined a project (role), changed role, or left it (null): their sockets follow. */
export const membershipChanged = (projectId: number, userId: number, role: string | null): OutboxEvent => ({
  name: 'membership-changed', room: `user:${userId}`, payload: { project_id: projectId, user_id: userId, role },
});

/** A project is gone: every socket leaves its room. */
export const projectDeleted = (projectId: number): OutboxEvent => ({
  name: 'project-deleted', room: `project:${projectId}`, payload: { project_id: projectId },
});
