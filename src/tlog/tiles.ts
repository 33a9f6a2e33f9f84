// The audit tree stored and served as C2SP tlog-tiles (c2sp.org/tlog-tiles): 256 consecutive
// hashes of one tree level per tile, tile level L holding tree level 8·L. A tile never changes
// once written (a growing right-edge tile is written again under a new width), so tiles can be
// append-only rows and long-cached files, and any outside client can rebuild roots and proofs
// from them. Pure: the store that keeps the tiles stays outside, as for merkle.ts, whose
// hashing and proofs this module feeds (through a NodeSource) rather than repeats.
//
// Sizes and indexes are JS numbers up to 2^53 - 1, so all index arithmetic is done with
// division and multiplication: the bitwise operators would silently truncate to 32 bits.
import { EMPTY_ROOT, nodeHash, type Hash, type NodeKey, type NodeSource } from './merkle.js';

export const TILE_HEIGHT = 8;
export const TILE_WIDTH = 256; // 2^TILE_HEIGHT
export const HASH_BYTES = 32;
/** The spec's bound on <L>; 256^64 leaves is far beyond 2^53 anyway. */
export const MAX_TILE_LEVEL = 63;
/** An entry bundle's length prefix is a uint16. */
export const MAX_ENTRY_BYTES = 65_535;

const TILE_BYTES = TILE_WIDTH * HASH_BYTES;
const PATH_BASE = 1000;
// 2^53 - 1 has 16 digits, six 3-digit groups: a seventh group can only spell a larger number.
const MAX_PATH_GROUPS = 6;

export type TileLevel = number | 'entries';

export interface TileCoord {
  level: number;
  index: number;
  width: number;
}

function checkInteger(name: string, n: number, min = 0, max = Number.MAX_SAFE_INTEGER): void {
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${n}`);
}

function checkLevel(level: number): void {
  checkInteger('tile level', level, 0, MAX_TILE_LEVEL);
}

/** Entries of tree level 8·L ever completed by a tree of `size` leaves: floor(size / 256^L), exact (a power-of-two divisor). */
function entriesAtLevel(size: number, level: number): number {
  return Math.floor(size / TILE_WIDTH ** level);
}

// ---------------------------------------------------------------------------------------------
// Paths

/**
 * <N> of a tile path: three digits per path element, all but the last prefixed with "x", so
 * that no directory holds more than about 3000 names and no name is both a file and a folder.
 */
export function formatTileIndex(n: number): string {
  checkInteger('tile index', n);
  let out = String(n % PATH_BASE).padStart(3, '0');
  for (let rest = Math.floor(n / PATH_BASE); rest > 0; rest = Math.floor(rest / PATH_BASE)) {
    out = `x${String(rest % PATH_BASE).padStart(3, '0')}/${out}`;
  }
  return out;
}

/**
 * The inverse of formatTileIndex, refusing every other spelling of a number ("x000/005",
 * "5", "x05/003"): two paths for one tile would be two cache entries, or two rows, that can
 * disagree.
 */
export function parseTileIndex(path: string): number | undefined {
  const groups = path.split('/');
  if (groups.length > MAX_PATH_GROUPS) return undefined;
  let n = 0;
  for (let i = 0; i < groups.length; i++) {
    const g = groups[i]!;
    const digits = i < groups.length - 1 ? /^x(\d{3})$/.exec(g)?.[1] : /^\d{3}$/.exec(g)?.[0];
    if (digits === undefined) return undefined;
    n = n * PATH_BASE + Number(digits);
  }
  // Past 2^53 the sum above rounds, always to a value that is not a safe integer.
  if (!Number.isSafeInteger(n)) return undefined;
  return formatTileIndex(n) === path ? n : undefined;
}

/** tile/<L>/<N>[.p/<W>], or tile/entries/<N>[.p/<W>] for an entry bundle; the width is in hashes (entries), not bytes. */
export function tilePath(level: TileLevel, index: number, width = TILE_WIDTH): string {
  if (level !== 'entries') checkLevel(level);
  checkInteger('tile width', width, 1, TILE_WIDTH);
  const partial = width === TILE_WIDTH ? '' : `.p/${width}`;
  return `tile/${level}/${formatTileIndex(index)}${partial}`;
}

const TILE_PATH = /^tile\/(entries|0|[1-9]\d?)\/(.+?)(?:\.p\/([1-9]\d{0,2}))?$/;

/** What tilePath writes, and nothing else: no leading zeros, no ".p/256" (a full tile has no suffix), no level above 63. */
export function parseTilePath(path: string): { level: TileLevel; index: number; width: number } | undefined {
  const m = TILE_PATH.exec(path);
  if (!m) return undefined;
  const level: TileLevel = m[1] === 'entries' ? 'entries' : Number(m[1]);
  if (level !== 'entries' && level > MAX_TILE_LEVEL) return undefined;
  const index = parseTileIndex(m[2]!);
  if (index === undefined) return undefined;
  if (m[3] === undefined) return { level, index, width: TILE_WIDTH };
  const width = Number(m[3]);
  return width < TILE_WIDTH ? { level, index, width } : undefined;
}

// ---------------------------------------------------------------------------------------------
// Which tiles a tree has

/** Entries tile (level, index) holds in a tree of `size` leaves: 0 if it does not exist yet, 256 once full. */
export function tileWidthAt(size: number, level: number, index: number): number {
  checkInteger('size', size);
  checkLevel(level);
  checkInteger('tile index', index);
  const have = entriesAtLevel(size, level) - index * TILE_WIDTH;
  return have <= 0 ? 0 : Math.min(have, TILE_WIDTH);
}

/**
 * The last tile of each level of a tree of `size` leaves, lowest level first. Their prefixes
 * hold every complete subtree on the tree's right edge (the bits of the size, eight per
 * level), so they alone determine the root. A level whose last tile just filled shows width 0
 * (the spec forbids serving an empty tile) but stays listed, so that the result is indexed by
 * level: a tree of 256 leaves is a full level-0 tile and a level-1 tile of width 1.
 */
export function rightEdgeWidths(size: number): TileCoord[] {
  checkInteger('size', size);
  const out: TileCoord[] = [];
  for (let level = 0; ; level++) {
    const n = entriesAtLevel(size, level);
    if (n === 0) return out;
    out.push({ level, index: Math.floor(n / TILE_WIDTH), width: n % TILE_WIDTH });
  }
}

export const tileKey = (level: number, index: number): string => `${level}/${index}`;

/**
 * Where node (ℓ, i) is computed from: tile level floor(ℓ/8) holds tree level 8·floor(ℓ/8), and
 * the node is the MTH of 2^r consecutive entries there (r = ℓ mod 8), never of a whole tile: a
 * node at level 8·(L+1) is read as one entry of the tile above, which is what makes a tree of
 * 256 leaves need the level-1 tile and not the level-0 one.
 */
function locate(key: NodeKey): { level: number; index: number; offset: number; count: number } {
  checkInteger('node level', key.level, 0, (MAX_TILE_LEVEL + 1) * TILE_HEIGHT - 1);
  checkInteger('node index', key.index);
  const level = Math.floor(key.level / TILE_HEIGHT);
  const count = 2 ** (key.level - level * TILE_HEIGHT);
  const first = key.index * count;
  const index = Math.floor(first / TILE_WIDTH);
  return { level, index, offset: first - index * TILE_WIDTH, count };
}

/**
 * The tiles holding the given nodes, each with the least width that has them all: the caller
 * reads any stored width at least that large (tile rows are prefixes of one another), so one
 * query fetches what a rootHash or a proof over these keys will read.
 */
export function tilesForNodes(keys: NodeKey[]): TileCoord[] {
  const tiles = new Map<string, TileCoord>();
  for (const key of keys) {
    const { level, index, offset, count } = locate(key);
    const width = offset + count;
    const k = tileKey(level, index);
    const seen = tiles.get(k);
    if (!seen) tiles.set(k, { level, index, width });
    else if (seen.width < width) seen.width = width;
  }
  return [...tiles.values()];
}

// ---------------------------------------------------------------------------------------------
// Hashing inside tiles

/** The largest power of two strictly below n (n ≥ 2): RFC 6962's split point k. */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** MTH of entries [start, start + count): a view, not a copy, for one entry (nodeHash copies its inputs). */
function mth(hashes: Buffer, start: number, count: number): Hash {
  if (count === 1) return hashes.subarray(start * HASH_BYTES, (start + 1) * HASH_BYTES);
  const k = splitPoint(count);
  return nodeHash(mth(hashes, start, k), mth(hashes, start + k, count - k));
}

/** RFC 6962 MTH of `count` consecutive 32-byte hashes of `hashes` from entry `start`, taken as the leaves' hashes. */
export function subtreeHash(hashes: Buffer, start: number, count: number): Hash {
  checkInteger('start', start);
  checkInteger('count', count, 1);
  if ((start + count) * HASH_BYTES > hashes.length) {
    throw new RangeError(`entries [${start}, ${start + count}) are beyond the ${Math.floor(hashes.length / HASH_BYTES)} given`);
  }
  const h = mth(hashes, start, count);
  return count === 1 ? Buffer.from(h) : h;
}

/** The level-8·(L+1) node a full tile of level L stands for: its entry in the tile above. */
export function tileRoot(hashes: Buffer): Hash {
  if (hashes.length !== TILE_BYTES) throw new RangeError(`a full tile is ${TILE_BYTES} bytes, got ${hashes.length}`);
  return mth(hashes, 0, TILE_WIDTH);
}

/**
 * A merkle.ts NodeSource over tiles fetched beforehand (tilesForNodes says which), so that
 * rootHash, inclusionProof and consistencyProof work unchanged on a tiled store. A missing or
 * short tile is a broken store, never silently zero.
 */
export function tileNodeSource(tiles: Map<string, Buffer>, keyOf: (level: number, index: number) => string = tileKey): NodeSource {
  return (key: NodeKey): Hash => {
    const { level, index, offset, count } = locate(key);
    const tile = tiles.get(keyOf(level, index));
    if (!tile) throw new Error(`audit tree tile ${tilePath(level, index)} is missing (node ${key.level}:${key.index})`);
    const need = offset + count;
    if (tile.length < need * HASH_BYTES) {
      throw new Error(
        `audit tree tile ${tilePath(level, index)} is too short: ${Math.floor(tile.length / HASH_BYTES)} entries, node ${key.level}:${key.index} needs ${need}`,
      );
    }
    return subtreeHash(tile, offset, count);
  };
}

// ---------------------------------------------------------------------------------------------
// The right edge

interface EdgeLevel {
  /** Room for a full tile, so appending never reallocates. */
  buf: Buffer;
  count: number;
}

const isHash = (h: unknown): h is Hash => Buffer.isBuffer(h) && h.length === HASH_BYTES;

/**
 * The last tile of every level, in memory: all a sealer needs to append leaves, to know which
 * tiles each append completed and which partial tiles a checkpoint needs stored, and to compute
 * the root, in O(log n) state (at most 255 hashes per level). The same state rightEdgeWidths
 * describes, so fromTiles rebuilds it from the store after a restart or a change of sealer.
 */
export class RightEdge {
  #size: number;
  readonly #levels: EdgeLevel[] = [];

  /** partials[L]: the entries of level L's last tile at `size`, exactly rightEdgeWidths(size)[L].width of them. */
  constructor(size = 0, partials: Buffer[] = []) {
    checkInteger('size', size);
    const widths = rightEdgeWidths(size);
    if (partials.length !== widths.length) {
      throw new RangeError(`a tree of size ${size} has ${widths.length} tile levels, got ${partials.length} partial tiles`);
    }
    for (const { level, width } of widths) {
      const p = partials[level];
      if (!Buffer.isBuffer(p) || p.length !== width * HASH_BYTES) {
        throw new RangeError(`level ${level}'s last tile at size ${size} has ${width} entries (${width * HASH_BYTES} bytes), got ${Buffer.isBuffer(p) ? p.length : typeof p} bytes`);
      }
      const buf = Buffer.alloc(TILE_BYTES);
      p.copy(buf);
      this.#levels.push({ buf, count: width });
    }
    this.#size = size;
  }

  /** Builds the edge from stored tile prefixes: read(level, index, width) returns at least `width` entries, of which the first `width` are used. */
  static fromTiles(size: number, read: (level: number, index: number, width: number) => Buffer): RightEdge {
    const partials = rightEdgeWidths(size).map(({ level, index, width }) => {
      if (width === 0) return Buffer.alloc(0); // never stored: empty tiles are not served
      const tile = read(level, index, width);
      if (!Buffer.isBuffer(tile) || tile.length < width * HASH_BYTES) {
        throw new RangeError(`tile ${tilePath(level, index, width)} read back with ${Buffer.isBuffer(tile) ? tile.length : 0} bytes, needs ${width * HASH_BYTES}`);
      }
      return tile.subarray(0, width * HASH_BYTES);
    });
    return new RightEdge(size, partials);
  }

  get size(): number {
    return this.#size;
  }

  /** Tile levels the tree has (rightEdgeWidths(size).length); 0 for the empty tree. */
  levels(): number {
    return this.#levels.length;
  }

  /** A copy of level `level`'s last tile; empty above the top level. */
  partial(level: number): Buffer {
    checkLevel(level);
    const l = this.#levels[level];
    return l ? Buffer.from(l.buf.subarray(0, l.count * HASH_BYTES)) : Buffer.alloc(0);
  }

  /**
   * Adds one leaf hash. Returns the tiles it filled, lowest level first: a leaf that fills a
   * level-0 tile pushes that tile's root into level 1, which may fill in turn. Each is final
   * and is stored once; the level it came from restarts empty.
   */
  append(leaf: Hash): { full: Array<{ level: number; index: number; hashes: Buffer }> } {
    if (!isHash(leaf)) throw new TypeError('a leaf hash must be a 32-byte Buffer');
    if (this.#size >= Number.MAX_SAFE_INTEGER) throw new RangeError('the tree is full');
    const before = this.#size;
    const full: Array<{ level: number; index: number; hashes: Buffer }> = [];
    let hash = leaf;
    for (let level = 0; ; level++) {
      let l = this.#levels[level];
      if (!l) {
        l = { buf: Buffer.alloc(TILE_BYTES), count: 0 };
        this.#levels.push(l);
      }
      hash.copy(l.buf, l.count * HASH_BYTES);
      l.count += 1;
      if (l.count < TILE_WIDTH) break;
      const hashes = Buffer.from(l.buf);
      full.push({ level, index: entriesAtLevel(before, level + 1), hashes });
      hash = tileRoot(hashes);
      l.count = 0;
    }
    this.#size = before + 1;
    return { full };
  }

  /**
   * The partial tiles, of levels ≥ fromLevel, that differ from those at the earlier size
   * `since` (a checkpoint's): what a sealer stores, as rows keyed (level, index, width), after
   * appending a batch, so that every checkpoint's right edge can be served. Together with the
   * `full` tiles append returned, they are every tile of those levels that the batch created.
   * A level's last tile is (floor(n/256), n mod 256) with n = floor(size/256^L), so it changed
   * exactly when n did; a level whose tile just filled (width 0) has nothing to store.
   * fromLevel is 1 by default because level-0 entries are the leaf hashes, which the seal rows
   * hold already; pass 0 for a store that keeps level 0 as tiles too.
   */
  changedSince(since: number, fromLevel = 1): Array<TileCoord & { hashes: Buffer }> {
    checkInteger('since', since, 0, this.#size);
    checkLevel(fromLevel);
    const out: Array<TileCoord & { hashes: Buffer }> = [];
    for (let level = fromLevel; level < this.#levels.length; level++) {
      const n = entriesAtLevel(this.#size, level);
      const width = this.#levels[level]!.count;
      if (n === entriesAtLevel(since, level) || width === 0) continue;
      out.push({ level, index: Math.floor(n / TILE_WIDTH), width, hashes: this.partial(level) });
    }
    return out;
  }

  /**
   * RFC 6962 root of the current size. The right edge's complete subtrees sit in the partial
   * tiles, highest level first and largest first within a level (the bits of each width), and
   * fold from the right as RFC 6962's split at the largest power of two does. Hashing each
   * level's prefix on its own and folding those would group them differently: a wrong root.
   */
  root(): Hash {
    const pieces: Hash[] = [];
    for (let level = this.#levels.length - 1; level >= 0; level--) {
      const { buf, count } = this.#levels[level]!;
      let start = 0;
      for (let p = TILE_WIDTH / 2; p >= 1; p /= 2) {
        if (count - start >= p) {
          pieces.push(mth(buf, start, p));
          start += p;
        }
      }
    }
    if (pieces.length === 0) return EMPTY_ROOT;
    let h = pieces[pieces.length - 1]!;
    for (let i = pieces.length - 2; i >= 0; i--) h = nodeHash(pieces[i]!, h);
    return Buffer.from(h); // a single piece would be a view of the edge's own buffer
  }
}

// ---------------------------------------------------------------------------------------------
// Entry bundles

/** tile/entries/<N>: each entry as a big-endian uint16 length and its bytes; at most one tile's worth (256). */
export function encodeEntryBundle(entries: Uint8Array[]): Buffer {
  if (entries.length > TILE_WIDTH) throw new RangeError(`an entry bundle holds at most ${TILE_WIDTH} entries, got ${entries.length}`);
  let total = 0;
  entries.forEach((e, i) => {
    if (e.length > MAX_ENTRY_BYTES) throw new RangeError(`entry ${i} is ${e.length} bytes; an entry bundle's entries are at most ${MAX_ENTRY_BYTES}`);
    total += 2 + e.length;
  });
  const out = Buffer.allocUnsafe(total);
  let pos = 0;
  for (const e of entries) {
    out.writeUInt16BE(e.length, pos);
    out.set(e, pos + 2);
    pos += 2 + e.length;
  }
  return out;
}

/** The entries of a bundle, as copies (they outlive the fetched body); a cut or padded bundle is refused, not read as far as it goes. */
export function decodeEntryBundle(buf: Uint8Array): Buffer[] {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: Buffer[] = [];
  let pos = 0;
  while (pos < b.length) {
    if (out.length === TILE_WIDTH) throw new Error(`entry bundle has ${b.length - pos} bytes after its ${TILE_WIDTH}th entry`);
    if (pos + 2 > b.length) throw new Error(`entry bundle is truncated: entry ${out.length} has half a length prefix`);
    const len = b.readUInt16BE(pos);
    if (pos + 2 + len > b.length) throw new Error(`entry bundle is truncated: entry ${out.length} declares ${len} bytes, ${b.length - pos - 2} remain`);
    out.push(Buffer.from(b.subarray(pos + 2, pos + 2 + len)));
    pos += 2 + len;
  }
  return out;
}
