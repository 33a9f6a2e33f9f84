// Login, refresh with rotation and theft detection, logout, password change, and the
// per-request session check that makes revocation immediate on every instance. HTTP requests
// are authenticated from the session cache (sessions.cache.ts); every use case here that ends
// sessions drops them from it at commit, before it answers.
import type { Actor, ActorContext, RequestContext } from '../../context.js';
import type { Tx } from '../../db/database.js';
import type { Deps } from '../../deps.js';
import { accountDeactivated, rateLimited, unauthenticated, wrongCurrentPassword, type DomainError } from '../../domain/errors.js';
import { useCase, type UnitOfWork } from '../../use-cases/runner.js';
import type { AuditEntry } from '../audit/audit.writer.js';
import { sessionRevoked, userSessionsRevoked } from '../outbox/outbox.control-events.js';
import { liveActor } from '../../domain/session-verdict.js';
import * as sessions from '../sessions/sessions.repository.js';
import { findUserByEmail, findUserById, lockUserForEdit, lockUserForLogin, updateUser, type UserRow } from '../users/users.repository.js';
import { decoyHash, hashPassword, verifyPassword } from './auth.passwords.js';
import { settleAttempt, throttledFor } from './auth.throttle.js';
import { hashRefreshToken, isWellFormedRefreshToken, newRefreshToken, signAccessToken, verifyAccessToken } from './auth.tokens.js';

export interface TokenPair {
  access_token: string;
  refresh_token: string;
  token_type: 'Bearer';
  expires_in: number;
}

const LOGIN = useCase('auth.login', ['LOGIN_SUCCESS', 'LOGIN_FAILURE']);
const REFRESH = useCase('auth.refresh', ['SESSION_REVOKED']);
const LOGOUT = useCase('auth.logout', ['LOGOUT']);
const CHANGE_PASSWORD = useCase('auth.changePassword', ['PASSWORD_CHANGED']);

const invalidCredentials = () => unauthenticated('INVALID_CREDENTIALS', 'The email or the password is wrong');
const invalidRefreshToken = () => unauthenticated('UNAUTHENTICATED', 'The refresh token is not valid');

const loginFailure = (user: UserRow | undefined, email: string, reason: string): AuditEntry => ({
  action: 'LOGIN_FAILURE',
  resourceType: 'USER',
  resourceId: user?.id ?? null,
  actorId: user?.id ?? null,
  result: 'FAILURE',
  metadata: { email, reason },
});

export function createAuthService(deps: Deps) {
  const { db, config, secrets, run, sessionCache } = deps;

  async function issueTokens(tx: Tx, ctx: RequestContext, userId: number, sessionId?: number): Promise<TokenPair> {
    let sid = sessionId;
    if (sid === undefined) sid = await sessions.insertSession(tx, { userId, ttlSeconds: config.refreshTokenTtl, ip: ctx.ip, userAgent: ctx.userAgent });
    else await sessions.extendSession(tx, sid, config.refreshTokenTtl);
    const refresh = newRefreshToken();
    await sessions.insertRefreshToken(tx, hashRefreshToken(refresh), sid);
    return {
      access_token: await signAccessToken(secrets.jwtKey, userId, sid, config.accessTokenTtl),
      refresh_token: refresh,
      token_type: 'Bearer',
      expires_in: config.accessTokenTtl,
    };
  }

  /** A failure that is itself recorded (and kept): the record commits, then the caller hears `error`. */
  const recordedFailure = (uow: UnitOfWork, entry: AuditEntry, error: DomainError) => {
    uow.audit(entry);
    return uow.failAfterCommit(error);
  };

  async function login(ctx: RequestContext, rawEmail: string, password: string): Promise<TokenPair & { user: UserRow }> {
    const email = rawEmail.toLowerCase();
    const ip = ctx.ip ?? '';
    const known = await findUserByEmail(db, email);
    // Throttled before any hashing: a locked-out guesser costs a query, not a scrypt.
    const wait = await throttledFor(db, email, ip);
    if (wait !== undefined) return run<never>(ctx, LOGIN, async (uow) => recordedFailure(uow, loginFailure(known, email, 'throttled'), rateLimited(wait)));

    // Unknown emails are verified against a decoy hash: the same work, the same answer.
    const verified = await verifyPassword(password, known?.password_hash ?? (await decoyHash(config.passwordHashCost)));

    return run(ctx, LOGIN, async (uow) => {
      // The user as they are now: deactivated or given a new password while the hash was checked.
      const user = known && (await lockUserForLogin(uow.tx, known.id));
      const passwordOk = verified && user !== undefined && user.password_hash === known?.password_hash;
      const settled = await settleAttempt(uow.tx, email, ip, !passwordOk);
      if (settled !== undefined) return recordedFailure(uow, loginFailure(user, email, 'throttled'), rateLimited(settled));
      if (!user || !passwordOk) return recordedFailure(uow, loginFailure(user, email, user ? 'bad_password' : 'unknown_email'), invalidCredentials());
      // Answered only after the password verified, so it tells nothing to a guesser.
      if (!user.active) return recordedFailure(uow, loginFailure(user, email, 'deactivated'), accountDeactivated());
      const pair = await issueTokens(uow.tx, ctx, user.id);
      uow.audit({ action: 'LOGIN_SUCCESS', resourceType: 'USER', resourceId: user.id, actorId: user.id });
      return { ...pair, user };
    });
  }

  async function refresh(ctx: RequestContext, token: string): Promise<TokenPair> {
    // A malformed token can match nothing: refused like an unknown one, without a query.
    if (!isWellFormedRefreshToken(token)) throw invalidRefreshToken();
    const tokenHash = hashRefreshToken(token);
    return run(ctx, REFRESH, async (uow) => {
      const row = await sessions.lockRefreshToken(uow.tx, tokenHash);
      if (!row) throw invalidRefreshToken();
      if (row.revoked) throw unauthenticated('TOKEN_REVOKED', 'The session has been revoked');
      if (row.spent) {
        // A spent token presented again: someone else holds a copy. End the whole session.
        await sessions.revokeSession(uow.tx, row.session_id, 'refresh_reuse');
        uow.tx.afterCommit(() => sessionCache.dropSession(row.session_id));
        uow.emit(sessionRevoked(row.user_id, row.session_id));
        const entry: AuditEntry = {
          action: 'SESSION_REVOKED', resourceType: 'USER', resourceId: row.user_id, actorId: row.user_id,
          metadata: { reason: 'refresh_reuse', sessionId: row.session_id },
        };
        return recordedFailure(uow, entry, unauthenticated('TOKEN_REVOKED', 'This refresh token was already used; the session has been revoked'));
      }
      if (row.expired) throw unauthenticated('TOKEN_EXPIRED', 'The session has expired; log in again');
      if (!row.active) throw accountDeactivated();
      await sessions.spendRefreshToken(uow.tx, tokenHash);
      uow.withoutRecord('not audited');
      return issueTokens(uow.tx, ctx, row.user_id, row.session_id);
    });
  }

  async function logout(ctx: ActorContext): Promise<void> {
    await run(
      ctx,
      LOGOUT,
      async (uow) => {
        const actor = await uow.actor();
        // A second logout of the same session (in parallel) waited for the first, and finds it revoked.
        if (!(await sessions.revokeSession(uow.tx, actor.sessionId, 'logout'))) throw unauthenticated('TOKEN_REVOKED', 'The session has been revoked');
        uow.tx.afterCommit(() => sessionCache.dropSession(actor.sessionId));
        uow.audit({ action: 'LOGOUT', resourceType: 'USER', resourceId: actor.id, metadata: { sessionId: actor.sessionId } });
        uow.emit(sessionRevoked(actor.id, actor.sessionId));
      },
      { callerLock: 'revoking own session' },
    );
  }

  async function changePassword(ctx: ActorContext, current: string, next: string): Promise<void> {
    const { actor } = ctx;
    const ip = ctx.ip ?? '';
    const denied = (reason: string): AuditEntry => ({ action: 'PASSWORD_CHANGED', resourceType: 'USER', resourceId: actor.id, result: 'DENIED', metadata: { reason } });
    // The email as stored: the actor may come from the session cache, a moment behind an email change.
    const me = await findUserById(db, actor.id);
    const email = me?.email ?? actor.email;
    const wait = await throttledFor(db, email, ip);
    if (wait !== undefined) return run<never>(ctx, CHANGE_PASSWORD, async (uow) => recordedFailure(uow, denied('throttled'), rateLimited(wait)));
    const verified = me !== undefined && (await verifyPassword(current, me.password_hash));
    // Hashed before the transaction (it takes ~45 ms); only used if the current password verified.
    const passwordHash = verified ? await hashPassword(next, config.passwordHashCost) : undefined;
    return run(
      ctx,
      CHANGE_PASSWORD,
      async (uow) => {
        await uow.actor(); // still active, session still live: otherwise 401/403 and nothing changes
        const user = await lockUserForEdit(uow.tx, actor.id);
        const failed = !verified || user?.password_hash !== me?.password_hash;
        const settled = await settleAttempt(uow.tx, email, ip, failed);
        if (settled !== undefined) return recordedFailure(uow, denied('throttled'), rateLimited(settled));
        if (failed || !passwordHash) return recordedFailure(uow, denied('bad_current_password'), wrongCurrentPassword());
        await updateUser(uow.tx, actor.id, { password_hash: passwordHash });
        const revoked = await sessions.revokeSessionsOf(uow.tx, actor.id, 'password_changed', actor.sessionId);
        uow.tx.afterCommit(() => sessionCache.dropUser(actor.id));
        uow.audit({ action: 'PASSWORD_CHANGED', resourceType: 'USER', resourceId: actor.id, metadata: { revokedSessions: revoked } });
        uow.emit(userSessionsRevoked(actor.id, actor.sessionId));
      },
      { callerLock: { changingUsers: [actor.id] } },
    );
  }

  /** The token's signature, expiry and claims: no database. */
  async function verifiedClaims(token: string) {
    if (!/^[A-Za-z0-9._~+/-]+=*$/.test(token)) throw unauthenticated('UNAUTHENTICATED', 'The access token is not valid');
    return verifyAccessToken(secrets.jwtKey, token);
  }

  /**
   * An access token's caller as the database has them now (signature, then session and user),
   * and when the token expires (ms). Never from the cache: the sockets' handshake and reauth.
   */
  async function authenticateToken(token: string): Promise<{ actor: Actor; expiresAt: number }> {
    const claims = await verifiedClaims(token);
    const actor = liveActor(await sessions.lookupSession(db, claims.sessionId), { id: claims.userId, sessionId: claims.sessionId });
    return { actor, expiresAt: claims.expiresAt * 1000 };
  }

  /**
   * The per-request check of HTTP: `Authorization: Bearer <token>`. From the session cache when
   * it holds the session, else from the database, and then cached if live. A write checks the
   * caller again on locked rows inside its transaction (use-cases/runner.ts).
   */
  async function authenticate(authorization: string | undefined): Promise<Actor> {
    const match = authorization?.match(/^Bearer (\S+)$/);
    if (!match) throw unauthenticated('UNAUTHENTICATED', 'Send an access token as Authorization: Bearer <token>');
    const claims = await verifiedClaims(match[1]!);
    const claimed = { id: claims.userId, sessionId: claims.sessionId };
    const cached = sessionCache.get(claims.sessionId);
    if (cached) return liveActor(cached, claimed);
    const ticket = sessionCache.ticket();
    // Taken before the read: the session's end by this clock is then never later than the database's.
    const asked = Date.now();
    const row = await sessions.lookupSession(db, claims.sessionId);
    const actor = liveActor(row, claimed);
    sessionCache.put(claims.sessionId, row!, asked + row!.expires_in_ms, ticket);
    return actor;
  }

  return { login, refresh, logout, changePassword, authenticate, authenticateToken };
}

export type AuthService = ReturnType<typeof createAuthService>;
