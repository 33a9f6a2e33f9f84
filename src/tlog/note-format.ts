// C2SP signed notes (c2sp.org/signed-note), tlog checkpoints (c2sp.org/tlog-checkpoint) and
// verifier keys as text: their parsing, their formatting and the bytes a signature or a key
// hash covers, byte for byte what Go's golang.org/x/mod/sumdb/note produces and accepts.
// Parsing is strict: a note is either exactly well formed or refused, never repaired.
//
// Runtime-neutral on purpose: it imports nothing but bytes.ts and leaves the cryptography to
// its callers, so that one reading of the specs serves both sides. signed-note.ts checks
// signatures and key hashes with node:crypto on the server and in the offline verifier; the
// audit console (web/console/verify.ts) does the same with Web Crypto in the browser, through
// verifierKeyWith() here. Cosignatures and the other note-based specs belong here too, for the
// same reason. test/architecture.test.ts holds it to importing no Node module.
import { concatBytes, encodeBase64, decodeBase64Strict, equalBytes, fromHex, toHex, utf8Bytes, type Sha256 } from './bytes.js';

export type NoteErrorCode = 'malformed' | 'invalid-signature' | 'ambiguous-key' | 'invalid-key';

export class NoteError extends Error {
  readonly code: NoteErrorCode;
  constructor(message: string, code: NoteErrorCode = 'malformed') {
    super(message);
    this.name = 'NoteError';
    this.code = code;
  }
}

/** The signature type byte signed-note assigns to Ed25519. */
export const ED25519 = 0x01;
export const ED25519_KEY_BYTES = 32;
export const ED25519_SIGNATURE_BYTES = 64;
const SIG_PREFIX = '\u2014 '; // em dash, space
// The spec asks verifiers to cap signatures and to accept at least 16; Go stops at 100.
export const MAX_SIGNATURES = 100;

// What Go's unicode.IsSpace calls a space (names must not contain one; the ASCII ones
// are control characters, refused anyway), plus '+', which separates a verifier key's parts.
const NAME_FORBIDDEN = /[ \u0085\p{Z}+]/u;
// A lone surrogate has no UTF-8 encoding: encoding it would sign U+FFFD in its place.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function hasControl(s: string, allowNewline: boolean): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 && !(allowNewline && c === 0x0a)) return true;
  }
  return false;
}

export function isValidName(name: string): boolean {
  return name !== '' && !NAME_FORBIDDEN.test(name) && !hasControl(name, false) && !LONE_SURROGATE.test(name);
}

export function requireName(name: string): void {
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

/** The bytes a note's signatures sign: its text's UTF-8, once the text is checked to be a note's. */
export function signedMessage(text: string): Uint8Array<ArrayBuffer> {
  const problem = noteCharsProblem(text) ?? (text.endsWith('\n') ? undefined : 'text must end with a newline');
  if (problem) throw new NoteError(`malformed note: ${problem}`);
  return utf8Bytes(text);
}

/** `<name>+<hex key hash>`: how Go names a key in its errors, and what identifies a signature's key. */
export const keyId = (name: string, keyHash: Uint8Array): string => `${name}+${toHex(keyHash)}`;

// ---------------------------------------------------------------------------------------
// Notes

export interface SignatureLine {
  /** The line as written, without its newline. */
  line: string;
  name: string;
  keyHash: Uint8Array<ArrayBuffer>;
  signature: Uint8Array<ArrayBuffer>;
}

/** A signed note split at its last blank line: the signed text (ending in a newline), and its signature lines. */
export interface NoteParts {
  text: string;
  lines: SignatureLine[];
}

function parseSignatureLine(line: string): SignatureLine {
  if (!line.startsWith(SIG_PREFIX)) throw new NoteError('malformed note: signature line must start with an em dash and a space');
  const rest = line.slice(SIG_PREFIX.length);
  const space = rest.indexOf(' ');
  const name = space < 0 ? '' : rest.slice(0, space);
  const bytes = space < 0 ? undefined : decodeBase64Strict(rest.slice(space + 1));
  if (!isValidName(name) || !bytes || bytes.length < 5) throw new NoteError('malformed note: bad signature line');
  return { line, name, keyHash: bytes.subarray(0, 4), signature: bytes.subarray(4) };
}

/** Reads a signed note's layout; throws NoteError on anything malformed. Verifies nothing. */
export function splitNote(note: string): NoteParts {
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

/**
 * Whether text reads as a note already signed: the part after its last blank line is all lines
 * starting "— " (whether they are well formed is splitNote's to say).
 */
export function looksSigned(text: string): boolean {
  const split = text.lastIndexOf('\n\n');
  const tail = split < 0 ? '' : text.slice(split + 2);
  return tail !== '' && tail.split('\n').every((l, i, all) => l.startsWith(SIG_PREFIX) || (l === '' && i === all.length - 1));
}

/** One signature line, with its newline: `— <name> base64(key hash ‖ signature)`. */
export function formatSignatureLine(name: string, keyHash: Uint8Array, signature: Uint8Array): string {
  requireName(name);
  if (keyHash.length !== 4) throw new NoteError('a key hash is 4 bytes', 'invalid-key');
  return `${SIG_PREFIX}${name} ${encodeBase64(concatBytes(keyHash, signature))}\n`;
}

/** The note's signature lines by this key (same name and key hash), identical lines once. */
export function signaturesBy(note: NoteParts, name: string, keyHash: Uint8Array): SignatureLine[] {
  const lines = note.lines.filter((s) => s.name === name && equalBytes(s.keyHash, keyHash));
  return lines.filter((s, i) => lines.findIndex((t) => t.line === s.line) === i);
}

// ---------------------------------------------------------------------------------------
// Checkpoints

export interface CheckpointBody<Bytes extends Uint8Array = Uint8Array> {
  origin: string;
  treeSize: number;
  rootHash: Bytes;
  extensions: string[];
}

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
export function formatCheckpoint(c: CheckpointBody): string {
  requireCheckpointLine(c.origin, 'origin');
  if (!Number.isSafeInteger(c.treeSize) || c.treeSize < 0) throw checkpointError('tree size must be a non-negative safe integer');
  if (c.rootHash.length !== 32) throw checkpointError('root hash must be 32 bytes');
  c.extensions.forEach((e, i) => requireCheckpointLine(e, `extension line ${i + 1}`));
  return [c.origin, String(c.treeSize), encodeBase64(c.rootHash), ...c.extensions].map((l) => `${l}\n`).join('');
}

/**
 * Reads a checkpoint's note text. Tree sizes above 2^53 - 1 are refused rather than
 * rounded, since treeSize is a number.
 */
export function parseCheckpoint(text: string): CheckpointBody<Uint8Array<ArrayBuffer>> {
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
// Verifier keys

/** A verifier key's parts as written; its key hash is not checked yet (that takes SHA-256). */
export interface VerifierKeyText {
  name: string;
  keyHash: Uint8Array<ArrayBuffer>;
  /** The signature type byte: 0x01 for Ed25519. */
  keyType: number;
  /** The key after its type byte: for Ed25519, the raw 32-byte public key. */
  publicKey: Uint8Array<ArrayBuffer>;
}

/** `<name>+<hex key hash>+<base64(type ‖ key)>`, the form Go's note.NewVerifier reads, taken apart. */
export function parseVerifierKeyText(vkey: string): VerifierKeyText {
  // The name and the hash hold no '+'; the base64 key may.
  const [, name = '', hash = '', encoded = ''] = /^([^+]*)\+([^+]*)\+(.*)$/s.exec(vkey) ?? [];
  const key = decodeBase64Strict(encoded);
  const keyHash = /^[0-9a-f]{8}$/.test(hash) ? fromHex(hash) : undefined;
  if (!key || key.length === 0 || !isValidName(name) || !keyHash) throw new NoteError('malformed verifier key', 'invalid-key');
  return { name, keyHash, keyType: key[0]!, publicKey: key.subarray(1) };
}

/** Refuses a key of another type than Ed25519, or of the wrong length. */
export function requireEd25519Key(key: VerifierKeyText): void {
  if (key.keyType !== ED25519) {
    throw new NoteError(`unsupported verifier key type 0x${key.keyType.toString(16).padStart(2, '0')} (only Ed25519, 0x01)`, 'invalid-key');
  }
  if (key.publicKey.length !== ED25519_KEY_BYTES) throw new NoteError('malformed verifier key: Ed25519 key is not 32 bytes', 'invalid-key');
}

/** name ‖ "\n" ‖ type ‖ key: what SHA-256 hashes for the key hash signed-note recommends (its first 4 bytes). */
export const keyHashInput = (name: string, keyType: number, publicKey: Uint8Array): Uint8Array<ArrayBuffer> =>
  concatBytes(utf8Bytes(`${name}\n`), Uint8Array.of(keyType), publicKey);

/** Refuses a key whose hash is not the first 4 bytes of digest, SHA-256(keyHashInput(…)). */
export function requireKeyHash(key: VerifierKeyText, digest: Uint8Array): void {
  if (!equalBytes(digest.subarray(0, 4), key.keyHash)) throw new NoteError('verifier key hash does not match its name and key', 'invalid-key');
}

/** `<name>+<hex key hash>+<base64(type ‖ key)>`. */
export function formatVerifierKey(name: string, keyHash: Uint8Array, keyType: number, publicKey: Uint8Array): string {
  requireName(name);
  return `${keyId(name, keyHash)}+${encodeBase64(concatBytes(Uint8Array.of(keyType), publicKey))}`;
}

/** An Ed25519 verifier key read and checked as signed-note.ts's parseVerifierKey does, with the SHA-256 given (Web Crypto's in the browser). */
export async function verifierKeyWith(sha256: Sha256, vkey: string): Promise<VerifierKeyText> {
  const key = parseVerifierKeyText(vkey);
  requireEd25519Key(key);
  requireKeyHash(key, await sha256(keyHashInput(key.name, key.keyType, key.publicKey)));
  return key;
}
