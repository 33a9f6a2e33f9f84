// User administration and self-service. Each audited change is one use case run by the
// runner: the caller's rights are read, locked, inside the transaction that makes the change.
// A change of what authenticates a user's requests (role, active, email, name, the user itself)
// drops their sessions from this instance's session cache at commit, before it answers.
import type { ActorContext, RequestContext, UserRole } from '../../context.js';
import type { Tx } from '../../db/database.js';
import type { Deps } from '../../deps.js';
import type { Verdict } from '../../domain/authorization.js';
import { conflict, invalid, notFound, rateLimited, wrongCurrentPassword } from '../../domain/errors.js';
import { pageOf, type PageRequest } from '../../domain/page.js';
import { checkVersion, type ExpectedVersion } from '../../domain/versions.js';
import { useCase, UseCaseContractError, type DeniedRecord, type UnitOfWork, type UseCase } from '../../use-cases/runner.js';
import type { AuditAction } from '../audit/audit.writer.js';
import { hashPassword, verifyPassword } from '../auth/auth.passwords.js';
import { settleAttempt, throttledFor } from '../auth/auth.throttle.js';
import { roleChanged, userSessionsRevoked } from '../outbox/outbox.control-events.js';
import { revokeSessionsOf } from '../sessions/sessions.repository.js';
import type { UserDeletionStep } from './users.deletion.js';
import { usersPolicy } from './users.policy.js';
import * as repo from './users.repository.js';
import type { UserRow } from './users.repository.js';

const CREATE = useCase('users.create', ['CREATE_USER']);
const CREATE_ADMIN = useCase('users.createAdmin', ['CREATE_USER']);
const UPDATE = useCase('users.update', ['UPDATE_USER_EMAIL']);
const SET_ROLE = useCase('users.setRole', ['CHANGE_USER_ROLE']);
const SET_ACTIVE = useCase('users.setActive', ['ACTIVATE_USER', 'DEACTIVATE_USER']);
const DELETE = useCase('users.delete', ['DELETE_USER']);

export interface UsersServiceOptions {
  /** What other modules do when a user is deleted (refusals first, then clean-ups). */
  deletionSteps: UserDeletionStep[];
}

/** A use case that changes a user's rights locks that user's row with the caller's, first (runner.ts). */
const changing = (id: number) => ({ callerLock: { changingUsers: [id] } });

export function createUsersService(deps: Deps, { deletionSteps }: UsersServiceOptions) {
  const { db, run, sessionCache } = deps;
  /** At commit: this instance's next request of the user reads them from the database (sessions.cache.ts). */
  const uncacheAtCommit = (uow: UnitOfWork, id: number) => uow.tx.afterCommit(() => sessionCache.dropUser(id));

  /** `verdict` on user `id`: a refusal is 404 when they do not exist, else 403 with a DENIED record of `action` (if any) on them. */
  async function authorizeOnUser(uow: UnitOfWork, verdict: Verdict, id: number, action: AuditAction | undefined): Promise<void> {
    if (verdict.allowed) return;
    if (!(await repo.findUserById(uow.tx, id))) throw notFound('User');
    uow.authorize(verdict, 'User', action && { action, resourceType: 'USER', resourceId: id });
  }

  /**
   * A refusal decided before the work starts, on the request-time role (so that a refused caller
   * cannot make the server hash a password for them): the run only records it. The use case
   * decides again inside its own transaction when the early verdict allows.
   */
  function refuseEarly(ctx: ActorContext, uc: UseCase, verdict: Verdict, denied: DeniedRecord | undefined, id?: number): Promise<never> {
    return run<never>(ctx, uc, async (uow) => {
      if (id === undefined) uow.authorize(verdict, 'User', denied);
      else await authorizeOnUser(uow, verdict, id, denied?.action);
      throw new UseCaseContractError(`${uc.name}: refuseEarly with a verdict that allows`);
    });
  }

  /** The user, locked for a change of their rights; 404 when they do not exist. */
  async function lockForRights(tx: Tx, id: number): Promise<UserRow> {
    const user = await repo.lockUserForRights(tx, id);
    if (!user) throw notFound('User');
    return user;
  }

  /** 409 LAST_ADMIN when `user` is the last active ADMIN and is about to stop being one. */
  async function guardLastAdmin(tx: Tx, user: UserRow, what: string): Promise<void> {
    await repo.lockAdminGuard(tx);
    if (user.role !== 'ADMIN' || !user.active) return;
    if ((await repo.countActiveAdmins(tx)) <= 1) throw conflict('LAST_ADMIN', `The last active ADMIN cannot be ${what}`);
  }

  return {
    async list(viewer: { role: UserRole }, filters: { role?: UserRole; active?: boolean; q?: string }, page: PageRequest) {
      const rows = await repo.listUsers(db, { ...filters, searchEmails: viewer.role === 'ADMIN' }, page.after, page.limit);
      return pageOf(rows, page);
    },

    async get(id: number): Promise<UserRow> {
      const user = await repo.findUserById(db, id);
      if (!user) throw notFound('User');
      return user;
    },

    async create(ctx: ActorContext, body: { email: string; name: string; password: string; role?: UserRole }): Promise<UserRow> {
      const refusal = { action: 'CREATE_USER', resourceType: 'USER', resourceId: null } as const;
      // Refused before the password is hashed, so a USER cannot make the server hash for them;
      // and again inside the transaction, against the caller's role as it is then.
      const early = usersPolicy.can('create', ctx.actor);
      if (!early.allowed) return refuseEarly(ctx, CREATE, early, refusal);
      const passwordHash = await hashPassword(body.password, deps.config.passwordHashCost);
      const email = body.email.toLowerCase();
      return run(ctx, CREATE, async (uow) => {
        uow.authorize(usersPolicy.can('create', await uow.actor()), 'User', refusal);
        const user = await repo.insertUser(uow.tx, { email, name: body.name.trim(), passwordHash, role: body.role ?? 'USER' });
        if (!user) throw conflict('EMAIL_TAKEN', 'A user with this email already exists');
        uow.audit({ action: 'CREATE_USER', resourceType: 'USER', resourceId: user.id, metadata: { email, role: user.role } });
        return user;
      });
    },

    /**
     * An ADMIN made outside the API (first start, `teamlog create-admin`): CREATE_USER with no
     * actor. Undefined when the email is taken, or (`onlyIfNoAdmin`) when an ADMIN exists.
     * `beforeCommit` runs last inside the transaction: if it throws, nothing is created.
     */
    async createAdmin(
      ctx: RequestContext,
      admin: { email: string; name: string; passwordHash: string; via: 'first-start' | 'cli' },
      opts: { onlyIfNoAdmin?: boolean; beforeCommit?: () => void } = {},
    ): Promise<UserRow | undefined> {
      return run(ctx, CREATE_ADMIN, async (uow) => {
        if (opts.onlyIfNoAdmin) {
          // Instances starting together queue here; the second one then sees the first one's ADMIN.
          await repo.lockBootstrap(uow.tx);
          if (await repo.anyAdmin(uow.tx)) {
            uow.withoutRecord('unchanged');
            return undefined;
          }
        }
        const user = await repo.insertUser(uow.tx, { email: admin.email, name: admin.name, passwordHash: admin.passwordHash, role: 'ADMIN' });
        if (!user) {
          uow.withoutRecord('unchanged');
          return undefined;
        }
        uow.audit({
          action: 'CREATE_USER', resourceType: 'USER', resourceId: user.id, actorId: null,
          metadata: { email: user.email, role: 'ADMIN', via: admin.via },
        });
        opts.beforeCommit?.();
        return user;
      });
    },

    /** PUT /users/:id and PUT /profile: name, and email (UPDATE_USER_EMAIL when it changes). */
    async update(ctx: ActorContext, id: number, body: { name?: string; email?: string; current_password?: string }, expected: ExpectedVersion): Promise<UserRow> {
      const newEmail = body.email?.toLowerCase();
      // Refused on who the caller is and on whether they ask for an email change, never on the
      // stored email: otherwise the answer (and its record) would tell a guess from a miss.
      const refusal = body.email !== undefined ? ({ action: 'UPDATE_USER_EMAIL', resourceType: 'USER', resourceId: id } as const) : undefined;
      const early = usersPolicy.can('update', ctx.actor, { userId: id });
      if (!early.allowed) return refuseEarly(ctx, UPDATE, early, refusal, id);

      // Changing one's own email proves the password first (a wrong one counts toward the
      // login throttle). The hash is checked outside the transaction; the attempt is settled
      // inside it, where the change happens.
      let proof: { email: string; hash: string; ok: boolean } | undefined;
      const ip = ctx.ip ?? '';
      if (ctx.actor.id === id && newEmail !== undefined) {
        const me = await repo.findUserById(db, id);
        if (me && newEmail !== me.email) {
          if (body.current_password === undefined) throw invalid('/current_password', 'is required to change your own email');
          const wait = await throttledFor(db, me.email, ip);
          if (wait !== undefined) {
            return run<never>(ctx, UPDATE, async (uow) => {
              uow.audit({ action: 'UPDATE_USER_EMAIL', resourceType: 'USER', resourceId: id, result: 'DENIED', metadata: { reason: 'throttled' } });
              return uow.failAfterCommit(rateLimited(wait));
            });
          }
          proof = { email: me.email, hash: me.password_hash, ok: await verifyPassword(body.current_password, me.password_hash) };
        }
      }

      return run(ctx, UPDATE, async (uow) => {
        uow.authorize(usersPolicy.can('update', await uow.actor(), { userId: id }), 'User', refusal);
        const user = await repo.lockUserForEdit(uow.tx, id);
        if (!user) throw notFound('User');
        if (proof) {
          // A password changed meanwhile makes the proof void: the typed one is no longer the password.
          const failed = !proof.ok || user.password_hash !== proof.hash;
          const wait = await settleAttempt(uow.tx, proof.email, ip, failed);
          if (wait !== undefined || failed) {
            const reason = wait !== undefined ? 'throttled' : 'bad_current_password';
            uow.audit({ action: 'UPDATE_USER_EMAIL', resourceType: 'USER', resourceId: id, result: 'DENIED', metadata: { reason } });
            return uow.failAfterCommit(wait !== undefined ? rateLimited(wait) : wrongCurrentPassword());
          }
        }
        checkVersion(expected, user.version);
        const change: repo.UserChange = {};
        if (body.name !== undefined && body.name.trim() !== user.name) change.name = body.name.trim();
        if (newEmail !== undefined && newEmail !== user.email) {
          if (await repo.emailTaken(uow.tx, newEmail, id)) throw conflict('EMAIL_TAKEN', 'A user with this email already exists');
          change.email = newEmail;
        }
        if (change.email === undefined) uow.withoutRecord(change.name === undefined ? 'unchanged' : 'not audited');
        if (Object.keys(change).length === 0) return user;
        const updated = await repo.updateUser(uow.tx, id, change);
        uncacheAtCommit(uow, id);
        if (change.email !== undefined) {
          uow.audit({ action: 'UPDATE_USER_EMAIL', resourceType: 'USER', resourceId: id, metadata: { oldEmail: user.email, newEmail: change.email } });
        }
        return updated;
      });
    },

    async setRole(ctx: ActorContext, id: number, role: UserRole, expected: ExpectedVersion): Promise<UserRow> {
      return run(
        ctx,
        SET_ROLE,
        async (uow) => {
          await authorizeOnUser(uow, usersPolicy.can('changeRole', await uow.actor()), id, 'CHANGE_USER_ROLE');
          const user = await lockForRights(uow.tx, id);
          checkVersion(expected, user.version);
          if (user.role === role) {
            uow.withoutRecord('unchanged');
            return user;
          }
          if (role !== 'ADMIN') await guardLastAdmin(uow.tx, user, 'demoted');
          const updated = await repo.updateUser(uow.tx, id, { role });
          uncacheAtCommit(uow, id);
          uow.audit({ action: 'CHANGE_USER_ROLE', resourceType: 'USER', resourceId: id, metadata: { oldRole: user.role, newRole: role } });
          uow.emit(roleChanged(id, role));
          return updated;
        },
        changing(id),
      );
    },

    async setActive(ctx: ActorContext, id: number, active: boolean, expected: ExpectedVersion): Promise<UserRow> {
      const action = active ? 'ACTIVATE_USER' : 'DEACTIVATE_USER';
      return run(
        ctx,
        SET_ACTIVE,
        async (uow) => {
          await authorizeOnUser(uow, usersPolicy.can('changeActive', await uow.actor()), id, action);
          const user = await lockForRights(uow.tx, id);
          checkVersion(expected, user.version);
          if (user.active === active) {
            uow.withoutRecord('unchanged');
            return user;
          }
          if (!active) {
            await guardLastAdmin(uow.tx, user, 'deactivated');
            // Reactivation must not bring old tokens back to life.
            await revokeSessionsOf(uow.tx, id, 'deactivated');
            uow.emit(userSessionsRevoked(id));
          }
          const updated = await repo.updateUser(uow.tx, id, { active });
          uncacheAtCommit(uow, id);
          uow.audit({ action, resourceType: 'USER', resourceId: id });
          return updated;
        },
        changing(id),
      );
    },

    async remove(ctx: ActorContext, id: number): Promise<void> {
      await run(
        ctx,
        DELETE,
        async (uow) => {
          await authorizeOnUser(uow, usersPolicy.can('delete', await uow.actor()), id, 'DELETE_USER');
          const user = await lockForRights(uow.tx, id);
          await guardLastAdmin(uow.tx, user, 'deleted');
          for (const step of deletionSteps) await step(uow, user);
          await repo.deleteUser(uow.tx, id);
          uncacheAtCommit(uow, id);
          uow.audit({ action: 'DELETE_USER', resourceType: 'USER', resourceId: id, metadata: { email: user.email, role: user.role } });
          uow.emit(userSessionsRevoked(id));
        },
        changing(id),
      );
    },
  };
}

export type UsersService = ReturnType<typeof createUsersService>;
