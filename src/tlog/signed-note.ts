// C2SP signed notes (c2sp.org/signed-note) and tlog checkpoints (c2sp.org/tlog-checkpoint)
// with Ed25519, byte for byte what Go's golang.org/x/mod/sumdb/note produces and accepts, so
// that anyone can check the audit log's checkpoints with off-the-shelf note verifiers.
// Parsing is strict: a note is either exactly well formed or refused, never repaired.
import {
  createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject,
} from 'node:crypto';

export type NoteErrorCode = 'malformed' | 'invalid-signature' | 'ambiguous-key' | 'invalid-key';

export class NoteError extends Error {
  readonly code: NoteErrorCode;
  constructor(message: string, code: NoteErrorCode = 'malformed') {
    super(message);
    this.name = 'NoteError';
    this.code = code;
  }
}

export interface NoteVerifier { name: string; keyHash: Buffer; publicKey: KeyObject }
export interface NoteSigner { name: string; keyHash: Buffer; privateKey: KeyObject; publicKeyRaw: Buffer }
export interface OpenedNote {
  text: string;
  signatures: Array<{ name: string; keyHash: Buffer; signature: Buffer; verifiedBy?: NoteVerifier }>;
}
export interface Checkpoint { origin: string; treeSize: number; rootHash: Buffer; extensions: string[] }

const ED25519 = 0x01; // the signature type byte signed-note assigns to Ed25519
const SIG_PREFIX = '\u2014 '; // em dash, space
// The spec asks verifiers to cap signatures and to accept at least 16; Go stops at 100.
const MAX_SIGNATURES = 100;

// What Go's unicode.IsSpace calls a space (names must not contain one; the ASCII ones
// are control characters, refused anyway), plus '+', which separates a verifier key's parts.
const NAME_FORBIDDEN = /[ \u0085\p{Z}+]/u;
// A lone surrogate has no UTF-8 encoding: Buffer.from would sign U+FFFD in its place.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function hasControl(s: string, allowNewline: boolean): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 && !(allowNewline && c === 0x0a)) return true;
  }
  return false;
}

function isValidName(name: string): boolean {
  return name !== '' && !NAME_FORBIDDEN.test(name) && !hasControl(name, false) && !LONE_SURROGATE.test(name);
}

function requireName(name: string): void {
  if (!isValidName(name)) {
    throw new NoteError(`invalid key name ${JSON.stringify(name)}: it must be non-empty, without spaces or "+"`, 'invalid-key');
  }
}

/** Why s cannot be part of a note, or undefined if it can. */
function noteCharsProblem(s: string): string | undefined {
  if (LONE_SURROGATE.test(s)) return 'not valid UTF-8 (lone surrogate)';
  if (hasControl(s, true)) return 'control character other than newline';
  return undefined;
}

function requireNoteText(text: string): void {
  const problem = noteCharsProblem(text) ?? (text.endsWith('\n') ? undefined : 'text must end with a newline');
  if (problem) throw new NoteError(`malformed note: ${problem}`);
}

// Buffer.from(s, 'base64') skips junk and tolerates missing padding; a signature or a
// root hash that only decodes leniently is refused, as is any non-canonical spelling.
function decodeBase64Strict(s: string): Buffer | undefined {
  if (!BASE64.test(s)) return undefined;
  const bytes = Buffer.from(s, 'base64');
  return bytes.toString('base64') === s ? bytes : undefined;
}

function hex(keyHash: Buffer): string {
  return keyHash.toString('hex');
}

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
  return createHash('sha256')
    .update(name, 'utf8').update('\n').update(Buffer.of(ED25519)).update(publicKeyRaw)
    .digest().subarray(0, 4);
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
  if (publicKeyRaw.length !== 32) throw new NoteError('an Ed25519 public key is 32 bytes', 'invalid-key');
  const encoded = Buffer.concat([Buffer.of(ED25519), publicKeyRaw]).toString('base64');
  return `${name}+${hex(keyHash(name, publicKeyRaw))}+${encoded}`;
}

export function parseVerifierKey(vkey: string): NoteVerifier {
  // The name and the hash hold no '+'; the base64 key may.
  const [, name = '', hash = '', encoded = ''] = /^([^+]*)\+([^+]*)\+(.*)$/s.exec(vkey) ?? [];
  const key = decodeBase64Strict(encoded);
  if (!key || key.length === 0 || !isValidName(name) || !/^[0-9a-f]{8}$/.test(hash)) {
    throw new NoteError('malformed verifier key', 'invalid-key');
  }
  if (key[0] !== ED25519) {
    throw new NoteError(`unsupported verifier key type 0x${key[0]!.toString(16).padStart(2, '0')} (only Ed25519, 0x01)`, 'invalid-key');
  }
  const raw = key.subarray(1);
  if (raw.length !== 32) throw new NoteError('malformed verifier key: Ed25519 key is not 32 bytes', 'invalid-key');
  const computed = keyHash(name, raw);
  if (hex(computed) !== hash) throw new NoteError('verifier key hash does not match its name and key', 'invalid-key');
  return { name, keyHash: computed, publicKey: ed25519PublicKeyFromRaw(raw) };
}

// ---------------------------------------------------------------------------------------
// Notes

interface SignatureLine { line: string; name: string; keyHash: Buffer; signature: Buffer }

function parseSignatureLine(line: string): SignatureLine {
  if (!line.startsWith(SIG_PREFIX)) throw new NoteError('malformed note: signature line must start with an em dash and a space');
  const rest = line.slice(SIG_PREFIX.length);
  const space = rest.indexOf(' ');
  const name = space < 0 ? '' : rest.slice(0, space);
  const bytes = space < 0 ? undefined : decodeBase64Strict(rest.slice(space + 1));
  if (!isValidName(name) || !bytes || bytes.length < 5) throw new NoteError('malformed note: bad signature line');
  return { line, name, keyHash: bytes.subarray(0, 4), signature: bytes.subarray(4) };
}

function splitNote(note: string): { text: string; lines: SignatureLine[] } {
  const problem = noteCharsProblem(note);
  if (problem) throw new NoteError(`malformed note: ${problem}`);
  // The text may hold blank lines; the signatures start after the last one.
  const split = note.lastIndexOf('\n\n');
  if (split < 0) throw new NoteError('malformed note: no blank line before the signatures');
  const block = note.slice(split + 2);
  if (block === '' || !block.endsWith('\n')) throw new NoteError('malformed note: signatures must end with a newline');
  const raw = block.slice(0, -1).split('\n');
  if (raw.length > MAX_SIGNATURES) throw new NoteError(`malformed note: more than ${MAX_SIGNATURES} signatures`);
  return { text: note.slice(0, split + 1), lines: raw.map(parseSignatureLine) };
}

function signatureLine(text: string, signer: NoteSigner): string {
  requireName(signer.name);
  if (signer.keyHash.length !== 4) throw new NoteError('a key hash is 4 bytes', 'invalid-key');
  const sig = signText(text, signer);
  return `${SIG_PREFIX}${signer.name} ${Buffer.concat([signer.keyHash, sig]).toString('base64')}\n`;
}

/** Raw signature bytes (64) of text by signer, for the API's JSON `signature` field. */
export function signText(text: string, signer: NoteSigner): Buffer {
  requireNoteText(text);
  return sign(null, Buffer.from(text, 'utf8'), signer.privateKey);
}

/**
 * The note's text plus one signature line by signer; returns the whole signed note.
 * Appends to an already signed note's signatures if given one: input whose part after its
 * last blank line is all lines starting "— " is read as a signed note (and must be a
 * well-formed one); its signatures are kept, except one by the same key, which is replaced
 * (as Go's note.Sign does). Existing signatures are not verified here.
 */
export function signNote(text: string, signer: NoteSigner): string {
  const split = text.lastIndexOf('\n\n');
  const tail = split < 0 ? '' : text.slice(split + 2);
  const signed = tail !== '' && tail.split('\n').every((l, i, all) => l.startsWith(SIG_PREFIX) || (l === '' && i === all.length - 1));
  if (!signed) return `${text}\n${signatureLine(text, signer)}`;

  const note = splitNote(text);
  const kept = note.lines.filter((s) => !(s.name === signer.name && s.keyHash.equals(signer.keyHash)));
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
    const id = `${v.name}+${hex(v.keyHash)}`;
    const raw = ed25519PublicKeyRaw(v.publicKey);
    const same = known.get(id) ?? [];
    if (!same.some((s) => s.raw.equals(raw))) same.push({ raw, verifier: v });
    known.set(id, same);
  }

  const message = Buffer.from(text, 'utf8');
  const seen = new Set<string>();
  const signatures: OpenedNote['signatures'] = [];
  for (const s of lines) {
    if (seen.has(s.line)) continue;
    seen.add(s.line);
    const id = `${s.name}+${hex(s.keyHash)}`;
    const matches = known.get(id) ?? [];
    if (matches.length > 1) throw new NoteError(`ambiguous key ${id}`, 'ambiguous-key');
    const verifier = matches[0]?.verifier;
    if (verifier && !(s.signature.length === 64 && verify(null, message, verifier.publicKey, s.signature))) {
      throw new NoteError(`invalid signature for key ${id}`, 'invalid-signature');
    }
    const entry = { name: s.name, keyHash: Buffer.from(s.keyHash), signature: Buffer.from(s.signature) };
    signatures.push(verifier ? { ...entry, verifiedBy: verifier } : entry);
  }
  return { text, signatures };
}

// ---------------------------------------------------------------------------------------
// Checkpoints

function checkpointError(problem: string): NoteError {
  return new NoteError(`malformed checkpoint: ${problem}`);
}

function requireCheckpointLine(line: string, what: string): void {
  if (line === '') throw checkpointError(`${what} is empty`);
  if (line.includes('\n')) throw checkpointError(`${what} contains a newline`);
  const problem = noteCharsProblem(line);
  if (problem) throw checkpointError(`${what}: ${problem}`);
}

/** The checkpoint's note text (no signature). */
export function formatCheckpoint(c: Checkpoint): string {
  requireCheckpointLine(c.origin, 'origin');
  if (!Number.isSafeInteger(c.treeSize) || c.treeSize < 0) throw checkpointError('tree size must be a non-negative safe integer');
  if (c.rootHash.length !== 32) throw checkpointError('root hash must be 32 bytes');
  c.extensions.forEach((e, i) => requireCheckpointLine(e, `extension line ${i + 1}`));
  return [c.origin, String(c.treeSize), c.rootHash.toString('base64'), ...c.extensions].map((l) => `${l}\n`).join('');
}

/**
 * Reads a checkpoint's note text. Tree sizes above 2^53 - 1 are refused rather than
 * rounded, since treeSize is a number.
 */
export function parseCheckpoint(text: string): Checkpoint {
  const problem = noteCharsProblem(text);
  if (problem) throw checkpointError(problem);
  if (!text.endsWith('\n')) throw checkpointError('text must end with a newline');
  const lines = text.slice(0, -1).split('\n');
  const [origin, size, root, ...extensions] = lines;
  if (origin === undefined || size === undefined || root === undefined) {
    throw checkpointError('needs an origin, a tree size and a root hash line');
  }
  if (origin === '') throw checkpointError('origin is empty');
  if (!/^(?:0|[1-9][0-9]*)$/.test(size)) throw checkpointError('tree size must be decimal without leading zeros');
  const treeSize = Number(size);
  if (!Number.isSafeInteger(treeSize)) throw checkpointError('tree size is too large');
  const rootHash = decodeBase64Strict(root);
  if (!rootHash || rootHash.length !== 32) throw checkpointError('root hash must be 32 bytes in standard base64');
  if (extensions.includes('')) throw checkpointError('extension lines must be non-empty');
  return { origin, treeSize, rootHash, extensions };
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
