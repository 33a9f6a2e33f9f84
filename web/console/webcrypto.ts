// The browser's SHA-256 and Ed25519, from Web Crypto, for the checks the page takes from
// src/tlog/ (note-format.ts, merkle-path.ts, jcs.ts): those modules read the formats and leave
// the cryptography to their caller, node:crypto on the server, this file here.

/** Web Crypto, which browsers give only to secure contexts (https, or http://localhost). */
export function subtle(): SubtleCrypto | undefined {
  return globalThis.isSecureContext && globalThis.crypto?.subtle ? globalThis.crypto.subtle : undefined;
}

function required(): SubtleCrypto {
  const s = subtle();
  if (!s) throw new Error('Web Crypto is not available (not a secure context)');
  return s;
}

export const sha256 = async (data: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>> => new Uint8Array(await required().digest('SHA-256', data));

/**
 * Whether `signature` is an Ed25519 signature of `message` under the raw `publicKey`. Throws
 * when this browser's Web Crypto has no Ed25519 (an error the caller reports as such, not as a
 * bad signature).
 */
export async function ed25519Verify(publicKey: Uint8Array, signature: Uint8Array, message: Uint8Array): Promise<boolean> {
  const s = required();
  if (signature.length !== 64) return false;
  let key: CryptoKey;
  try {
    key = await s.importKey('raw', new Uint8Array(publicKey), { name: 'Ed25519' }, false, ['verify']);
  } catch (err) {
    throw new Error(`this browser cannot check Ed25519 signatures (${err instanceof Error ? err.message : String(err)})`, { cause: err });
  }
  return s.verify({ name: 'Ed25519' }, key, new Uint8Array(signature), new Uint8Array(message));
}
