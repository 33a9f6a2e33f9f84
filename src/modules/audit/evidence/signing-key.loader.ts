// The checkpoint signing key: AUDIT_SIGNING_KEY (Ed25519, PKCS#8 PEM) with AUDIT_SIGNING_KEY_ID,
// or generated once into the deployment's secrets directory (secrets.ts, secretsDir; mode 0600).
// It is never written to the database: whoever can rewrite the database must not be able to
// re-sign it (docs/audit-integrity.md).
import type { KeyObject } from 'node:crypto';
import path from 'node:path';
import { ConfigError, type Config } from '../../../config.js';
import { readOrCreateSecretFile, secretsDir } from '../../../secrets.js';
import { ed25519PublicKeyRaw, generateEd25519PrivateKeyPem, loadEd25519PrivateKey, publicKeyPem } from '../../../tlog/signed-note.js';

export const SIGNING_KEY_FILE = 'audit-signing-key.pem';

export interface SigningKey {
  keyId: string;
  privateKey: KeyObject;
  publicKeyRaw: Buffer;
  publicKeyPem: string;
}

/** The default key id: the first 8 bytes of the public key, in hex (stable for one key). */
const defaultKeyId = (raw: Buffer) => `ed25519-${raw.subarray(0, 8).toString('hex')}`;

export function loadSigningKey(config: Config, warn: (msg: string) => void): SigningKey {
  let pem = config.auditSigningKey;
  const keyFile = path.join(secretsDir(config), SIGNING_KEY_FILE);
  if (!pem) {
    const file = readOrCreateSecretFile(secretsDir(config), SIGNING_KEY_FILE, generateEd25519PrivateKeyPem);
    const created = file.created;
    pem = file.value;
    warn(
      `AUDIT_SIGNING_KEY is not set: ${created ? 'generated' : 'using'} ${keyFile}. ` +
        'Set AUDIT_SIGNING_KEY (and AUDIT_SIGNING_KEY_ID) to the same key on every instance when you run more than one.',
    );
  }
  let privateKey: KeyObject;
  try {
    privateKey = loadEd25519PrivateKey(pem);
  } catch (err) {
    throw new ConfigError(`${config.auditSigningKey ? 'AUDIT_SIGNING_KEY' : keyFile}: ${(err as Error).message}`);
  }
  const publicKeyRaw = ed25519PublicKeyRaw(privateKey);
  return { keyId: config.auditSigningKeyId ?? defaultKeyId(publicKeyRaw), privateKey, publicKeyRaw, publicKeyPem: publicKeyPem(privateKey) };
}
