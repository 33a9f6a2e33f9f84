// C2SP signed notes (c2sp.org/signed-note) and tlog checkpoints (c2sp.org/tlog-checkpoint),
// read and checked in the browser with Web Crypto's Ed25519, from the specifications: the
// server's own code (src/tlog/signed-note.ts) is not shared, so that a
// mistake there cannot agree with itself here.
import { concat, equalBytes, fromBase64, sha256, subtle, toHex, utf8Bytes } from './bytes.js';

const ED25519 = 0x01; // signed-note's signature type byte for Ed25519
const SIG_PREFIX = '\u2014 '; // "— "

export interface NoteSignature {
  name: string;
  keyHash: Uint8Array;
  signature: Uint8Array;
}

export interface SignedNote {
  /** The signed text: every line up to and including the newline before the blank line. */
  text: string;
  signatures: NoteSignature[];
}

export interface CheckpointBody {
  origin: string;
  size: number;
  rootHash: Uint8Array;
  extensions: string[];
}

export interface VerifierKey {
  name: string;
  keyHash: Uint8Array;
  publicKey: Uint8Array;
}

const validName = (name: string) => name !== '' && !/[\s+]/u.test(name);

/** A signed note split into its text and signature lines; throws with what is malformed. */
export function parseSignedNote(note: string): SignedNote {
  const split = note.lastIndexOf('\n\n');
  if (split < 0) throw new Error('the note has no blank line before its signatures');
  const block = note.slice(split + 2);
  if (block === '' || !block.endsWith('\n')) throw new Error('the note\'s signatures do not end with a newline');
  const signatures = block
    .slice(0, -1)
    .split('\n')
    .map((line) => {
      if (!line.startsWith(SIG_PREFIX)) throw new Error('a signature line does not start with "— "');
      const rest = line.slice(SIG_PREFIX.length);
      const space = rest.indexOf(' ');
      const name = space < 0 ? '' : rest.slice(0, space);
      const bytes = space < 0 ? undefined : fromBase64(rest.slice(space + 1));
      if (!validName(name) || !bytes || bytes.length < 5) throw new Error(`a signature line is malformed: ${JSON.stringify(line)}`);
      return { name, keyHash: bytes.subarray(0, 4), signature: bytes.subarray(4) };
    });
  return { text: note.slice(0, split + 1), signatures };
}

/** The origin, tree size and root hash lines of a checkpoint's text, and its extension lines. */
export function parseCheckpointBody(text: string): CheckpointBody {
  if (!text.endsWith('\n')) throw new Error('the checkpoint does not end with a newline');
  const [origin, sizeLine, rootLine, ...extensions] = text.slice(0, -1).split('\n');
  if (!origin || sizeLine === undefined || rootLine === undefined) throw new Error('the checkpoint lacks an origin, a size or a root hash');
  if (!/^(?:0|[1-9][0-9]*)$/.test(sizeLine) || !Number.isSafeInteger(Number(sizeLine))) throw new Error(`the checkpoint's size ${JSON.stringify(sizeLine)} is not a decimal number`);
  const rootHash = fromBase64(rootLine);
  if (!rootHash || rootHash.length !== 32) throw new Error('the checkpoint\'s root hash is not 32 bytes of standard base64');
  if (extensions.includes('')) throw new Error('the checkpoint has an empty extension line');
  return { origin, size: Number(sizeLine), rootHash, extensions };
}

/** SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key)[:4], the key hash signed-note assigns an Ed25519 key. */
export async function keyHash(name: string, publicKey: Uint8Array): Promise<Uint8Array> {
  return (await sha256(utf8Bytes(`${name}\n`), Uint8Array.of(ED25519), publicKey)).subarray(0, 4);
}

/** `<name>+<8 hex digits>+<base64(0x01 ‖ key)>`, checked: its hash must be its name's and key's. */
export async function parseVerifierKey(vkey: string): Promise<VerifierKey> {
  const m = /^([^+]+)\+([0-9a-f]{8})\+(.+)$/s.exec(vkey);
  const encoded = m ? fromBase64(m[3]!) : undefined;
  if (!m || !validName(m[1]!) || !encoded) throw new Error(`the verifier key ${JSON.stringify(vkey)} is malformed`);
  if (encoded[0] !== ED25519 || encoded.length !== 33) throw new Error(`the verifier key of ${m[1]} is not an Ed25519 key`);
  const publicKey = encoded.subarray(1);
  const hash = await keyHash(m[1]!, publicKey);
  if (toHex(hash) !== m[2]) throw new Error(`the verifier key of ${m[1]} has a key hash that is not its own`);
  return { name: m[1]!, keyHash: hash, publicKey };
}

/**
 * Whether `sig` is an Ed25519 signature of `text` under `publicKey`. Throws when this browser's
 * Web Crypto has no Ed25519 (an error the caller reports as such, not as a bad signature).
 */
export async function ed25519Verify(publicKey: Uint8Array, sig: Uint8Array, text: string): Promise<boolean> {
  const s = subtle();
  if (!s) throw new Error('Web Crypto is not available (not a secure context)');
  if (sig.length !== 64) return false;
  let key: CryptoKey;
  try {
    key = await s.importKey('raw', concat(publicKey), { name: 'Ed25519' }, false, ['verify']);
  } catch (err) {
    throw new Error(`this browser cannot check Ed25519 signatures (${err instanceof Error ? err.message : String(err)})`, { cause: err });
  }
  return s.verify({ name: 'Ed25519' }, key, concat(sig), utf8Bytes(text));
}

/** The note's signature by this key (same name and key hash), if it has one. */
export const signatureBy = (note: SignedNote, key: VerifierKey): NoteSignature | undefined =>
  note.signatures.find((s) => s.name === key.name && equalBytes(s.keyHash, key.keyHash));
