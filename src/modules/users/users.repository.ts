// SQL for users. Every function takes the Queryable it runs on (a transaction or the database).
import type { UserRole } from '../../context.js';
import type { Queryable } from '../../db/database.js';
import { query, statements } from '../../db/statements.js';

export interface UserRow {
  id: number;
  email: string;
  name: string;
  password_hash: string;
  role: UserRole;
  active: boolean;
  version: number;
  created_at: string;
  updated_at: string;
}

const COLUMNS = 'id, email, name, password_hash, role, active, version, created_at, updated_at';

const S = statements('users', {
  findById: `SELECT ${COLUMNS} FROM users WHERE id = $1`,
  findByEmail: `SELECT ${COLUMNS} FROM users WHERE email = $1`,
  // For a change of name, email or password: FOR NO KEY UPDATE serializes changes to the user
  // while rows that merely reference them (a task assigned to them) can still be written, and
  // use cases in flight for the user (FOR KEY SHARE, use-cases/runner.ts) go on.
  lockForEdit: `SELECT ${COLUMNS} FROM users WHERE id = $1 FOR NO KEY UPDATE`,
  // For a change of what the user may do (role, active, deletion): FOR UPDATE waits for the
  // user's use cases in flight, and those that start later see the change.
  lockForRights: `SELECT ${COLUMNS} FROM users WHERE id = $1 FOR UPDATE`,
  // A login reads the user's password hash and active flag as they are when it commits.
  lockForLogin: `SELECT ${COLUMNS} FROM users WHERE id = $1 FOR KEY SHARE`,
  // ON CONFLICT keeps a taken email from aborting the transaction; the caller answers 409.
  insert: `INSERT INTO users (email, name, password_hash, role) VALUES ($1, $2, $3, $4)
  ON CONFLICT (email) DO NOTHING RETURNING ${COLUMNS}`,
  // Applies the fields given (null: unchanged) and bumps the version (the ETag).
  update: `UPDATE users SET
    email = COALESCE($2, email), name = COALESCE($3, name), password_hash = COALESCE($4, password_hash),
    role = COALESCE($5, role), active = COALESCE($6::boolean, active),
    version = version + 1, updated_at = now()
  WHERE id = $1 RETURNING ${COLUMNS}`,
  delete: 'DELETE FROM users WHERE id = $1',
  emailTaken: 'SELECT 1 FROM users WHERE email = $1 AND id <> $2',
  countActiveAdmins: `SELECT count(*)::int AS n FROM users WHERE role = 'ADMIN' AND active`,
  anyAdmin: `SELECT 1 FROM users WHERE role = 'ADMIN' LIMIT 1`,
  firstAdmin: `SELECT ${COLUMNS} FROM users WHERE role = 'ADMIN' ORDER BY id LIMIT 1`,
  // Serializes every change that could leave no active ADMIN (demote, deactivate, delete):
  // two such changes of two different ADMINs lock different rows, so a row lock is not enough.
  lockAdminGuard: 'SELECT pg_advisory_xact_lock(7245002)',
  // Serializes first starts of instances starting together, so that one first ADMIN is made.
  lockBootstrap: 'SELECT pg_advisory_xact_lock(7245003)',
  list: `SELECT ${COLUMNS} FROM users
   WHERE ($1::text IS NULL OR role = $1)
     AND ($2::boolean IS NULL OR active = $2)
     AND ($3::text IS NULL OR name ILIKE $3 OR ($4 AND email ILIKE $3))
     AND ($5::bigint IS NULL OR id < $5)
   ORDER BY id DESC LIMIT $6`,
});

const first = <T>(rows: T[]): T | undefined => rows[0];

export const findUserById = async (q: Queryable, id: number) => first(await query<UserRow>(q, S.findById, [id]));
export const findUserByEmail = async (q: Queryable, email: string) => first(await query<UserRow>(q, S.findByEmail, [email]));
export const lockUserForEdit = async (q: Queryable, id: number) => first(await query<UserRow>(q, S.lockForEdit, [id]));
export const lockUserForRights = async (q: Queryable, id: number) => first(await query<UserRow>(q, S.lockForRights, [id]));
export const lockUserForLogin = async (q: Queryable, id: number) => first(await query<UserRow>(q, S.lockForLogin, [id]));

export async function insertUser(q: Queryable, u: { email: string; name: string; passwordHash: string; role: UserRole }): Promise<UserRow | undefined> {
  return first(await query<UserRow>(q, S.insert, [u.email, u.name, u.passwordHash, u.role]));
}

export type UserChange = Partial<{ email: string; name: string; password_hash: string; role: UserRole; active: boolean }>;

export async function updateUser(q: Queryable, id: number, c: UserChange): Promise<UserRow> {
  const rows = await query<UserRow>(q, S.update, [id, c.email ?? null, c.name ?? null, c.password_hash ?? null, c.role ?? null, c.active ?? null]);
  return rows[0]!;
}

export const deleteUser = (q: Queryable, id: number) => query(q, S.delete, [id]);
export const emailTaken = async (q: Queryable, email: string, exceptId: number) => (await query(q, S.emailTaken, [email, exceptId])).length > 0;
export const countActiveAdmins = async (q: Queryable) => (await query<{ n: number }>(q, S.countActiveAdmins))[0]!.n;
export const anyAdmin = async (q: Queryable) => (await query(q, S.anyAdmin)).length > 0;
export const findFirstAdmin = async (q: Queryable) => first(await query<UserRow>(q, S.firstAdmin));
export const lockAdminGuard = (q: Queryable) => query(q, S.lockAdminGuard);
export const lockBootstrap = (q: Queryable) => query(q, S.lockBootstrap);

export interface UserFilters {
  role?: UserRole;
  active?: boolean;
  q?: string;
  /** ADMINs' q also matches emails. */
  searchEmails: boolean;
}

export async function listUsers(q: Queryable, f: UserFilters, beforeId: number | undefined, limit: number): Promise<UserRow[]> {
  const like = f.q === undefined ? null : `%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return query<UserRow>(q, S.list, [f.role ?? null, f.active ?? null, like, f.searchEmails, beforeId ?? null, limit + 1]);
}
