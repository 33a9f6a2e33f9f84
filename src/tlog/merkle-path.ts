// RFC 6962 §2.1 hashing and the verifier's side of an inclusion proof (RFC 9162 §2.1.3.2),
// with SHA-256 left to the caller. Runtime-neutral: it imports nothing but bytes.ts's types
// and uses no Buffer, so that the audit console checks a proof in the browser with Web Crypto
// (web/console/verify.ts) by the same reading of the RFC as the server.
//
// What is shared is the shape of a path: which side each entry goes on, and whether the path
// has the right length at all (inclusionPathSides). merkle.ts verifies with it synchronously
// through node:crypto; its hot paths (leafHash, nodeHash and InclusionChecker, which hash
// millions of leaves in a verification) keep their own one-shot hashing and never go through
// the asynchronous functions below, which are for a caller whose SHA-256 is asynchronous and
// who hashes a few dozen nodes.
//
// Sizes and indexes are JS numbers up to 2^53 - 1, so all index arithmetic is done with
// division and multiplication: the bitwise operators would silently truncate to 32 bits.
import type { Sha256 } from './bytes.js';

export const HASH_BYTES = 32;
export const LEAF_PREFIX = 0x00;
export const NODE_PREFIX = 0x01;

const half = (n: number): number => Math.floor(n / 2);

/**
 * For each entry of an audit path to the leaf at `index` in a tree of `size` leaves, whether
 * it is the left operand of its node hash (true) or the right one; undefined when a path of
 * `length` entries cannot lead from that leaf to the root (or the position is not in the tree).
 * The loop of RFC 9162 §2.1.3.2, on the indexes alone.
 */
export function inclusionPathSides(index: number, size: number, length: number): boolean[] | undefined {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return undefined;
  const sides: boolean[] = [];
  let fn = index;
  let sn = size - 1;
  for (let i = 0; i < length; i++) {
    if (sn === 0) return undefined;
    if (fn % 2 === 1 || fn === sn) {
      sides.push(true);
      // The right-edge subtree had no right sibling at these levels: climb past them.
      while (fn % 2 === 0 && fn !== 0) {
        fn = half(fn);
        sn = half(sn);
      }
    } else {
      sides.push(false);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 ? sides : undefined;
}

/** 0x00 ‖ entry, what SHA-256 hashes for a leaf. */
export function leafInput(entry: Uint8Array): Uint8Array<ArrayBuffer> {
  const input = new Uint8Array(1 + entry.length);
  input[0] = LEAF_PREFIX;
  input.set(entry, 1);
  return input;
}

/** 0x01 ‖ left ‖ right, what SHA-256 hashes for an interior node. */
export function nodeInput(left: Uint8Array, right: Uint8Array): Uint8Array<ArrayBuffer> {
  const input = new Uint8Array(1 + left.length + right.length);
  input[0] = NODE_PREFIX;
  input.set(left, 1);
  input.set(right, 1 + left.length);
  return input;
}

/** SHA-256(0x00 ‖ entry), with the SHA-256 given. */
export const leafHashWith = async (sha256: Sha256, entry: Uint8Array): Promise<Uint8Array> => sha256(leafInput(entry));

/**
 * The root an audit path leads to from a leaf hash, with the SHA-256 given; undefined when the
 * path has the wrong length for that position or holds an entry that is not 32 bytes.
 */
export async function rootFromInclusionPath(sha256: Sha256, leaf: Uint8Array, index: number, size: number, path: readonly Uint8Array[]): Promise<Uint8Array | undefined> {
  if (leaf.length !== HASH_BYTES || path.some((p) => p.length !== HASH_BYTES)) return undefined;
  const sides = inclusionPathSides(index, size, path.length);
  if (!sides) return undefined;
  let r = leaf;
  for (let i = 0; i < path.length; i++) r = await sha256(sides[i] ? nodeInput(path[i]!, r) : nodeInput(r, path[i]!));
  return r;
}
