// Keys the service needs that must never be written in the code: taken from configuration,
// or generated once into DATA_DIR with mode 0600 (and a warning, since several instances
// must share them).
import { createHmac, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, type Config } from './config.js';

const MIN_JWT_SECRET = 32;

export interface Secrets {
  /** HS256 key for access tokens. */
  jwtKey: Uint8Array;
  /** Key of the keyed hash that audit records use to commit to personal data. */
  personalDataKey: Buffer;
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
    const file = path.join(config.dataDir, 'jwt-secret');
    const { value, created } = readOrCreateSecretFile(config.dataDir, 'jwt-secret', () => randomBytes(48).toString('base64url'));
    // The same floor as for JWT_SECRET: a hand-edited or truncated file must not weaken the tokens.
    if (value.length < MIN_JWT_SECRET) {
      throw new ConfigError(`${file} holds fewer than ${MIN_JWT_SECRET} characters; delete it to have a new one generated, or set JWT_SECRET`);
    }
    jwtSecret = value;
    warn(
      `JWT_SECRET is not set: ${created ? 'generated' : 'using'} ${file}. ` +
        'Set JWT_SECRET to the same value on every instance when you run more than one.',
    );
  }
  const jwtKey = new TextEncoder().encode(jwtSecret);
  const personalDataKey = createHmac('sha256', jwtKey).update('teamlog audit personal data v1').digest();
  return { jwtKey, personalDataKey };
}
