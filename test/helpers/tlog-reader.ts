// A tiled-log client written from the texts alone (c2sp.org/tlog-tiles, c2sp.org/tlog-checkpoint,
// RFC 6962 §2.1, RFC 9162 §2.1.3.2), for tests to read the server as an outsider would. It
// imports nothing from src/ on purpose: sharing the server's path or hashing code would let a
// mistake there agree with itself. Only node:crypto.
import { createHash } from 'node:crypto';

export type FetchBytes = (path: string) => Promise<{ status: number; body: Buffer }>;

const HASH = 32;
const WIDTH = 256; // 2^8 hashes per full tile
const LEAF_PREFIX = Buffer.from([0x00]);
const NODE_PREFIX = Buffer.from([0x01]);

const sha256 = (...parts: Buffer[]): Buffer => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};

/** RFC 6962 §2.1: MTH({d}) = SHA-256(0x00 || d). */
export const hashLeaf = (entry: Buffer): Buffer => sha256(LEAF_PREFIX, entry);
/** RFC 6962 §2.1: SHA-256(0x01 || MTH(left) || MTH(right)). */
export const hashChildren = (left: Buffer, right: Buffer): Buffer => sha256(NODE_PREFIX, left, right);

/** tlog-tiles <N>: zero-padded three-digit elements, every one but the last prefixed with "x". */
export function encodeIndex(n: number): string {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`bad tile index ${n}`);
  const elements: string[] = [];
  do {
    elements.unshift(String(n % 1000).padStart(3, '0'));
    n = Math.floor(n / 1000);
  } while (n > 0);
  return elements.map((e, i) => (i < elements.length - 1 ? `x${e}` : e)).join('/');
}

/** tile/<L>/<N>[.p/<W>]; L is a level number or "entries". */
export function pathFor(level: number | 'entries', index: number, width: number): string {
  if (!Number.isInteger(width) || width < 1 || width > WIDTH) throw new RangeError(`bad tile width ${width}`);
  return `tile/${level}/${encodeIndex(index)}${width < WIDTH ? `.p/${width}` : ''}`;
}

/** The three lines of a checkpoint body (tlog-checkpoint "Note text"); extension and signature lines are not looked at. */
export function parseCheckpointNote(text: string): { origin: string; size: number; rootHash: Buffer } {
  const lines = text.split('\n');
  if (lines.length < 4) throw new Error('checkpoint: fewer than three lines');
  const [origin, sizeLine, rootLine] = lines as [string, string, string];
  if (origin === '') throw new Error('checkpoint: empty origin');
  if (!/^(0|[1-9][0-9]*)$/.test(sizeLine)) throw new Error(`checkpoint: bad tree size ${JSON.stringify(sizeLine)}`);
  const size = Number(sizeLine);
  if (!Number.isSafeInteger(size)) throw new Error(`checkpoint: tree size ${sizeLine} is too large`);
  const rootHash = Buffer.from(rootLine, 'base64');
  if (rootHash.length !== HASH || rootHash.toString('base64') !== rootLine) throw new Error(`checkpoint: bad root hash ${JSON.stringify(rootLine)}`);
  return { origin, size, rootHash };
}

/** RFC 9162 §2.1.3.2, step by step. */
export function verifyInclusion(leaf: Buffer, index: number, size: number, path: Buffer[], root: Buffer): boolean {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of path) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = hashChildren(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = hashChildren(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && r.equals(root);
}

/** RFC 6962: the largest power of two smaller than n. */
function largestPowerBelow(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** Reads one log; tiles it fetched are kept for the reader's life (they are immutable). */
export class TlogReader {
  readonly #fetch: FetchBytes;
  readonly #tiles = new Map<string, Buffer>();
  /** Every path fetched, in order, for tests that check what a client needed. */
  readonly fetched: string[] = [];

  constructor(fetchBytes: FetchBytes) {
    this.#fetch = fetchBytes;
  }

  async #get(path: string): Promise<Buffer | undefined> {
    this.fetched.push(path);
    const { status, body } = await this.#fetch(path);
    if (status === 404) return undefined;
    if (status !== 200) throw new Error(`GET ${path}: status ${status}`);
    return body;
  }

  async checkpoint(): Promise<{ origin: string; size: number; rootHash: Buffer }> {
    const body = await this.#get('checkpoint');
    if (!body) throw new Error('no checkpoint');
    return parseCheckpointNote(body.toString('utf8'));
  }

  /**
   * The first `width` hashes of tile (level, index). A partial tile may have been deleted once
   * the full one exists (the spec allows it), so a missing partial tile is read from the full
   * one instead.
   */
  async readTile(level: number, index: number, width: number): Promise<Buffer> {
    const key = `${level}/${index}`;
    const cached = this.#tiles.get(key);
    if (cached && cached.length >= width * HASH) return cached.subarray(0, width * HASH);
    const path = pathFor(level, index, width);
    let body = await this.#get(path);
    let expected = width * HASH;
    if (!body && width < WIDTH) {
      body = await this.#get(pathFor(level, index, WIDTH));
      expected = WIDTH * HASH;
    }
    if (!body) throw new Error(`${path}: not found`);
    if (body.length !== expected) throw new Error(`${path}: ${body.length} bytes, expected ${expected}`);
    this.#tiles.set(key, body);
    return body.subarray(0, width * HASH);
  }

  /** Leaf hashes of the entries in bundle `index`, which must hold exactly `width` entries. */
  async leafHashesFromEntries(index: number, width: number): Promise<Buffer[]> {
    const path = pathFor('entries', index, width);
    const body = await this.#get(path);
    if (!body) throw new Error(`${path}: not found`);
    const hashes: Buffer[] = [];
    let pos = 0;
    while (pos < body.length) {
      if (pos + 2 > body.length) throw new Error(`${path}: cut inside a length`);
      const len = body.readUInt16BE(pos);
      if (pos + 2 + len > body.length) throw new Error(`${path}: cut inside an entry`);
      hashes.push(hashLeaf(body.subarray(pos + 2, pos + 2 + len)));
      pos += 2 + len;
    }
    if (hashes.length !== width) throw new Error(`${path}: ${hashes.length} entries, expected ${width}`);
    return hashes;
  }

  /**
   * MTH(D[start : start + 2^k]) for an aligned perfect subtree of a tree of `size` leaves. The
   * spec's tile n of level l holds MTH(D[(n·256 + i)·256^l : (n·256 + i + 1)·256^l]); the
   * subtree is 2^r of those hashes, with l = floor(k/8), which the tile's width at this tree
   * size (a full tile, or the right edge's partial one) always covers.
   */
  async #perfect(start: number, k: number, size: number): Promise<Buffer> {
    const l = Math.floor(k / 8);
    const span = 256 ** l; // leaves under one hash of a level-l tile
    const count = 2 ** (k - 8 * l);
    const first = start / span; // index among the level-l hashes
    if (!Number.isInteger(first)) throw new Error(`subtree at ${start} of 2^${k} is not aligned`);
    const n = Math.floor(first / WIDTH);
    const hashesAtLevel = Math.floor(size / span);
    const width = Math.min(WIDTH, hashesAtLevel - n * WIDTH);
    const tile = await this.readTile(l, n, width);
    const hashes: Buffer[] = [];
    for (let i = first - n * WIDTH; i < first - n * WIDTH + count; i++) {
      if ((i + 1) * HASH > tile.length) throw new Error(`tile ${l}/${n} is too short for the subtree at ${start}`);
      hashes.push(tile.subarray(i * HASH, (i + 1) * HASH));
    }
    while (hashes.length > 1) {
      const next: Buffer[] = [];
      for (let i = 0; i < hashes.length; i += 2) next.push(hashChildren(hashes[i]!, hashes[i + 1]!));
      hashes.splice(0, hashes.length, ...next);
    }
    return hashes[0]!;
  }

  /** RFC 6962 MTH(D[start : start + n]) in a tree of `size` leaves: the recursive definition, its perfect subtrees read from tiles. */
  async #mth(start: number, n: number, size: number): Promise<Buffer> {
    let k = 0;
    while (2 ** k < n) k++;
    if (2 ** k === n) return this.#perfect(start, k, size);
    const split = largestPowerBelow(n);
    return hashChildren(await this.#mth(start, split, size), await this.#mth(start + split, n - split, size));
  }

  /** The root of the tree of `size` leaves; only the right edge's tiles are read. */
  async rootFromTiles(size: number): Promise<Buffer> {
    if (size === 0) return sha256();
    return this.#mth(0, size, size);
  }

  /** RFC 6962 §2.1.1 PATH(m, D[n]), leaf side first. */
  async inclusionProofFromTiles(leafIndex: number, size: number): Promise<Buffer[]> {
    if (!(leafIndex >= 0 && leafIndex < size)) throw new RangeError(`leaf ${leafIndex} is not in a tree of ${size}`);
    const path = async (m: number, start: number, n: number): Promise<Buffer[]> => {
      if (n === 1) return [];
      const k = largestPowerBelow(n);
      if (m < k) return [...(await path(m, start, k)), await this.#mth(start + k, n - k, size)];
      return [...(await path(m - k, start + k, n - k)), await this.#mth(start, k, size)];
    };
    return path(leafIndex, 0, size);
  }
}
