// C2SP signed notes (c2sp.org/signed-note) and tlog checkpoints (c2sp.org/tlog-checkpoint)
// with Ed25519, byte for byte what Go's golang.org/x/mod/sumdb/note produces and accepts, so
// that anyone can check the audit log's checkpoints with off-the-shelf note verifiers.
// Parsing is strict: a note is either exactly well formed or refused, never repaired.
//
// The Node side: the notes' text (layout, names, checkpoints, verifier keys) is read and
// written by note-format.ts, which the audit console bundles too; this file adds node:crypto's
// SHA-256 and Ed25519, keys as KeyObjects, and Buffers for the server's callers.
import {
  createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject,
} from 'node:crypto';
import { equalBytes } from './bytes.js';
import {
  ED25519, ED25519_KEY_BYTES, ED25519_SIGNATURE_BYTES, MAX_SIGNATURES, NoteError, formatSignatureLine, keyHashInput, keyId, looksSigned,
  parseCheckpoint as parseCheckpointText, parseVerifierKeyText, requireEd25519Key, requireKeyHash, requireName, signedMessage, splitNote,
  formatVerifierKey as formatVerifierKeyText, type CheckpointBody,
} from './note-format.js';

export { NoteError, formatCheckpoint, type NoteErrorCode } from './note-format.js';

export interface NoteVerifier { name: string; keyHash: Buffer; publicKey: KeyObject }
export interface NoteSigner { name: string; keyHash: Buffer; privateKey: KeyObject; publicKeyRaw: Buffer }
export interface OpenedNote {
  text: string;
  signatures: Array<{ name: string; keyHash: Buffer; signature: Buffer; verifiedBy?: NoteVerifier }>;
}
export type Checkpoint = CheckpointBody<Buffer>;

/** A Buffer over the same bytes, no copy. */
const view = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

// ---------------------------------------------------------------------------------------
// Keys

export function ed25519PublicKeyRaw(key: KeyObject): Buffer {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  if (pub.type !== 'public' || pub.asymmetricKeyType !== 'ed25519') {
    throw new NoteError(`expected an Ed25519 key, got ${pub.asymmetricKeyType ?? pub.type}`, 'invalid-key');
  }
  const { x } = pub.export({ format: 'jwk' });
  const raw = Buffer.from(x ?? '', 'base64url');
  if (raw.length !== 32) throw new NoteError('Ed25519 public key is not 32 bytes', 'invalid-key');
  return raw;
}

export function ed25519PublicKeyFromRaw(raw: Buffer): KeyObject {
  if (raw.length !== 32) throw new NoteError(`an Ed25519 public key is 32 bytes, not ${raw.length}`, 'invalid-key');
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
}

/** SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key)[:4], the key ID signed-note recommends. */
export function keyHash(name: string, publicKeyRaw: Buffer): Buffer {
  return createHash('sha256').update(keyHashInput(name, ED25519, publicKeyRaw)).digest().subarray(0, 4);
}

export function noteSigner(name: string, privateKey: KeyObject): NoteSigner {
  requireName(name);
  if (privateKey.type !== 'private') throw new NoteError('a note signer needs a private key', 'invalid-key');
  const publicKeyRaw = ed25519PublicKeyRaw(privateKey);
  return { name, keyHash: keyHash(name, publicKeyRaw), privateKey, publicKeyRaw };
}

export function noteVerifier(name: string, publicKey: KeyObject): NoteVerifier {
  requireName(name);
  const raw = ed25519PublicKeyRaw(publicKey);
  // Never keep a private key in something meant to be handed around.
  const pub = publicKey.type === 'public' ? publicKey : ed25519PublicKeyFromRaw(raw);
  return { name, keyHash: keyHash(name, raw), publicKey: pub };
}

/** `<name>+<hex key hash>+<base64(0x01 ‖ public key)>`, the form Go's note.NewVerifier reads. */
export function formatVerifierKey(name: string, publicKeyRaw: Buffer): string {
  requireName(name);
  if (publicKeyRaw.length !== ED25519_KEY_BYTES) throw new NoteError('an Ed25519 public key is 32 bytes', 'invalid-key');
  return formatVerifierKeyText(name, keyHash(name, publicKeyRaw), ED25519, publicKeyRaw);
}

export function parseVerifierKey(vkey: string): NoteVerifier {
  const key = parseVerifierKeyText(vkey);
  requireEd25519Key(key);
  const raw = view(key.publicKey);
  const computed = keyHash(key.name, raw);
  requireKeyHash(key, computed);
  return { name: key.name, keyHash: computed, publicKey: ed25519PublicKeyFromRaw(raw) };
}

// ---------------------------------------------------------------------------------------
// Notes

function signatureLine(text: string, signer: NoteSigner): string {
  requireName(signer.name);
  if (signer.keyHash.length !== 4) throw new NoteError('a key hash is 4 bytes', 'invalid-key');
  return formatSignatureLine(signer.name, signer.keyHash, signText(text, signer));
}

/** Raw signature bytes (64) of text by signer, for the API's JSON `signature` field. */
export function signText(text: string, signer: NoteSigner): Buffer {
  return sign(null, signedMessage(text), signer.privateKey);
}

/**
 * The note's text plus one signature line by signer; returns the whole signed note.
 * Appends to an already signed note's signatures if given one: input whose part after its
 * last blank line is all lines starting "— " is read as a signed note (and must be a
 * well-formed one); its signatures are kept, except one by the same key, which is replaced
 * (as Go's note.Sign does). Existing signatures are not verified here.
 */
export function signNote(text: string, signer: NoteSigner): string {
  if (!looksSigned(text)) return `${text}\n${signatureLine(text, signer)}`;

  const note = splitNote(text);
  const kept = note.lines.filter((s) => !(s.name === signer.name && equalBytes(s.keyHash, signer.keyHash)));
  if (kept.length + 1 > MAX_SIGNATURES) throw new NoteError(`a note holds at most ${MAX_SIGNATURES} signatures`);
  return `${note.text}\n${kept.map((s) => `${s.line}\n`).join('')}${signatureLine(note.text, signer)}`;
}

/**
 * Parses a signed note and checks every signature whose (name, key hash) matches a verifier;
 * throws NoteError on a malformed note. A matching signature that does not verify is an
 * error (code 'invalid-signature'), as in Go's note.Open; signatures from unknown keys are
 * returned without verifiedBy, as the spec says to ignore them.
 *
 * It does NOT throw when no signature verified (Go's Open does): the spec says such a note
 * MUST be rejected, so a caller must check that a signature by a key it trusts has verifiedBy.
 *
 * Bytes are accepted too, so that invalid UTF-8 is refused instead of decoded to U+FFFD.
 * Identical signature lines count once. Two verifiers with the same name and key hash but
 * different keys are an error (code 'ambiguous-key') if a signature needs one of them.
 */
export function openNote(note: string | Uint8Array, verifiers: NoteVerifier[]): OpenedNote {
  let str: string;
  if (typeof note === 'string') {
    str = note;
  } else {
    try {
      str = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(note);
    } catch {
      throw new NoteError('malformed note: not valid UTF-8');
    }
  }
  const { text, lines } = splitNote(str);

  const known = new Map<string, { raw: Buffer; verifier: NoteVerifier }[]>();
  for (const v of verifiers) {
    const id = keyId(v.name, v.keyHash);
    const raw = ed25519PublicKeyRaw(v.publicKey);
    const same = known.get(id) ?? [];
    if (!same.some((s) => s.raw.equals(raw))) same.push({ raw, verifier: v });
    known.set(id, same);
  }

  const message = signedMessage(text);
  const seen = new Set<string>();
  const signatures: OpenedNote['signatures'] = [];
  for (const s of lines) {
    if (seen.has(s.line)) continue;
    seen.add(s.line);
    const id = keyId(s.name, s.keyHash);
    const matches = known.get(id) ?? [];
    if (matches.length > 1) throw new NoteError(`ambiguous key ${id}`, 'ambiguous-key');
    const verifier = matches[0]?.verifier;
    if (verifier && !(s.signature.length === ED25519_SIGNATURE_BYTES && verify(null, message, verifier.publicKey, s.signature))) {
      throw new NoteError(`invalid signature for key ${id}`, 'invalid-signature');
    }
    const entry = { name: s.name, keyHash: Buffer.from(s.keyHash), signature: Buffer.from(s.signature) };
    signatures.push(verifier ? { ...entry, verifiedBy: verifier } : entry);
  }
  return { text, signatures };
}

// ---------------------------------------------------------------------------------------
// Checkpoints

/**
 * Reads a checkpoint's note text (note-format.ts), its root hash as a Buffer. Tree sizes above
 * 2^53 - 1 are refused rather than rounded, since treeSize is a number.
 */
export function parseCheckpoint(text: string): Checkpoint {
  const c = parseCheckpointText(text);
  return { ...c, rootHash: view(c.rootHash) };
}

// ---------------------------------------------------------------------------------------
// Key files

/** Reads an unencrypted PKCS#8 PEM ("BEGIN PRIVATE KEY") and refuses anything but Ed25519. */
export function loadEd25519PrivateKey(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new NoteError(`cannot read the private key (expected an unencrypted PKCS#8 PEM Ed25519 key): ${reason}`, 'invalid-key');
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new NoteError(`expected an Ed25519 private key, got ${key.asymmetricKeyType ?? 'an unknown key type'}`, 'invalid-key');
  }
  return key;
}

export function generateEd25519PrivateKeyPem(): string {
  return generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}

/** SPKI PEM of a public key, or of a private key's public half. */
export function publicKeyPem(key: KeyObject): string {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  if (pub.type !== 'public') throw new NoteError('a secret key has no public key', 'invalid-key');
  return pub.export({ type: 'spki', format: 'pem' }).toString();
}
