// RFC 6962 §2.1 hashing and the verifier's side of an inclusion proof (RFC 9162 §2.1.3.2),
// over Web Crypto's SHA-256.
import { equalBytes, sha256 } from './bytes.js';

const LEAF = Uint8Array.of(0x00);
const NODE = Uint8Array.of(0x01);

/** SHA-256(0x00 ‖ entry). */
export const leafHash = (entry: Uint8Array): Promise<Uint8Array> => sha256(LEAF, entry);

/** SHA-256(0x01 ‖ left ‖ right). */
export const nodeHash = (left: Uint8Array, right: Uint8Array): Promise<Uint8Array> => sha256(NODE, left, right);

/**
 * The root the audit path leads to from `leaf` at `index` in a tree of `size` leaves, or
 * undefined when the path has the wrong length for that position (RFC 9162 §2.1.3.2).
 * Sizes are JS numbers (up to 2^53 − 1), so halving is division, never a 32-bit shift.
 */
export async function rootFromPath(leaf: Uint8Array, index: number, size: number, path: Uint8Array[]): Promise<Uint8Array | undefined> {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return undefined;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of path) {
    if (p.length !== 32 || sn === 0) return undefined;
    if (fn % 2 === 1 || fn === sn) {
      r = await nodeHash(p, r);
      // On the right edge, levels where the subtree had no sibling are climbed past.
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      r = await nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : undefined;
}

export async function verifyInclusion(leaf: Uint8Array, index: number, size: number, path: Uint8Array[], root: Uint8Array): Promise<boolean> {
  const computed = await rootFromPath(leaf, index, size, path);
  return computed !== undefined && equalBytes(computed, root);
}
