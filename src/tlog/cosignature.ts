// Witness cosignatures, C2SP tlog-cosignature (https://c2sp.org/tlog-cosignature) `cosignature/v1`
// with Ed25519: a note signature line on a checkpoint, whose bytes are
// key ID ‖ u64 big-endian timestamp ‖ Ed25519 signature over
// "cosignature/v1\ntime <timestamp>\n" ‖ the checkpoint's note text.
//
// A cosignature line rides in the same note as the log's own signature line. signed-note.ts's
// openNote already hands it back as a signature by an unknown key (its key ID is computed with
// type 0x04, never the log's 0x01), so that it can be checked here against the witness keys a
// policy names. The key type is a parameter throughout, so that ML-DSA-44 (type 0x06, a
// different signed message) can be added beside Ed25519 without changing the callers.
import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { concatBytes, equalBytes, utf8Bytes } from './bytes.js';
import {
  NoteError, formatSignatureLine, keyHashInput, keyId, parseCheckpoint, parseVerifierKeyText, requireKeyHash, requireName, signedMessage,
  formatVerifierKey as formatVerifierKeyText,
} from './note-format.js';
import { ed25519PublicKeyFromRaw, ed25519PublicKeyRaw } from './signed-note.js';

/** The signed-note signature type of Ed25519 `cosignature/v1` (C2SP signed-note, "Signature types"). */
export const COSIGNATURE_ED25519 = 0x04;
/** The type ML-DSA-44 cosignatures will use; refused by name until they are implemented. */
export const COSIGNATURE_ML_DSA_44 = 0x06;
export type CosignatureKeyType = typeof COSIGNATURE_ED25519;

const KEY_TYPES: Record<CosignatureKeyType, { publicKeyBytes: number; signatureBytes: number }> = {
  [COSIGNATURE_ED25519]: { publicKeyBytes: 32, signatureBytes: 64 },
};
const TIMESTAMP_BYTES = 8;
// The spec caps the u64 at 2^63 - 1; timestamps are also JS numbers here, so past 2^53 - 1
// (some 285 million years from now) a cosignature is refused as being from the future.
const MAX_TIMESTAMP = Number.MAX_SAFE_INTEGER;

export interface CosignatureVerifier { name: string; keyType: CosignatureKeyType; keyHash: Buffer; publicKey: KeyObject; publicKeyRaw: Buffer }
export interface Cosigner extends CosignatureVerifier { privateKey: KeyObject }

/** One cosignature line's content, once its key ID is known to be the verifier's. */
export interface Cosignature { name: string; keyHash: Uint8Array; signature: Uint8Array }

export type CosignatureVerdict =
  | { ok: true; timestamp: number }
  | { ok: false; reason: 'other-key' | 'malformed' | 'bad-signature' | 'future-timestamp'; problem: string };

function requireKeyType(keyType: number): asserts keyType is CosignatureKeyType {
  if (keyType === COSIGNATURE_ED25519) return;
  if (keyType === COSIGNATURE_ML_DSA_44) throw new NoteError('ML-DSA-44 cosignatures (type 0x06) are not supported yet', 'invalid-key');
  const hex = keyType.toString(16).padStart(2, '0');
  const hint = keyType === 0x01 ? ': 0x01 is a log\'s note key, a cosigner\'s Ed25519 key is type 0x04' : '';
  throw new NoteError(`unsupported cosignature key type 0x${hex}${hint}`, 'invalid-key');
}

/** SHA-256(name ‖ "\n" ‖ key type ‖ public key)[:4], the key ID tlog-cosignature requires. */
export function cosignatureKeyHash(name: string, publicKeyRaw: Uint8Array, keyType: CosignatureKeyType = COSIGNATURE_ED25519): Buffer {
  return createHash('sha256').update(keyHashInput(name, keyType, publicKeyRaw)).digest().subarray(0, 4);
}

export function cosignatureVerifier(name: string, publicKey: KeyObject, keyType: CosignatureKeyType = COSIGNATURE_ED25519): CosignatureVerifier {
  requireName(name);
  requireKeyType(keyType);
  const publicKeyRaw = ed25519PublicKeyRaw(publicKey);
  // Never keep a private key in something meant to be handed around.
  const pub = publicKey.type === 'public' ? publicKey : createPublicKey(publicKey);
  return { name, keyType, keyHash: cosignatureKeyHash(name, publicKeyRaw, keyType), publicKey: pub, publicKeyRaw };
}

export function cosigner(name: string, privateKey: KeyObject, keyType: CosignatureKeyType = COSIGNATURE_ED25519): Cosigner {
  if (privateKey.type !== 'private') throw new NoteError('a cosigner needs a private key', 'invalid-key');
  return { ...cosignatureVerifier(name, privateKey, keyType), privateKey };
}

/** `<name>+<hex key ID>+<base64(0x04 ‖ public key)>`: the witness's vkey, as a tlog-policy `witness` line holds it. */
export function formatCosignatureVerifierKey(v: Pick<CosignatureVerifier, 'name' | 'keyType' | 'publicKeyRaw'>): string {
  requireKeyType(v.keyType);
  return formatVerifierKeyText(v.name, cosignatureKeyHash(v.name, v.publicKeyRaw, v.keyType), v.keyType, v.publicKeyRaw);
}

/**
 * Reads a cosigner's vkey and checks its key ID against its name and key. A log's note key
 * (type 0x01) is refused: the same Ed25519 key cosigns under another key ID, and a vkey that
 * says 0x01 is most likely a log's key put in a witness's place.
 */
export function parseCosignatureVerifierKey(vkey: string): CosignatureVerifier {
  const key = parseVerifierKeyText(vkey);
  requireKeyType(key.keyType);
  const { publicKeyBytes } = KEY_TYPES[key.keyType];
  if (key.publicKey.length !== publicKeyBytes) throw new NoteError(`malformed verifier key: the public key is not ${publicKeyBytes} bytes`, 'invalid-key');
  const keyHash = cosignatureKeyHash(key.name, key.publicKey, key.keyType);
  requireKeyHash(key, keyHash);
  const publicKeyRaw = Buffer.from(key.publicKey);
  return { name: key.name, keyType: key.keyType, keyHash, publicKey: ed25519PublicKeyFromRaw(publicKeyRaw), publicKeyRaw };
}

function requireTimestamp(timestamp: number): void {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new NoteError('a cosignature timestamp is a whole number of seconds, 0 to 2^53 - 1');
}

/**
 * "cosignature/v1\ntime <seconds>\n" ‖ the checkpoint's note text (with its final newline, without
 * signature lines): the bytes an Ed25519 cosignature signs. The text must read as a checkpoint.
 */
export function cosignatureMessage(checkpointText: string, timestamp: number): Uint8Array<ArrayBuffer> {
  requireTimestamp(timestamp);
  const text = signedMessage(checkpointText);
  parseCheckpoint(checkpointText);
  return concatBytes(utf8Bytes(`cosignature/v1\ntime ${timestamp}\n`), text);
}

/** u64 big-endian timestamp ‖ signature: what follows the key ID in a cosignature line. */
function timestampedSignature(timestamp: number, signature: Uint8Array): Uint8Array<ArrayBuffer> {
  const stamp = new Uint8Array(TIMESTAMP_BYTES);
  new DataView(stamp.buffer).setBigUint64(0, BigInt(timestamp));
  return concatBytes(stamp, signature);
}

/**
 * The cosignature line (with its newline) by which `by` states that, at `timestamp` (seconds since
 * the epoch), the checkpoint is the largest consistent one it has seen. Append it to the
 * checkpoint's signed note, after the log's signature line.
 */
export function cosignCheckpoint(checkpointText: string, by: Cosigner, timestamp: number): string {
  const signature = sign(null, cosignatureMessage(checkpointText, timestamp), by.privateKey);
  return formatSignatureLine(by.name, by.keyHash, timestampedSignature(timestamp, signature));
}

/**
 * The timestamp a cosignature's bytes (after the key ID) carry, unverified: for showing when a
 * witness says it cosigned; undefined when the bytes are not a timestamp and a signature of the
 * key type's length, or the timestamp is past 2^53 - 1.
 */
export function cosignatureTimestamp(signature: Uint8Array, keyType: CosignatureKeyType = COSIGNATURE_ED25519): number | undefined {
  if (signature.length !== TIMESTAMP_BYTES + KEY_TYPES[keyType].signatureBytes) return undefined;
  const stamp = new DataView(signature.buffer, signature.byteOffset, TIMESTAMP_BYTES).getBigUint64(0);
  return stamp > BigInt(MAX_TIMESTAMP) ? undefined : Number(stamp);
}

/**
 * Checks one signature line of a checkpoint's note as a cosignature by `verifier`: its name and
 * key ID are the verifier's ('other-key' otherwise: not this cosigner's line, to be ignored), its
 * length is the key type's, its signature verifies over the timestamped message; and, if
 * `notAfter` is given (seconds), its timestamp is not later. Answers the timestamp.
 */
export function verifyCosignature(checkpointText: string, line: Cosignature, verifier: CosignatureVerifier, notAfter?: number): CosignatureVerdict {
  const id = keyId(verifier.name, verifier.keyHash);
  if (line.name !== verifier.name || !equalBytes(line.keyHash, verifier.keyHash)) {
    return { ok: false, reason: 'other-key', problem: `the signature is not by ${id}` };
  }
  const { signatureBytes } = KEY_TYPES[verifier.keyType];
  if (line.signature.length !== TIMESTAMP_BYTES + signatureBytes) {
    return { ok: false, reason: 'malformed', problem: `the cosignature by ${id} is ${line.signature.length} bytes, not a timestamp and a signature` };
  }
  const timestamp = cosignatureTimestamp(line.signature, verifier.keyType);
  if (timestamp === undefined) return { ok: false, reason: 'future-timestamp', problem: `the cosignature by ${id} is dated past 2^53 - 1 seconds` };
  let message: Uint8Array;
  try {
    message = cosignatureMessage(checkpointText, timestamp);
  } catch (err) {
    if (err instanceof NoteError) return { ok: false, reason: 'malformed', problem: err.message };
    throw err;
  }
  if (!verify(null, message, verifier.publicKey, line.signature.subarray(TIMESTAMP_BYTES))) {
    return { ok: false, reason: 'bad-signature', problem: `the cosignature by ${id} does not verify` };
  }
  if (notAfter !== undefined && timestamp > notAfter) {
    return { ok: false, reason: 'future-timestamp', problem: `the cosignature by ${id} is dated ${timestamp}, after ${notAfter}` };
  }
  return { ok: true, timestamp };
}

export interface CosignatureCheck {
  verifier: CosignatureVerifier;
  /** The newest timestamp among this cosigner's valid cosignatures; absent when none verified. */
  timestamp?: number;
  /** Why each of this cosigner's lines that failed did so. */
  problems: string[];
}

/**
 * For each verifier, its cosignatures among a note's signature lines (openNote's `signatures`, or
 * splitNote's `lines`): lines by other keys are ignored, as signed-note says. A cosigner may have
 * signed the checkpoint more than once (at different times); any valid line counts.
 */
export function checkCosignatures(checkpointText: string, lines: readonly Cosignature[], verifiers: readonly CosignatureVerifier[], notAfter?: number): CosignatureCheck[] {
  return verifiers.map((verifier) => {
    const check: CosignatureCheck = { verifier, problems: [] };
    for (const line of lines) {
      const verdict = verifyCosignature(checkpointText, line, verifier, notAfter);
      if (verdict.ok) check.timestamp = Math.max(check.timestamp ?? 0, verdict.timestamp);
      else if (verdict.reason !== 'other-key') check.problems.push(verdict.problem);
    }
    return check;
  });
}

/** The PKCS#8 DER prefix of an Ed25519 private key: what precedes its 32-byte seed (RFC 8410). */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/**
 * A cosigner's private key as one line of text, in the form Go's note package gives signer keys:
 * `PRIVATE+KEY+<name>+<hex key ID>+<base64(key type ‖ 32-byte Ed25519 seed)>`. It carries the
 * witness's name with the key, so that `teamlog witness serve` needs nothing else to cosign.
 */
export function formatCosignerKey(c: Cosigner): string {
  requireKeyType(c.keyType);
  const seed = c.privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(ED25519_PKCS8_PREFIX.length);
  return `PRIVATE+KEY+${c.name}+${Buffer.from(c.keyHash).toString('hex')}+${Buffer.concat([Buffer.from([c.keyType]), seed]).toString('base64')}`;
}

/** Reads a line formatCosignerKey wrote, checking its key ID against its name and key. */
export function parseCosignerKey(text: string): Cosigner {
  // The base64 key may hold "+" itself: the first four "+" separate the fields, as Go's note package reads it.
  const m = /^PRIVATE\+KEY\+([^+]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+=*)$/.exec(text.trim());
  if (!m) throw new NoteError('malformed witness key: expected PRIVATE+KEY+<name>+<hex key ID>+<base64 key>', 'invalid-key');
  const [, name = '', hex = '', encoded = ''] = m;
  requireName(name);
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.toString('base64') !== encoded || bytes.length !== 33) throw new NoteError('malformed witness key: the key is not base64 of a type byte and a 32-byte seed', 'invalid-key');
  requireKeyType(bytes[0]!);
  const signer = cosigner(name, createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, bytes.subarray(1)]), format: 'der', type: 'pkcs8' }), bytes[0]);
  if (Buffer.from(signer.keyHash).toString('hex') !== hex) throw new NoteError('malformed witness key: its key ID is not its name\'s and key\'s', 'invalid-key');
  return signer;
}
