// The first ADMIN, created at start when none exists: from ADMIN_EMAIL/ADMIN_PASSWORD, or as
// admin@localhost with a random password written to initial-admin-password (0600) in the
// database's secrets directory: DATA_DIR for the embedded database, a directory of its own for
// a DATABASE_URL deployment (secrets.ts, secretsDir), so that trying PostgreSQL in a checkout
// never overwrites the password of the embedded database's ADMIN.
// It is the same use case as `teamlog create-admin` (users.createAdmin): a CREATE_USER record
// with a null actor and a null address.
import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { systemContext } from './context.js';
import type { Deps } from './deps.js';
import { hashPassword } from './modules/auth/auth.passwords.js';
import { anyAdmin } from './modules/users/users.repository.js';
import { secretsDir } from './secrets.js';
import { createServices } from './services.js';

export const INITIAL_PASSWORD_FILE = 'initial-admin-password';

export type FirstAdminOutcome =
  | { created: false }
  | { created: true; email: string; passwordFile: string | undefined };

/** A password for an ADMIN nobody chose one for: 144 random bits, URL-safe. */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}

export async function ensureFirstAdmin(deps: Deps): Promise<FirstAdminOutcome> {
  const { db, config } = deps;
  if (await anyAdmin(db)) return { created: false };
  const email = config.adminEmail ?? 'admin@localhost';
  const password = config.adminPassword ?? generatePassword();
  const passwordHash = await hashPassword(password, config.passwordHashCost);
  let passwordFile: string | undefined;
  // Written before commit: if it cannot be written, no admin exists whose password nobody knows.
  const writePasswordFile = () => {
    if (config.adminPassword !== undefined) return;
    const dir = secretsDir(config);
    passwordFile = path.join(dir, INITIAL_PASSWORD_FILE);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
    // The mode option only applies when the file is new; an old file keeps its own.
    chmodSync(passwordFile, 0o600);
  };
  const user = await createServices(deps).users.createAdmin(
    systemContext(`bootstrap-${randomUUID()}`),
    { email, name: 'Administrator', passwordHash, via: 'first-start' },
    { onlyIfNoAdmin: true, beforeCommit: writePasswordFile },
  );
  if (user) return { created: true, email, passwordFile };
  // Another instance made the first ADMIN meanwhile, or the email belongs to a USER.
  if (await anyAdmin(db)) return { created: false };
  throw new Error(`cannot create the first ADMIN: ${email} already exists as a USER; promote it with SQL or set ADMIN_EMAIL`);
}
