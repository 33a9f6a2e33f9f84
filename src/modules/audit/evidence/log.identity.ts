// Who signs the log's checkpoints, under which name: the origin (AUDIT_LOG_ORIGIN, or
// generated once and kept in the database, so every instance and the CLI agree on it) and
// the signing key (signing-key.loader.ts), whose public half is registered in audit_signing_keys.
import { randomBytes } from 'node:crypto';
import { ConfigError } from '../../../config.js';
import type { Queryable } from '../../../db/database.js';
import { checkCheckpoint } from '../../../tlog/checkpoint-check.js';
import { keyById, latestCheckpoint, registerKey, setOrigin, storedOrigin } from './evidence.repository.js';
import { formatVerifierKey, noteSigner, noteVerifier, parseVerifierKey, type NoteSigner, type NoteVerifier } from '../../../tlog/signed-note.js';
import type { SigningKey } from './signing-key.loader.js';

export interface LogIdentity {
  origin: string;
  keyId: string;
  signer: NoteSigner;
  /** `<origin>+<key hash>+<base64 key>`: what note verifiers and witnesses are given. */
  verifierKey: string;
  /**
   * The keys trusted from outside the database: this one and those that signed before a
   * rotation (AUDIT_PREVIOUS_VERIFIER_KEYS). The sealer chains a new checkpoint only onto one
   * that verifies under these, so a checkpoint an attacker signed with a key of their own is
   * never laundered by being signed over.
   */
  trusted: NoteVerifier[];
}

export async function resolveOrigin(q: Queryable, configured: string | undefined): Promise<string> {
  const stored = await storedOrigin(q);
  if (stored) return configured ?? stored;
  await setOrigin(q, configured ?? `teamlog.local/audit/${randomBytes(8).toString('hex')}`);
  // Another instance may have set it at the same moment: its value won, take it.
  return configured ?? (await storedOrigin(q))!;
}

/**
 * Resolves the origin and registers the key (once); refuses a key the log does not trust
 * (checkSigningKeyContinuity) before registering it, and a key id already naming another key.
 */
export async function establishIdentity(q: Queryable, key: SigningKey, configuredOrigin: string | undefined, previousVerifierKeys: string[] = []): Promise<LogIdentity> {
  const origin = await resolveOrigin(q, configuredOrigin);
  const verifierKey = formatVerifierKey(origin, key.publicKeyRaw);
  let previous: NoteVerifier[];
  try {
    previous = previousVerifierKeys.map(parseVerifierKey);
  } catch (err) {
    throw new ConfigError(`AUDIT_PREVIOUS_VERIFIER_KEYS: ${(err as Error).message}`);
  }
  const identity: LogIdentity = { origin, keyId: key.keyId, signer: noteSigner(origin, key.privateKey), verifierKey, trusted: [noteVerifier(origin, key.privateKey), ...previous] };
  await checkSigningKeyContinuity(q, identity);
  await registerKey(q, key.keyId, key.publicKeyPem, verifierKey);
  const registered = await keyById(q, key.keyId);
  if (registered?.note_verifier_key !== verifierKey) {
    throw new ConfigError(
      registered
        ? `AUDIT_SIGNING_KEY_ID "${key.keyId}" already names another key in audit_signing_keys; give the new key a new id`
        : `this signing key is already registered under another key id; set AUDIT_SIGNING_KEY_ID to that id`,
    );
  }
  return identity;
}

/**
 * Refuses to sign with a key the log does not trust. The newest checkpoint, when it is soundly
 * signed by the key it names, must verify under this instance's key or one of
 * AUDIT_PREVIOUS_VERIFIER_KEYS: an instance started with another key (one generated into its own
 * DATA_DIR, say) would otherwise sign checkpoints that every other instance, and verification,
 * rejects. A rotation is made on purpose by naming the old key in AUDIT_PREVIOUS_VERIFIER_KEYS.
 * A checkpoint whose signature does not hold under its own key is tampering, not a key mix-up:
 * that is for verification to report, and the sealer to refuse.
 */
async function checkSigningKeyContinuity(q: Queryable, identity: LogIdentity): Promise<void> {
  const latest = await latestCheckpoint(q);
  if (!latest) return;
  const claim = { treeSize: latest.tree_size, rootHash: Buffer.from(latest.root_hash) };
  if (checkCheckpoint(latest.note, identity.trusted, claim).ok) return;
  const signer = await keyById(q, latest.key_id);
  const signerVerifier = signer && parsedOrUndefined(signer.note_verifier_key);
  if (!signer || !signerVerifier || !checkCheckpoint(latest.note, [signerVerifier], claim).ok) return;
  throw new ConfigError(
    `AUDIT_SIGNING_KEY: this instance would sign the audit log's checkpoints with key "${identity.keyId}", but the log's newest checkpoint ` +
      `(tree size ${latest.tree_size}) is signed with key "${latest.key_id}", which this instance does not trust. Give every instance the same ` +
      'AUDIT_SIGNING_KEY (and AUDIT_SIGNING_KEY_ID); an instance without one generates a key of its own into DATA_DIR. To rotate to a new key ' +
      `on purpose, start with the new key and AUDIT_PREVIOUS_VERIFIER_KEYS=${signer.note_verifier_key}`,
  );
}

function parsedOrUndefined(verifierKey: string): NoteVerifier | undefined {
  try {
    return parseVerifierKey(verifierKey);
  } catch {
    return undefined;
  }
}
