// Login, refresh with rotation and theft detection, logout, password change, and the
// per-request session check that makes revocation immediate on every instance.
import type { Actor, RequestContext } from '../../context.js';
import type { Tx } from '../../db/database.js';
import type { Deps } from '../../deps.js';
import { AppError, rateLimited, unauthenticated } from '../../http/errors.js';
import { findUserByEmail, updateUser, type UserRow } from '../users/users.repository.js';
import { decoyHash, hashPassword, verifyPassword } from './passwords.js';
import { releaseAttempt, reserveAttempt } from './throttle.js';
import { hashRefreshToken, newRefreshToken, signAccessToken, verifyAccessToken } from './tokens.js';

export interface TokenPair {
  access_token: string;
  refresh_token: string;
  token_type: 'Bearer';
  expires_in: number;
}

const invalidCredentials = () => unauthenticated('INVALID_CREDENTIALS', 'The email or the password is wrong');
export const accountDeactivated = () => new AppError(403, 'ACCOUNT_DEACTIVATED', 'This account is deactivated');

export function createAuthService(deps: Deps) {
  const { db, config, secrets, audit } = deps;

  async function issueTokens(tx: Tx, ctx: RequestContext, userId: number, sessionId?: number): Promise<TokenPair> {
    let sid = sessionId;
    if (sid === undefined) {
      const rows = await tx.query<{ id: number }>(
        `INSERT INTO sessions (user_id, expires_at, ip, user_agent)
         VALUES ($1, now() + make_interval(secs => $2), $3, $4) RETURNING id`,
        [userId, config.refreshTokenTtl, ctx.ip, ctx.userAgent?.slice(0, 512) ?? null],
      );
      sid = rows[0]!.id;
    } else {
      // Sliding lifetime: each rotation extends the session by REFRESH_TOKEN_TTL.
      await tx.query('UPDATE sessions SET expires_at = now() + make_interval(secs => $2) WHERE id = $1', [sid, config.refreshTokenTtl]);
    }
    const refresh = newRefreshToken();
    await tx.query('INSERT INTO refresh_tokens (token_hash, session_id) VALUES ($1, $2)', [hashRefreshToken(refresh), sid]);
    return {
      access_token: await signAccessToken(secrets.jwtKey, userId, sid, config.accessTokenTtl),
      refresh_token: refresh,
      token_type: 'Bearer',
      expires_in: config.accessTokenTtl,
    };
  }

  const loginFailure = (user: UserRow | undefined, email: string, reason: string) => ({
    action: 'LOGIN_FAILURE' as const,
    resourceType: 'USER' as const,
    resourceId: user?.id ?? null,
    actorId: user?.id ?? null,
    result: 'FAILURE' as const,
    metadata: { email, reason },
  });

  async function login(ctx: RequestContext, rawEmail: string, password: string): Promise<TokenPair & { user: UserRow }> {
    const email = rawEmail.toLowerCase();
    const ip = ctx.ip ?? '';
    const user = await findUserByEmail(db, email);
    const reservation = await db.transaction(async (tx) => {
      const r = await reserveAttempt(tx, email, ip);
      if (r.throttled) audit.record(tx, ctx, loginFailure(user, email, 'throttled'));
      return r;
    });
    if (reservation.throttled) throw rateLimited(reservation.retryAfter);

    // Unknown emails are verified against a decoy hash: the same work, the same answer.
    const verified = await verifyPassword(password, user?.password_hash ?? (await decoyHash()));
    if (!user || !verified) {
      await db.transaction(async (tx) => audit.record(tx, ctx, loginFailure(user, email, user ? 'bad_password' : 'unknown_email')));
      throw invalidCredentials();
    }
    if (!user.active) {
      await db.transaction(async (tx) => {
        await releaseAttempt(tx, reservation.id);
        audit.record(tx, ctx, loginFailure(user, email, 'deactivated'));
      });
      throw accountDeactivated();
    }
    const tokens = await db.transaction(async (tx) => {
      await releaseAttempt(tx, reservation.id);
      const pair = await issueTokens(tx, ctx, user.id);
      audit.record(tx, ctx, { action: 'LOGIN_SUCCESS', resourceType: 'USER', resourceId: user.id, actorId: user.id });
      return pair;
    });
    return { ...tokens, user };
  }

  type RefreshOutcome = { ok: TokenPair } | { error: AppError };

  async function refresh(ctx: RequestContext, token: string): Promise<TokenPair> {
    const tokenHash = hashRefreshToken(token);
    const outcome = await db.transaction(async (tx): Promise<RefreshOutcome> => {
      const rows = await tx.query<{ spent: boolean; session_id: number; user_id: number; revoked: boolean; expired: boolean; active: boolean }>(
        `SELECT rt.spent_at IS NOT NULL AS spent, s.id AS session_id, s.user_id, s.revoked_at IS NOT NULL AS revoked,
                s.expires_at <= now() AS expired, u.active
           FROM refresh_tokens rt JOIN sessions s ON s.id = rt.session_id JOIN users u ON u.id = s.user_id
          WHERE rt.token_hash = $1
          FOR UPDATE OF rt, s`,
        [tokenHash],
      );
      const row = rows[0];
      if (!row) return { error: unauthenticated('UNAUTHENTICATED', 'The refresh token is not valid') };
      if (row.revoked) return { error: unauthenticated('TOKEN_REVOKED', 'The session has been revoked') };
      if (row.spent) {
        // A spent token presented again: someone else holds a copy. End the whole session.
        await tx.query(`UPDATE sessions SET revoked_at = now(), revoked_reason = 'refresh_reuse' WHERE id = $1`, [row.session_id]);
        audit.record(tx, { ...ctx, actor: undefined }, {
          action: 'SESSION_REVOKED',
          resourceType: 'USER',
          resourceId: row.user_id,
          actorId: row.user_id,
          metadata: { reason: 'refresh_reuse', sessionId: row.session_id },
        });
        return { error: unauthenticated('TOKEN_REVOKED', 'This refresh token was already used; the session has been revoked') };
      }
      if (row.expired) return { error: unauthenticated('TOKEN_EXPIRED', 'The session has expired; log in again') };
      if (!row.active) return { error: accountDeactivated() };
      await tx.query('UPDATE refresh_tokens SET spent_at = now() WHERE token_hash = $1', [tokenHash]);
      return { ok: await issueTokens(tx, ctx, row.user_id, row.session_id) };
    });
    if ('error' in outcome) throw outcome.error;
    return outcome.ok;
  }

  async function logout(ctx: RequestContext & { actor: Actor }): Promise<void> {
    await db.transaction(async (tx) => {
      await tx.query(`UPDATE sessions SET revoked_at = now(), revoked_reason = 'logout' WHERE id = $1 AND revoked_at IS NULL`, [ctx.actor.sessionId]);
      audit.record(tx, ctx, { action: 'LOGOUT', resourceType: 'USER', resourceId: ctx.actor.id, metadata: { sessionId: ctx.actor.sessionId } });
    });
  }

  async function changePassword(ctx: RequestContext & { actor: Actor }, current: string, next: string): Promise<void> {
    const { actor } = ctx;
    const reservation = await db.transaction((tx) => reserveAttempt(tx, actor.email, ctx.ip ?? ''));
    if (reservation.throttled) throw rateLimited(reservation.retryAfter);
    const user = await findUserByEmail(db, actor.email);
    if (!user || !(await verifyPassword(current, user.password_hash))) {
      await audit.deny(db, ctx, { action: 'PASSWORD_CHANGED', resourceType: 'USER', resourceId: actor.id, metadata: { reason: 'bad_current_password' } });
      throw new AppError(403, 'INVALID_CREDENTIALS', 'current_password is wrong');
    }
    const passwordHash = await hashPassword(next);
    await db.transaction(async (tx) => {
      await releaseAttempt(tx, reservation.id);
      await updateUser(tx, actor.id, { password_hash: passwordHash });
      const revoked = await tx.query(
        `UPDATE sessions SET revoked_at = now(), revoked_reason = 'password_changed'
          WHERE user_id = $1 AND id <> $2 AND revoked_at IS NULL RETURNING id`,
        [actor.id, actor.sessionId],
      );
      audit.record(tx, ctx, { action: 'PASSWORD_CHANGED', resourceType: 'USER', resourceId: actor.id, metadata: { revokedSessions: revoked.length } });
    });
  }

  /** The per-request check: the token's signature, then the session and user as they are now. */
  async function authenticate(authorization: string | undefined): Promise<Actor> {
    const match = authorization?.match(/^Bearer ([A-Za-z0-9._~+/-]+=*)$/);
    if (!match) throw unauthenticated('UNAUTHENTICATED', 'Send an access token as Authorization: Bearer <token>');
    const claims = await verifyAccessToken(secrets.jwtKey, match[1]!);
    const rows = await db.query<{ id: number; email: string; name: string; role: Actor['role']; active: boolean; revoked: boolean; expired: boolean }>(
      `SELECT u.id, u.email, u.name, u.role, u.active, s.revoked_at IS NOT NULL AS revoked, s.expires_at <= now() AS expired
         FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1`,
      [claims.sessionId],
      { prepareAs: 'auth_session', lookup: true },
    );
    const row = rows[0];
    if (!row || row.id !== claims.userId) throw unauthenticated('TOKEN_REVOKED', 'The session no longer exists');
    if (!row.active) throw accountDeactivated();
    if (row.revoked) throw unauthenticated('TOKEN_REVOKED', 'The session has been revoked');
    if (row.expired) throw unauthenticated('TOKEN_EXPIRED', 'The session has expired; log in again');
    return { id: row.id, email: row.email, name: row.name, role: row.role, sessionId: claims.sessionId };
  }

  return { login, refresh, logout, changePassword, authenticate };
}

export type AuthService = ReturnType<typeof createAuthService>;
