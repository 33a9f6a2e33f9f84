// RFC 6962 §2.1 Merkle hash trees over SHA-256: hashing, proofs and their verification, and an
// append-only builder. Pure: proofs read node hashes through a caller-supplied lookup, so the
// store that keeps them (the database, a Map in tests) stays outside.
//
// Sizes and indexes are JS numbers up to 2^53 - 1, so all index arithmetic is done with
// division and multiplication: the bitwise operators would silently truncate to 32 bits.
//
// The Node side of merkle-path.ts, which holds what the browser's verifier shares with this one
// (the shape of an inclusion path). The hashing here stays synchronous, one-shot and on Buffers:
// a verification hashes millions of leaves, and no generic or asynchronous hash goes in its way.
import { hash } from 'node:crypto';
import { HASH_BYTES, inclusionPathSides } from './merkle-path.js';

export type Hash = Buffer; // 32 bytes

/** A hash read from the database as a Buffer, without a copy (node-postgres gives Buffers, PGlite Uint8Arrays). */
export const asHash = (bytes: Uint8Array): Hash => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));

// One-shot crypto.hash, not createHash: verifying a million records hashes two million times,
// and a Hash object per hash doubled the time and fed the garbage collector a third of it.
// The digest comes out as a 'binary' (latin1) string, one char per byte, and becomes a Buffer through
// Buffer.from, which slices Node's shared pool: Node 20's 'buffer' output allocates an
// ArrayBuffer per digest, 1.3 µs against 0.4 µs (measured on this machine), most of a
// verification's hashing time and much of its garbage collection.
const sha256 = (data: string | Uint8Array): Hash => Buffer.from(hash('sha256', data, 'binary'), 'binary');

export function leafHash(data: Uint8Array | string): Hash {
  // "\0" + text is 0x00 followed by the text's UTF-8: the leaf prefix without a copy of bytes.
  if (typeof data === 'string') return sha256(`\0${data}`);
  const buf = Buffer.allocUnsafe(data.length + 1);
  buf[0] = 0x00;
  buf.set(data, 1);
  return sha256(buf);
}

/** 0x01 ‖ left ‖ right, assembled in one buffer reused by every call (hashing is synchronous). */
const nodeInput = Buffer.alloc(1 + 2 * HASH_BYTES, 0x01);

export function nodeHash(left: Hash, right: Hash): Hash {
  nodeInput.set(left, 1);
  nodeInput.set(right, 1 + HASH_BYTES);
  return sha256(nodeInput);
}

/**
 * nodeHash of two hashes given and answered in base64, for the export, which reads leaves as
 * base64 and writes every node as base64: no Buffer is made per hash (the input is decoded into
 * the shared buffer) and none is encoded again.
 */
export function nodeHashBase64(left: string, right: string): string {
  nodeInput.write(left, 1, 'base64');
  nodeInput.write(right, 1 + HASH_BYTES, 'base64');
  return hash('sha256', nodeInput, 'base64');
}

export const EMPTY_ROOT: Hash = sha256('');

/** A complete, aligned subtree: leaves [index·2^level, (index+1)·2^level). level 0 is a leaf. */
export interface NodeKey {
  level: number;
  index: number;
}

export type NodeSource = (key: NodeKey) => Hash;

function checkSize(name: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${name} must be an integer in [0, 2^53 - 1], got ${n}`);
}

/** The largest power of two strictly below n (n ≥ 2): RFC 6962's split point k. */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** The largest power of two not above n (n ≥ 1), with its exponent. */
function highestPower(n: number): { power: number; level: number } {
  let power = 1;
  let level = 0;
  while (power * 2 <= n) {
    power *= 2;
    level += 1;
  }
  return { power, level };
}

function isPowerOfTwo(n: number): boolean {
  if (n < 1) return false;
  while (n % 2 === 0) n /= 2;
  return n === 1;
}

/**
 * The complete subtrees that make up the leaves [start, start + count), largest first. Every
 * range RFC 6962's recursion hashes starts on a multiple of the power of two at or above its
 * length, which is what makes each piece aligned.
 */
function rangeKeys(start: number, count: number, into: NodeKey[] = []): NodeKey[] {
  if (count === 0) return into;
  let { power, level } = highestPower(count);
  let pos = start;
  let left = count;
  while (left > 0) {
    if (left >= power) {
      into.push({ level, index: pos / power });
      pos += power;
      left -= power;
    }
    power /= 2;
    level -= 1;
  }
  return into;
}

/** MTH of a range: RFC 6962 splits at the largest power of two, so the pieces fold from the right. */
function foldRight(hashes: Hash[]): Hash {
  if (hashes.length === 0) return EMPTY_ROOT;
  let h = hashes[hashes.length - 1]!;
  for (let i = hashes.length - 2; i >= 0; i--) h = nodeHash(hashes[i]!, h);
  return h;
}

/** A subtree hash a proof carries: [start, start + count) of the tree. */
interface Range {
  start: number;
  count: number;
}

function rangeHash(r: Range, get: NodeSource): Hash {
  return foldRight(rangeKeys(r.start, r.count).map(get));
}

function keysOf(ranges: Range[]): NodeKey[] {
  const keys: NodeKey[] = [];
  for (const r of ranges) rangeKeys(r.start, r.count, keys);
  return keys;
}

/** PATH(m, D[n]) as ranges, leaf side first. */
function inclusionRanges(index: number, size: number): Range[] {
  checkSize('size', size);
  checkSize('index', index);
  if (index >= size) throw new RangeError(`index ${index} is outside a tree of size ${size}`);
  const topDown: Range[] = [];
  let start = 0;
  let n = size;
  let m = index;
  while (n > 1) {
    const k = splitPoint(n);
    if (m < k) {
      topDown.push({ start: start + k, count: n - k });
      n = k;
    } else {
      topDown.push({ start, count: k });
      start += k;
      m -= k;
      n -= k;
    }
  }
  return topDown.reverse();
}

/** PROOF(m, D[n]) = SUBPROOF(m, D[n], true) as ranges, deepest first. */
function consistencyRanges(from: number, to: number): Range[] {
  checkSize('from', from);
  checkSize('to', to);
  if (from > to) throw new RangeError(`from (${from}) is beyond to (${to})`);
  if (from === 0 || from === to) return [];
  const topDown: Range[] = [];
  let start = 0;
  let n = to;
  let m = from;
  let whole = true; // SUBPROOF's b: still on the left edge, where the old root is known to the verifier
  while (m !== n) {
    const k = splitPoint(n);
    if (m <= k) {
      topDown.push({ start: start + k, count: n - k });
      n = k;
    } else {
      topDown.push({ start, count: k });
      start += k;
      m -= k;
      n -= k;
      whole = false;
    }
  }
  if (!whole) topDown.push({ start, count: n });
  return topDown.reverse();
}

/** Complete subtrees of a tree of `size` leaves along its right edge, largest first (one per set bit of size). */
export function frontierNodes(size: number): NodeKey[] {
  checkSize('size', size);
  return rangeKeys(0, size);
}

/** Keys of the complete subtrees whose hashes rootHash/inclusionProof/consistencyProof read, so a caller fetches them all in one query first. */
export function rootNodes(size: number): NodeKey[] {
  return frontierNodes(size);
}

export function inclusionProofNodes(index: number, size: number): NodeKey[] {
  return keysOf(inclusionRanges(index, size));
}

export function consistencyProofNodes(from: number, to: number): NodeKey[] {
  return keysOf(consistencyRanges(from, to));
}

export function rootHash(size: number, get: NodeSource): Hash {
  return foldRight(frontierNodes(size).map(get));
}

/** RFC 6962 PATH(m, D[n]), in RFC order (leaf side first). */
export function inclusionProof(index: number, size: number, get: NodeSource): Hash[] {
  return inclusionRanges(index, size).map((r) => rangeHash(r, get));
}

/** RFC 6962 PROOF(m, D[n]); from == to or from == 0 → []. */
export function consistencyProof(from: number, to: number, get: NodeSource): Hash[] {
  return consistencyRanges(from, to).map((r) => rangeHash(r, get));
}

const isHash = (h: unknown): h is Hash => Buffer.isBuffer(h) && h.length === HASH_BYTES;
const half = (n: number): number => Math.floor(n / 2);

/** RFC 9162 §2.1.3.2, the verifier's side of PATH (the path's shape: merkle-path.ts, shared with the browser's verifier). */
export function verifyInclusion(leaf: Hash, index: number, size: number, proof: Hash[], root: Hash): boolean {
  if (!isHash(leaf) || !isHash(root) || !proof.every(isHash)) return false;
  const sides = inclusionPathSides(index, size, proof.length);
  if (!sides) return false;
  let r = leaf;
  for (let i = 0; i < proof.length; i++) r = sides[i] ? nodeHash(proof[i]!, r) : nodeHash(r, proof[i]!);
  return r.equals(root);
}

/** Where verifyInclusion's loop stands after applying one proof entry. */
interface PathState {
  fn: number;
  sn: number;
  r: Hash;
}

/**
 * One turn of RFC 9162 §2.1.3.2's loop: the proof entry `p` hashed in (the caller checks sn ≠ 0
 * first). inclusionPathSides (merkle-path.ts) is the same loop on the indexes alone; the checker
 * below keeps this one, whose state after each entry its shortcut compares, rather than work out
 * every leaf's whole path first. test/merkle.test.ts checks that the two answer alike.
 */
function inclusionStep({ fn, sn, r }: PathState, p: Hash): PathState {
  if (fn % 2 === 1 || fn === sn) {
    r = nodeHash(p, r);
    // The right-edge subtree had no right sibling at these levels: climb past them.
    while (fn % 2 === 0 && fn !== 0) {
      fn = half(fn);
      sn = half(sn);
    }
  } else {
    r = nodeHash(r, p);
  }
  return { fn: half(fn), sn: half(sn), r };
}

const decodeHash = (b64: string): Hash | undefined => {
  const h = Buffer.from(b64, 'base64');
  return h.length === HASH_BYTES ? h : undefined;
};

/**
 * verifyInclusion for many leaves of one tree, checked in index order, with proof entries in
 * base64 as an export carries them. The loop's outcome depends only on its state (fn, sn and the
 * running hash) and the entries left to apply; consecutive leaves' paths meet after a level or
 * two and share every entry above. So once a leaf's loop reaches the state the previous leaf
 * (verified) was in after the same number of entries, with the same entries left, it ends where
 * that one did: at the root. Same answers as verifyInclusion (test/merkle.test.ts); about two
 * hashes and base64 decodings per leaf instead of log2(size).
 */
export class InclusionChecker {
  readonly #size: number;
  readonly #root: Hash;
  #last: { proof: readonly string[]; states: PathState[] } | undefined;

  constructor(size: number, root: Hash) {
    this.#size = size;
    this.#root = root;
  }

  verify(leaf: Hash, index: number, proof: readonly string[]): boolean {
    const size = this.#size;
    if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return false;
    if (!isHash(leaf) || !isHash(this.#root)) return false;
    const last = this.#last?.proof.length === proof.length ? this.#last : undefined;
    const states: PathState[] = [];
    let state: PathState = { fn: index, sn: size - 1, r: leaf };
    for (let i = 0; i < proof.length; i++) {
      if (state.sn === 0) return false;
      const p = decodeHash(proof[i]!);
      if (!p) return false;
      state = inclusionStep(state, p);
      states.push(state);
      const before = last?.states[i];
      if (before && before.fn === state.fn && before.sn === state.sn && before.r.equals(state.r) && sameFrom(last!.proof, proof, i + 1)) {
        for (let j = i + 1; j < last!.states.length; j++) states.push(last!.states[j]!);
        this.#last = { proof, states };
        return true;
      }
    }
    const ok = state.sn === 0 && state.r.equals(this.#root);
    if (ok) this.#last = { proof, states };
    return ok;
  }
}

function sameFrom(a: readonly string[], b: readonly string[], from: number): boolean {
  for (let i = from; i < b.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * RFC 9162 §2.1.4.2, the verifier's side of PROOF. Also true for the trivial cases the generator
 * answers with an empty proof: from == to with equal roots, and from == 0 with the empty root.
 */
export function verifyConsistency(from: number, to: number, fromRoot: Hash, toRoot: Hash, proof: Hash[]): boolean {
  if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from < 0 || from > to) return false;
  if (!isHash(fromRoot) || !isHash(toRoot) || !proof.every(isHash)) return false;
  if (from === 0) return proof.length === 0 && fromRoot.equals(EMPTY_ROOT);
  if (from === to) return proof.length === 0 && fromRoot.equals(toRoot);
  if (proof.length === 0) return false;
  // When the old tree is a complete subtree the proof leaves out its root, which the verifier has.
  const path = isPowerOfTwo(from) ? [fromRoot, ...proof] : proof;
  let fn = from - 1;
  let sn = to - 1;
  while (fn % 2 === 1) {
    fn = half(fn);
    sn = half(sn);
  }
  let fr = path[0]!;
  let sr = path[0]!;
  for (let i = 1; i < path.length; i++) {
    const c = path[i]!;
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while (fn % 2 === 0 && fn !== 0) {
        fn = half(fn);
        sn = half(sn);
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 && fr.equals(fromRoot) && sr.equals(toRoot);
}

/**
 * Appends leaves to a tree whose frontier is known, in O(log n) memory: used both by the sealer
 * (which stores every completed node) and by a streaming verifier (which only wants roots).
 */
export class TreeBuilder {
  #size: number;
  /** Hashes of frontierNodes(#size), largest subtree first: the right edge of the tree. */
  readonly #frontier: Hash[];

  constructor(size = 0, frontier: Hash[] = []) {
    checkSize('size', size);
    const expected = frontierNodes(size).length;
    if (frontier.length !== expected) {
      throw new RangeError(`a tree of size ${size} has ${expected} frontier hashes, got ${frontier.length}`);
    }
    if (!frontier.every(isHash)) throw new TypeError('frontier hashes must be 32-byte Buffers');
    this.#size = size;
    this.#frontier = frontier.slice();
  }

  get size(): number {
    return this.#size;
  }

  /** Adds one leaf hash; returns the complete subtrees it completed, level ≥ 1, lowest level first (the leaf itself, level 0, is not included). */
  append(leaf: Hash): Array<{ key: NodeKey; hash: Hash }> {
    if (!isHash(leaf)) throw new TypeError('a leaf hash must be a 32-byte Buffer');
    if (this.#size >= Number.MAX_SAFE_INTEGER) throw new RangeError('the tree is full');
    const completed: Array<{ key: NodeKey; hash: Hash }> = [];
    let hash = leaf;
    let index = this.#size;
    let level = 0;
    // Each trailing 1 bit of the size is a complete subtree the new leaf's subtree now pairs with.
    while (index % 2 === 1) {
      hash = nodeHash(this.#frontier.pop()!, hash);
      index = half(index);
      level += 1;
      completed.push({ key: { level, index }, hash });
    }
    this.#frontier.push(hash);
    this.#size += 1;
    return completed;
  }

  /** Root of the current size (EMPTY_ROOT for 0). */
  root(): Hash {
    return foldRight(this.#frontier);
  }

  /** Hashes of frontierNodes(size). */
  frontier(): Hash[] {
    return this.#frontier.slice();
  }
}
