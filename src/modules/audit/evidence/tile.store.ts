// The stored tree, read as C2SP tlog-tiles (tiles.ts): full tiles and the partial tiles of
// levels 1 and up from audit_tiles, and level 0 beyond its last full tile from the seal's
// batches (their leaves). What is read here is evidence, not trusted state: the sealer checks it
// against a signed root before building on it, proofs are checked before they are served, and
// verification recomputes every tile from the records.
import type { Queryable } from '../../../db/database.js';
import { leavesBetween, storedTiles } from './evidence.repository.js';
import type { NodeKey, NodeSource } from '../../../tlog/merkle.js';
import { asHash } from '../../../tlog/merkle.js';
import { HASH_BYTES, RightEdge, TILE_WIDTH, rightEdgeWidths, tileKey, tileNodeSource, tilesForNodes, type TileCoord } from '../../../tlog/tiles.js';

/**
 * The tiles asked for, each holding at least its width's hashes, keyed tileKey(level, index);
 * a tile the store does not hold that far is absent.
 */
export async function readTiles(q: Queryable, wanted: TileCoord[]): Promise<Map<string, Buffer>> {
  const needed = wanted.filter((w) => w.width > 0);
  const stored = await storedTiles(q, needed);
  const tiles = new Map<string, Buffer>();
  for (const w of needed) {
    const key = tileKey(w.level, w.index);
    const row = stored.get(key);
    if (row) {
      tiles.set(key, asHash(row.hashes));
      continue;
    }
    if (w.level !== 0) continue;
    // Level 0 past its full tiles: the leaves, from the batches that hold them.
    const from = w.index * TILE_WIDTH;
    const leaves = await leavesBetween(q, from, from + w.width);
    if (leaves.length === w.width && leaves.every((l, i) => l.seq === from + i)) tiles.set(key, Buffer.concat(leaves.map((l) => l.leaf)));
  }
  return tiles;
}

/** One tile's first `width` hashes, or undefined when the store does not hold them. */
export async function readTile(q: Queryable, level: number, index: number, width: number): Promise<Buffer | undefined> {
  const tile = (await readTiles(q, [{ level, index, width }])).get(tileKey(level, index));
  return tile && tile.length >= width * HASH_BYTES ? tile.subarray(0, width * HASH_BYTES) : undefined;
}

/** Thrown when the store lacks a tile that a tree of its sealed size must have. */
export class MissingTile extends Error {}

/** The right edge of the stored tree at `size` (as stored: the caller checks its root). */
export async function storedEdge(q: Queryable, size: number): Promise<RightEdge> {
  const widths = rightEdgeWidths(size);
  const tiles = await readTiles(q, widths);
  return RightEdge.fromTiles(size, (level, index, width) => {
    const tile = tiles.get(tileKey(level, index));
    if (!tile || tile.length < width * HASH_BYTES) throw new MissingTile(`the stored tree lacks tile ${level}/${index} (width ${width}) of a tree of ${size} records`);
    return tile;
  });
}

/** A node source over the stored tiles that the given nodes need (read in one go). */
export async function storedNodes(q: Queryable, keys: NodeKey[]): Promise<NodeSource> {
  return tileNodeSource(await readTiles(q, tilesForNodes(keys)));
}
