// Bytes for the page's own verification: UTF-8, strict standard base64 and SHA-256, with
// nothing but what the browser has (TextEncoder, atob/btoa, Web Crypto).

const utf8 = new TextEncoder();

export const utf8Bytes = (text: string): Uint8Array<ArrayBuffer> => utf8.encode(text) as Uint8Array<ArrayBuffer>;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Standard base64 with its padding, spelled the one canonical way; anything else is undefined. */
export function fromBase64(text: string): Uint8Array<ArrayBuffer> | undefined {
  if (!BASE64.test(text)) return undefined;
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return toBase64(bytes) === text ? bytes : undefined;
}

export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

export const toHex = (bytes: Uint8Array): string => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

export function concat(...parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
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

/** Web Crypto, which browsers give only to secure contexts (https, or http://localhost). */
export function subtle(): SubtleCrypto | undefined {
  return globalThis.isSecureContext && globalThis.crypto?.subtle ? globalThis.crypto.subtle : undefined;
}

export async function sha256(...parts: Uint8Array[]): Promise<Uint8Array<ArrayBuffer>> {
  const s = subtle();
  if (!s) throw new Error('Web Crypto is not available (not a secure context)');
  return new Uint8Array(await s.digest('SHA-256', concat(...parts)));
}
