// ADMINs created outside the API: the first one, at start, when none exists (from
// ADMIN_EMAIL/ADMIN_PASSWORD, or as admin@localhost with a random password written to
// DATA_DIR/initial-admin-password, 0600), and any made by `teamlog create-admin`. Both write
// the same CREATE_USER record with a null actor and a null address.
import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Queryable, Tx } from './db/database.js';
import type { Deps } from './deps.js';
import type { AuditWriter } from './modules/audit/audit.writer.js';
import { hashPassword } from './modules/auth/passwords.js';
import { insertUser, type UserRow } from './modules/users/users.repository.js';

const BOOTSTRAP_LOCK = 7_245_003;

export const INITIAL_PASSWORD_FILE = 'initial-admin-password';

export type FirstAdminOutcome =
  | { created: false }
  | { created: true; email: string; passwordFile: string | undefined };

/** A password for an ADMIN nobody chose one for: 144 random bits, URL-safe. */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}

/**
 * Inserts an ADMIN and its CREATE_USER record (actor and address null: no user acted) in the
 * caller's transaction. Undefined when the email is taken; nothing is written then.
 */
export async function insertAdmin(
  tx: Tx,
  audit: AuditWriter,
  admin: { email: string; name: string; passwordHash: string },
  origin: { requestId: string; via: 'first-start' | 'cli' },
): Promise<UserRow | undefined> {
  const user = await insertUser(tx, { ...admin, role: 'ADMIN' });
  if (!user) return undefined;
  audit.record(tx, { actor: undefined, ip: null, userAgent: null, requestId: origin.requestId }, {
    action: 'CREATE_USER', resourceType: 'USER', resourceId: user.id, actorId: null,
    metadata: { email: user.email, role: 'ADMIN', via: origin.via },
  });
  return user;
}

export async function ensureFirstAdmin(deps: Deps): Promise<FirstAdminOutcome> {
  const { db, config, audit } = deps;
  const adminExists = async (q: Queryable) => (await q.query(`SELECT 1 FROM users WHERE role = 'ADMIN' LIMIT 1`)).length > 0;
  if (await adminExists(db)) return { created: false };
  const email = config.adminEmail ?? 'admin@localhost';
  const password = config.adminPassword ?? generatePassword();
  const passwordHash = await hashPassword(password);
  return db.transaction(async (tx) => {
    // Instances starting together queue here; the second one then sees the first one's ADMIN.
    await tx.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_LOCK]);
    if (await adminExists(tx)) return { created: false } as const;
    const user = await insertAdmin(tx, audit, { email, name: 'Administrator', passwordHash }, { requestId: `bootstrap-${randomUUID()}`, via: 'first-start' });
    if (!user) throw new Error(`cannot create the first ADMIN: ${email} already exists as a USER; promote it with SQL or set ADMIN_EMAIL`);
    let passwordFile: string | undefined;
    if (config.adminPassword === undefined) {
      // Written before commit: if it cannot be written, no admin exists whose password nobody knows.
      passwordFile = path.join(config.dataDir, INITIAL_PASSWORD_FILE);
      mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
      writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
      // The mode option only applies when the file is new; an old file keeps its own.
      chmodSync(passwordFile, 0o600);
    }
    return { created: true, email, passwordFile } as const;
  });
}
