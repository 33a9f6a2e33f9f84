// Sessions and their refresh tokens: every statement about them, including the one way to
// revoke them and the caller's lock that every use case starts with.
import type { Queryable } from '../../db/database.js';
import { query, statements } from '../../db/statements.js';
import type { SessionRow } from '../../domain/session-verdict.js';

// The caller's facts, locked (see lockActor below): user rows first, then the session row; the
// lateral join fixes that order. $1: the user ids to lock, the caller's among them (in id
// order, so that two use cases locking the same users queue instead of deadlocking); $2: the
// caller's session. Only the caller's row carries session facts.
function lockActorText(userLock: string, sessionLock: string): string {
  return `SELECT u.id, u.email, u.name, u.role, u.active, s.revoked_at IS NOT NULL AS revoked, s.expires_at <= now() AS expired
  FROM (SELECT id, email, name, role, active FROM users WHERE id = ANY ($1::bigint[]) ORDER BY id ${userLock}) u
  LEFT JOIN LATERAL (SELECT revoked_at, expires_at FROM sessions WHERE id = $2 AND user_id = u.id ${sessionLock}) s ON true`;
}

const S = statements('sessions', {
  // The per-request check (authentication): the session and its user as they are now, and how
  // long the session has left by the database's clock (the session cache's bound: no clock skew).
  lookup: {
    text: `SELECT u.id, u.email, u.name, u.role, u.active, s.revoked_at IS NOT NULL AS revoked, s.expires_at <= now() AS expired,
       (extract(epoch FROM s.expires_at - now()) * 1000)::float8 AS expires_in_ms
  FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1`,
    prepare: true,
    lookup: true,
  },
  // The same facts inside a use case's transaction, locked. FOR KEY SHARE lets ordinary edits
  // of either row through; demotion, deactivation, deletion and revocation take FOR UPDATE and
  // so wait for the use cases in flight, or are seen by them.
  lockActor: { text: lockActorText('FOR KEY SHARE', 'FOR KEY SHARE'), prepare: true },
  // For a use case that will revoke its own session (logout): the session row FOR UPDATE at
  // once, so that two of them queue instead of deadlocking on the upgrade.
  lockActorRevokingSession: lockActorText('FOR KEY SHARE', 'FOR UPDATE'),
  // For a use case that changes users' rights or revokes their sessions (role, active,
  // deletion, password change): those users' rows and the caller's, FOR UPDATE, at once and
  // in id order. Two ADMINs demoting each other then queue; the second finds itself demoted.
  lockActorChangingUsers: lockActorText('FOR UPDATE', 'FOR KEY SHARE'),
  // A batch's callers at once (use-cases/batch.ts): every caller's user row, then every
  // caller's session row, FOR KEY SHARE, in id order (the lock order above), in one statement
  // instead of one a run. A row per session asked about that still belongs to its user.
  lockActors: {
    text: `SELECT u.id, u.email, u.name, u.role, u.active, s.id AS session_id, s.revoked_at IS NOT NULL AS revoked, s.expires_at <= now() AS expired
  FROM (SELECT id, email, name, role, active FROM users WHERE id = ANY ($1::bigint[]) ORDER BY id FOR KEY SHARE) u
  JOIN LATERAL (SELECT id, revoked_at, expires_at FROM sessions WHERE id = ANY ($2::bigint[]) AND user_id = u.id ORDER BY id FOR KEY SHARE) s ON true`,
    prepare: true,
  },
  insert: `INSERT INTO sessions (user_id, expires_at, ip, user_agent)
  VALUES ($1, now() + make_interval(secs => $2), $3, $4) RETURNING id`,
  // Sliding lifetime: each rotation extends the session.
  extend: 'UPDATE sessions SET expires_at = now() + make_interval(secs => $2) WHERE id = $1',
  // Revocation takes FOR UPDATE (an UPDATE alone takes a weaker lock that use cases in flight
  // would not wait for), so a use case of the session either committed before or is refused.
  // $1: one session, or $2: every session of a user except $3; only live ones.
  revoke: `WITH doomed AS (
    SELECT id FROM sessions
     WHERE revoked_at IS NULL AND (id = $1 OR (user_id = $2 AND id IS DISTINCT FROM $3))
     ORDER BY id FOR UPDATE)
  UPDATE sessions s SET revoked_at = now(), revoked_reason = $4 FROM doomed WHERE s.id = doomed.id RETURNING s.id`,
  insertRefreshToken: 'INSERT INTO refresh_tokens (token_hash, session_id) VALUES ($1, $2)',
  lockRefreshToken: `SELECT rt.spent_at IS NOT NULL AS spent, s.id AS session_id, s.user_id, s.revoked_at IS NOT NULL AS revoked,
       s.expires_at <= now() AS expired, u.active
  FROM refresh_tokens rt JOIN sessions s ON s.id = rt.session_id JOIN users u ON u.id = s.user_id
 WHERE rt.token_hash = $1
   FOR UPDATE OF rt, s`,
  spendRefreshToken: 'UPDATE refresh_tokens SET spent_at = now() WHERE token_hash = $1',
  pruneExpired: `DELETE FROM sessions WHERE expires_at < now() - interval '30 days'`,
});

export type RevocationReason = 'logout' | 'password_changed' | 'deactivated' | 'refresh_reuse';

/** A session as the per-request check reads it: its facts, and the milliseconds it has left. */
export type LookedUpSession = SessionRow & { expires_in_ms: number };

export const lookupSession = async (q: Queryable, sessionId: number): Promise<LookedUpSession | undefined> =>
  (await query<LookedUpSession>(q, S.lookup, [sessionId]))[0];

/** How a use case locks its caller's rows (and the users it changes): see the statements above. */
import type { CallerLock } from '../../use-cases/ports.js';

export type { CallerLock } from '../../use-cases/ports.js';

/** Locks the caller's user and session rows (and any users changed); answers the caller's row. */
export async function lockActor(q: Queryable, userId: number, sessionId: number, mode: CallerLock = 'key share'): Promise<SessionRow | undefined> {
  const [statement, ids] =
    mode === 'key share' ? [S.lockActor, [userId]]
    : mode === 'revoking own session' ? [S.lockActorRevokingSession, [userId]]
    : [S.lockActorChangingUsers, [...new Set([userId, ...mode.changingUsers])]];
  return (await query<SessionRow>(q, statement, [ids, sessionId])).find((row) => row.id === userId);
}

/** Locks many callers' rows at once (lockActor for a batch); answers each live session's row by session id. */
export async function lockActors(q: Queryable, callers: ReadonlyArray<{ userId: number; sessionId: number }>): Promise<Map<number, SessionRow>> {
  const byId = (ids: number[]) => [...new Set(ids)].sort((a, b) => a - b);
  const rows = await query<SessionRow & { session_id: number }>(q, S.lockActors, [byId(callers.map((c) => c.userId)), byId(callers.map((c) => c.sessionId))]);
  return new Map(rows.map(({ session_id, ...row }) => [session_id, row]));
}

export async function insertSession(q: Queryable, s: { userId: number; ttlSeconds: number; ip: string | null; userAgent: string | null }): Promise<number> {
  return (await query<{ id: number }>(q, S.insert, [s.userId, s.ttlSeconds, s.ip, s.userAgent?.slice(0, 512) ?? null]))[0]!.id;
}

export const extendSession = (q: Queryable, id: number, ttlSeconds: number) => query(q, S.extend, [id, ttlSeconds]);

/** Revokes one session; answers whether it was still live (a second logout finds it revoked). */
export async function revokeSession(q: Queryable, id: number, reason: RevocationReason): Promise<boolean> {
  return (await query(q, S.revoke, [id, null, null, reason])).length > 0;
}

/** Revokes every live session of a user, except `keep`; answers how many. */
export async function revokeSessionsOf(q: Queryable, userId: number, reason: RevocationReason, keep?: number): Promise<number> {
  return (await query(q, S.revoke, [null, userId, keep ?? null, reason])).length;
}

export const insertRefreshToken = (q: Queryable, tokenHash: Buffer, sessionId: number) => query(q, S.insertRefreshToken, [tokenHash, sessionId]);

export interface RefreshTokenRow {
  spent: boolean;
  session_id: number;
  user_id: number;
  revoked: boolean;
  expired: boolean;
  active: boolean;
}

export const lockRefreshToken = async (q: Queryable, tokenHash: Buffer): Promise<RefreshTokenRow | undefined> =>
  (await query<RefreshTokenRow>(q, S.lockRefreshToken, [tokenHash]))[0];

export const spendRefreshToken = (q: Queryable, tokenHash: Buffer) => query(q, S.spendRefreshToken, [tokenHash]);

export const pruneExpiredSessions = (q: Queryable) => query(q, S.pruneExpired);
