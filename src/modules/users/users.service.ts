// User administration and self-service. Each audited use case is one transaction:
// load and lock → authorize → check preconditions → change → audit record.
import type { Actor, RequestContext, UserRole } from '../../context.js';
import type { Tx } from '../../db/database.js';
import type { Deps } from '../../deps.js';
import { AppError, conflict, forbidden, invalid, notFound, rateLimited } from '../../http/errors.js';
import { pageRequest } from '../../http/pagination.js';
import { checkIfMatch, type IfMatch } from '../../http/preconditions.js';
import type { AuditAction } from '../audit/audit.writer.js';
import { hashPassword, verifyPassword } from '../auth/passwords.js';
import { releaseAttempt, reserveAttempt } from '../auth/throttle.js';
import { userDeletionSteps } from './user-deletion.js';
import { usersPolicy } from './users.policy.js';
import { USER_VIEWS } from './users.presenter.js';
import * as repo from './users.repository.js';
import type { UserRow } from './users.repository.js';

type Ctx = RequestContext & { actor: Actor };

// Serializes every change that could leave no active ADMIN (demote, deactivate, delete).
const ADMIN_GUARD_LOCK = 7_245_002;

export function createUsersService(deps: Deps) {
  const { db, audit } = deps;

  /** Loads the target for a change; 404 when it does not exist. */
  async function loadForUpdate(tx: Tx, id: number): Promise<UserRow> {
    const user = await repo.findUserById(tx, id, { forUpdate: true });
    if (!user) throw notFound('User');
    return user;
  }

  /** Refuses with 403 and one DENIED record (in its own transaction) when the policy says no. */
  async function authorize(ctx: Ctx, allowed: boolean, action: AuditAction, target: UserRow | undefined): Promise<void> {
    if (allowed) return;
    if (target) await audit.deny(db, ctx, { action, resourceType: 'USER', resourceId: target.id });
    throw forbidden();
  }

  /** 409 LAST_ADMIN when `user` is the last active ADMIN and is about to stop being one. */
  async function guardLastAdmin(tx: Tx, user: UserRow, what: string): Promise<void> {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [ADMIN_GUARD_LOCK]);
    if (user.role !== 'ADMIN' || !user.active) return;
    if ((await repo.countActiveAdmins(tx)) <= 1) {
      throw conflict('LAST_ADMIN', `The last active ADMIN cannot be ${what}`);
    }
  }

  return {
    async list(actor: Actor, query: { role?: UserRole; active?: boolean; q?: string; limit?: number; cursor?: string }) {
      const page = pageRequest(query);
      const rows = await repo.listUsers(db, { role: query.role, active: query.active, q: query.q, searchEmails: actor.role === 'ADMIN' }, page.beforeId, page.limit);
      return { rows, page };
    },

    async get(id: number): Promise<UserRow> {
      const user = await repo.findUserById(db, id);
      if (!user) throw notFound('User');
      return user;
    },

    async create(ctx: Ctx, body: { email: string; name: string; password: string; role?: UserRole }): Promise<UserRow> {
      if (!usersPolicy.create(ctx.actor)) throw forbidden('Only an ADMIN may create users');
      const passwordHash = await hashPassword(body.password);
      const email = body.email.toLowerCase();
      return db.transaction(async (tx) => {
        const user = await repo.insertUser(tx, { email, name: body.name.trim(), passwordHash, role: body.role ?? 'USER' });
        if (!user) throw conflict('EMAIL_TAKEN', 'A user with this email already exists');
        audit.record(tx, ctx, { action: 'CREATE_USER', resourceType: 'USER', resourceId: user.id, metadata: { email, role: user.role } });
        return user;
      });
    },

    async update(ctx: Ctx, id: number, body: { name?: string; email?: string; current_password?: string }, ifMatch: IfMatch): Promise<UserRow> {
      const self = ctx.actor.id === id;
      const newEmail = body.email?.toLowerCase();
      const existing = await repo.findUserById(db, id);
      if (!existing) throw notFound('User');
      const emailChanges = newEmail !== undefined && newEmail !== existing.email;
      await authorize(ctx, usersPolicy.update(ctx.actor, id), 'UPDATE_USER_EMAIL', emailChanges ? existing : undefined);

      // Changing one's own email proves the password first (and a wrong one counts toward
      // the throttle). A verified password is not a failure, whatever happens next (a taken
      // email, a stale If-Match), so its reservation is released in a transaction of its own
      // rather than in the change's, which may roll back.
      if (emailChanges && self) {
        if (body.current_password === undefined) throw invalid('/current_password', 'is required to change your own email');
        const reservation = await db.transaction((tx) => reserveAttempt(tx, existing.email, ctx.ip ?? ''));
        if (reservation.throttled) throw rateLimited(reservation.retryAfter);
        if (!(await verifyPassword(body.current_password, existing.password_hash))) {
          await audit.deny(db, ctx, { action: 'UPDATE_USER_EMAIL', resourceType: 'USER', resourceId: id, metadata: { reason: 'bad_current_password' } });
          throw new AppError(403, 'INVALID_CREDENTIALS', 'current_password is wrong');
        }
        await db.transaction((tx) => releaseAttempt(tx, reservation.id));
      }

      return db.transaction(async (tx) => {
        const user = await loadForUpdate(tx, id);
        checkIfMatch(ifMatch, 'user', user.id, user.version, USER_VIEWS);
        const change: { name?: string; email?: string } = {};
        if (body.name !== undefined && body.name.trim() !== user.name) change.name = body.name.trim();
        if (newEmail !== undefined && newEmail !== user.email) {
          if (await repo.emailTaken(tx, newEmail, id)) throw conflict('EMAIL_TAKEN', 'A user with this email already exists');
          change.email = newEmail;
        }
        if (Object.keys(change).length === 0) return user;
        const updated = await repo.updateUser(tx, id, change);
        if (change.email !== undefined) {
          audit.record(tx, ctx, { action: 'UPDATE_USER_EMAIL', resourceType: 'USER', resourceId: id, metadata: { oldEmail: user.email, newEmail: change.email } });
        }
        return updated;
      });
    },

    async setRole(ctx: Ctx, id: number, role: UserRole, ifMatch: IfMatch): Promise<UserRow> {
      const existing = await repo.findUserById(db, id);
      if (!existing) throw notFound('User');
      await authorize(ctx, usersPolicy.changeRole(ctx.actor), 'CHANGE_USER_ROLE', existing);
      return db.transaction(async (tx) => {
        const user = await loadForUpdate(tx, id);
        checkIfMatch(ifMatch, 'user', user.id, user.version, USER_VIEWS);
        if (user.role === role) return user;
        if (role !== 'ADMIN') await guardLastAdmin(tx, user, 'demoted');
        const updated = await repo.updateUser(tx, id, { role });
        audit.record(tx, ctx, { action: 'CHANGE_USER_ROLE', resourceType: 'USER', resourceId: id, metadata: { oldRole: user.role, newRole: role } });
        return updated;
      });
    },

    async setActive(ctx: Ctx, id: number, active: boolean, ifMatch: IfMatch): Promise<UserRow> {
      const action = active ? 'ACTIVATE_USER' : 'DEACTIVATE_USER';
      const existing = await repo.findUserById(db, id);
      if (!existing) throw notFound('User');
      await authorize(ctx, usersPolicy.changeActive(ctx.actor), action, existing);
      return db.transaction(async (tx) => {
        const user = await loadForUpdate(tx, id);
        checkIfMatch(ifMatch, 'user', user.id, user.version, USER_VIEWS);
        if (user.active === active) return user;
        if (!active) {
          await guardLastAdmin(tx, user, 'deactivated');
          // Reactivation must not bring old tokens back to life.
          await tx.query(`UPDATE sessions SET revoked_at = now(), revoked_reason = 'deactivated' WHERE user_id = $1 AND revoked_at IS NULL`, [id]);
        }
        const updated = await repo.updateUser(tx, id, { active });
        audit.record(tx, ctx, { action, resourceType: 'USER', resourceId: id });
        return updated;
      });
    },

    async remove(ctx: Ctx, id: number): Promise<void> {
      const existing = await repo.findUserById(db, id);
      if (!existing) throw notFound('User');
      await authorize(ctx, usersPolicy.delete(ctx.actor), 'DELETE_USER', existing);
      await db.transaction(async (tx) => {
        const user = await loadForUpdate(tx, id);
        await guardLastAdmin(tx, user, 'deleted');
        for (const step of userDeletionSteps) await step(tx, user);
        await tx.query('DELETE FROM users WHERE id = $1', [id]);
        audit.record(tx, ctx, { action: 'DELETE_USER', resourceType: 'USER', resourceId: id, metadata: { email: user.email, role: user.role } });
      });
    },
  };
}

export type UsersService = ReturnType<typeof createUsersService>;
