// The first ADMIN, created at start when none exists: from ADMIN_EMAIL/ADMIN_PASSWORD, or as
// admin@localhost with a random password written to DATA_DIR/initial-admin-password (0600).
// Under a transaction-scoped advisory lock, so two instances starting together create one.
import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Deps } from './deps.js';
import { hashPassword } from './modules/auth/passwords.js';
import { insertUser } from './modules/users/users.repository.js';

const BOOTSTRAP_LOCK = 7_245_003;

export type FirstAdminOutcome =
  | { created: false }
  | { created: true; email: string; passwordFile: string | undefined };

export async function ensureFirstAdmin(deps: Deps): Promise<FirstAdminOutcome> {
  const { db, config, audit } = deps;
  const exists = async () => (await db.query(`SELECT 1 FROM users WHERE role = 'ADMIN' LIMIT 1`)).length > 0;
  if (await exists()) return { created: false };
  const email = config.adminEmail ?? 'admin@localhost';
  const password = config.adminPassword ?? randomBytes(18).toString('base64url');
  const passwordHash = await hashPassword(password);
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_LOCK]);
    if ((await tx.query(`SELECT 1 FROM users WHERE role = 'ADMIN' LIMIT 1`)).length > 0) return { created: false } as const;
    const user = await insertUser(tx, { email, name: 'Administrator', passwordHash, role: 'ADMIN' });
    if (!user) throw new Error(`cannot create the first ADMIN: ${email} already exists as a USER; promote it with SQL or set ADMIN_EMAIL`);
    await audit.record(tx, { actor: undefined, ip: null, userAgent: null, requestId: `bootstrap-${randomUUID()}` }, {
      action: 'CREATE_USER', resourceType: 'USER', resourceId: user.id, actorId: null, metadata: { email, role: 'ADMIN', via: 'first-start' },
    });
    let passwordFile: string | undefined;
    if (config.adminPassword === undefined) {
      // Written before commit: if it cannot be written, no admin exists whose password nobody knows.
      passwordFile = path.join(config.dataDir, 'initial-admin-password');
      mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
      writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
      chmodSync(passwordFile, 0o600);
    }
    return { created: true, email, passwordFile } as const;
  });
}
