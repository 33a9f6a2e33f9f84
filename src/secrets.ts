// Keys the service needs that must never be written in the code: taken from configuration,
// or generated once into DATA_DIR with mode 0600 (and a warning, since several instances
// must share them).
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

const JWT_SECRET_FILE = 'jwt-secret';

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
  const file = path.join(config.dataDir, JWT_SECRET_FILE);
  const jwtSecret = config.jwtSecret ?? (existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined);
  return personalDataKeys(config, jwtSecret);
}

/** Reads DATA_DIR/name, or creates it with `make()` exclusively (two instances never race). */
export function readOrCreateSecretFile(dataDir: string, name: string, make: () => string): { value: string; created: boolean } {
  const file = path.join(dataDir, name);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
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
    const file = path.join(config.dataDir, JWT_SECRET_FILE);
    const { value, created } = readOrCreateSecretFile(config.dataDir, JWT_SECRET_FILE, () => randomBytes(48).toString('base64url'));
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
