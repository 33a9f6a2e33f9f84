// Bytes as the specs spell them: UTF-8, strict standard base64, lowercase hex. Runtime-neutral,
// like note-format.ts and merkle-path.ts, which build on it: it imports nothing and uses no
// Buffer, only strings, Uint8Array and TextEncoder, so that the server (through signed-note.ts)
// and the audit console in the browser (web/console/verify.ts, which esbuild bundles with it)
// read a note with the same code. test/architecture.test.ts holds it to that.

/** A SHA-256 digest function: node:crypto's in tests, Web Crypto's in the browser. */
export type Sha256 = (data: Uint8Array<ArrayBuffer>) => Uint8Array | Promise<Uint8Array>;

const utf8 = new TextEncoder();

/** The UTF-8 of a string (a lone surrogate becomes U+FFFD: callers refuse those first). */
export const utf8Bytes = (text: string): Uint8Array<ArrayBuffer> => utf8.encode(text) as Uint8Array<ArrayBuffer>;

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** Each base64 character's value, by its code ('=' reads as 0; the pattern lets nothing else through). */
const VALUE = new Uint8Array(128);
for (let i = 0; i < ALPHABET.length; i++) VALUE[ALPHABET.charCodeAt(i)] = i;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export function encodeBase64(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const rest = bytes.length - i;
    const n = (bytes[i]! << 16) | ((rest > 1 ? bytes[i + 1]! : 0) << 8) | (rest > 2 ? bytes[i + 2]! : 0);
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]!;
    out += rest > 1 ? ALPHABET[(n >> 6) & 63]! : '=';
    out += rest > 2 ? ALPHABET[n & 63]! : '=';
  }
  return out;
}

/**
 * Standard base64 with its padding, spelled the one canonical way (no line breaks, no URL
 * alphabet, no stray bits in the last character); anything else is undefined, never repaired.
 */
export function decodeBase64Strict(text: string): Uint8Array<ArrayBuffer> | undefined {
  if (typeof text !== 'string' || !BASE64.test(text)) return undefined;
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  const out = new Uint8Array((text.length / 4) * 3 - padding);
  let at = 0;
  for (let i = 0; i < text.length; i += 4) {
    let n = 0;
    for (let j = 0; j < 4; j++) n = (n << 6) | VALUE[text.charCodeAt(i + j)]!;
    out[at++] = n >> 16;
    if (at < out.length) out[at++] = (n >> 8) & 0xff;
    if (at < out.length) out[at++] = n & 0xff;
  }
  return encodeBase64(out) === text ? out : undefined;
}

export const toHex = (bytes: Uint8Array): string => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

/** Lowercase hex (the spellings signed-note uses) to bytes; anything else is undefined. */
export function fromHex(text: string): Uint8Array<ArrayBuffer> | undefined {
  if (!/^(?:[0-9a-f]{2})*$/.test(text)) return undefined;
  return Uint8Array.from({ length: text.length / 2 }, (_, i) => parseInt(text.slice(2 * i, 2 * i + 2), 16));
}

export function concatBytes(...parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
