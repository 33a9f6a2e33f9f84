// Keys the service needs that must never be written in the code: taken from configuration,
// or generated once into the deployment's secrets directory with mode 0600 (and a warning,
// since several instances must share them). That directory is DATA_DIR for the embedded
// database, and a directory of its own, named for the database, for a DATABASE_URL deployment:
// the two never read or overwrite each other's keys and passwords (secretsDir).
import { createHmac, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, MIN_SECRET, type Config } from './config.js';

export interface Secrets {
  /** HS256 key for access tokens. */
  jwtKey: Uint8Array;
  /** Key of the keyed hash that audit records use to commit to personal data (the refs written now). */
  personalDataKey: Buffer;
  /** Every key refs may have been written with, personalDataKey first: what verification checks stored values with. */
  personalDataKeys: Buffer[];
}

export const JWT_SECRET_FILE = 'jwt-secret';

/**
 * Where the generated secrets of the configured database live: DATA_DIR itself for the embedded
 * one, DATA_DIR/postgres/<host>-<port>-<database> for DATABASE_URL. A checkout that serves both
 * (the embedded database, then `DATABASE_URL=… npm start` to try PostgreSQL) keeps two sets,
 * and `DATABASE_URL=… teamlog audit verify` finds that deployment's, or none: never the
 * embedded database's, which would make its personal values look changed.
 */
export function secretsDir(config: Pick<Config, 'dataDir' | 'databaseUrl'>): string {
  if (!config.databaseUrl) return config.dataDir;
  const url = new URL(config.databaseUrl);
  // libpq's defaults: a socket directory in ?host=, port 5432, the database named as the user.
  const host = url.hostname || url.searchParams.get('host') || 'localhost';
  const database = decodeURIComponent(url.pathname.slice(1)) || decodeURIComponent(url.username) || 'postgres';
  const name = `${host}-${url.port || '5432'}-${database}`.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^\.+/, '_');
  return path.join(config.dataDir, 'postgres', name);
}

/**
 * Secret files in DATA_DIR itself (the embedded database's) that a DATABASE_URL deployment does
 * not read, where its own directory has none: a deployment started before its secrets had a
 * directory of their own used these, and would now get new ones. Empty in embedded mode.
 */
export function embeddedSecretsBeside(config: Pick<Config, 'dataDir' | 'databaseUrl'>, names: string[]): string[] {
  const own = secretsDir(config);
  if (own === config.dataDir) return [];
  return names.filter((name) => existsSync(path.join(config.dataDir, name)) && !existsSync(path.join(own, name))).map((name) => path.join(config.dataDir, name));
}

/** The key a secret gives refs (the same derivation since refs were first written). */
const personalDataKeyOf = (secret: string): Buffer => createHmac('sha256', secret).update('teamlog audit personal data v1').digest();

/**
 * The personal-data keys, current first: AUDIT_PERSONAL_DATA_SECRET's, else the JWT secret's;
 * with AUDIT_PERSONAL_DATA_SECRET set the JWT secret's too (it keyed every ref written before);
 * and those of AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS. Accepting several keys weakens nothing:
 * to pass a changed value off as the one a ref commits to, one needs an HMAC preimage under
 * some key, not the key.
 */
export function personalDataKeys(config: Config, jwtSecret: string | undefined): Buffer[] {
  const secrets = [config.auditPersonalDataSecret ?? jwtSecret, config.auditPersonalDataSecret !== undefined ? jwtSecret : undefined, ...config.auditPersonalDataPreviousSecrets];
  return [...new Set(secrets.filter((s): s is string => s !== undefined))].map(personalDataKeyOf);
}

/**
 * The personal-data keys as the service would use them, without creating anything: for the
 * CLI's verification, which must not generate a JWT secret that nothing was ever keyed with.
 * Empty when there is no JWT secret and no personal-data secret.
 */
export function personalDataKeysOnDisk(config: Config): Buffer[] {
  const file = path.join(secretsDir(config), JWT_SECRET_FILE);
  const jwtSecret = config.jwtSecret ?? (existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined);
  return personalDataKeys(config, jwtSecret);
}

/** Reads dir/name (dir: secretsDir), or creates it with `make()` exclusively (two instances never race). */
export function readOrCreateSecretFile(dir: string, name: string, make: () => string): { value: string; created: boolean } {
  const file = path.join(dir, name);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    writeFileSync(file, make(), { flag: 'wx', mode: 0o600 });
    return { value: readFileSync(file, 'utf8').trim(), created: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return { value: readFileSync(file, 'utf8').trim(), created: false };
  }
}

export function loadSecrets(config: Config, warn: (msg: string) => void): Secrets {
  let jwtSecret = config.jwtSecret;
  if (!jwtSecret) {
    const dir = secretsDir(config);
    const file = path.join(dir, JWT_SECRET_FILE);
    const { value, created } = readOrCreateSecretFile(dir, JWT_SECRET_FILE, () => randomBytes(48).toString('base64url'));
    // The same floor as for JWT_SECRET: a hand-edited or truncated file must not weaken the tokens.
    if (value.length < MIN_SECRET) {
      throw new ConfigError(`${file} holds fewer than ${MIN_SECRET} characters; delete it to have a new one generated, or set JWT_SECRET`);
    }
    jwtSecret = value;
    warn(
      `JWT_SECRET is not set: ${created ? 'generated' : 'using'} ${file}. ` +
        'Set JWT_SECRET to the same value on every instance when you run more than one.',
    );
  }
  const jwtKey = new TextEncoder().encode(jwtSecret);
  const keys = personalDataKeys(config, jwtSecret);
  return { jwtKey, personalDataKey: keys[0]!, personalDataKeys: keys };
}
