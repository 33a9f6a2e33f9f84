// SQL for users. Every function takes the Queryable it runs on (a transaction or the database).
import type { Queryable } from '../../db/database.js';
import type { UserRole } from '../../context.js';

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

/**
 * forUpdate locks the row FOR NO KEY UPDATE: enough to serialize changes to the user, while
 * rows that merely reference the user (a task assigned to them) can still be written. A
 * stronger lock would make such a write wait, then fail on its foreign key if the user is
 * deleted meanwhile; the DELETE itself takes the full lock when it runs.
 */
export async function findUserById(q: Queryable, id: number, opts: { forUpdate?: boolean } = {}): Promise<UserRow | undefined> {
  const rows = await q.query<UserRow>(`SELECT ${COLUMNS} FROM users WHERE id = $1${opts.forUpdate ? ' FOR NO KEY UPDATE' : ''}`, [id]);
  return rows[0];
}

export async function findUserByEmail(q: Queryable, email: string): Promise<UserRow | undefined> {
  const rows = await q.query<UserRow>(`SELECT ${COLUMNS} FROM users WHERE email = $1`, [email]);
  return rows[0];
}

export async function insertUser(
  q: Queryable,
  u: { email: string; name: string; passwordHash: string; role: UserRole },
): Promise<UserRow | undefined> {
  // ON CONFLICT keeps a taken email from aborting the transaction; the caller answers 409.
  const rows = await q.query<UserRow>(
    `INSERT INTO users (email, name, password_hash, role) VALUES ($1, $2, $3, $4)
     ON CONFLICT (email) DO NOTHING RETURNING ${COLUMNS}`,
    [u.email, u.name, u.passwordHash, u.role],
  );
  return rows[0];
}

/** Applies a change and bumps the version (the ETag). */
export async function updateUser(
  q: Queryable,
  id: number,
  change: Partial<{ email: string; name: string; password_hash: string; role: UserRole; active: boolean }>,
): Promise<UserRow> {
  const entries = Object.entries(change);
  // Column names come from the typed keys above, never from input.
  const sets = entries.map(([col], i) => `${col} = $${i + 2}`);
  const rows = await q.query<UserRow>(
    `UPDATE users SET ${sets.join(', ')}, version = version + 1, updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
    [id, ...entries.map(([, v]) => v)],
  );
  return rows[0]!;
}

export async function emailTaken(q: Queryable, email: string, exceptId: number): Promise<boolean> {
  const rows = await q.query('SELECT 1 FROM users WHERE email = $1 AND id <> $2', [email, exceptId]);
  return rows.length > 0;
}

export async function countActiveAdmins(q: Queryable): Promise<number> {
  const rows = await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM users WHERE role = 'ADMIN' AND active`);
  return rows[0]!.n;
}

export interface UserFilters {
  role?: UserRole;
  active?: boolean;
  q?: string;
  /** ADMINs' q also matches emails. */
  searchEmails: boolean;
}

export async function listUsers(q: Queryable, f: UserFilters, beforeId: number | undefined, limit: number): Promise<UserRow[]> {
  const like = f.q === undefined ? null : `%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return q.query<UserRow>(
    `SELECT ${COLUMNS} FROM users
     WHERE ($1::text IS NULL OR role = $1)
       AND ($2::boolean IS NULL OR active = $2)
       AND ($3::text IS NULL OR name ILIKE $3 OR ($4 AND email ILIKE $3))
       AND ($5::bigint IS NULL OR id < $5)
     ORDER BY id DESC LIMIT $6`,
    [f.role ?? null, f.active ?? null, like, f.searchEmails, beforeId ?? null, limit + 1],
  );
}
