// The stored tree held to the one a verification rebuilds from the records (log.verifier.ts):
// stored tiles are evidence, never trusted state, so each is compared with the tile the records
// make as the rebuild completes it, and at the end nothing may be stored beyond the tree's edge.
import type { Queryable } from '../../../db/database.js';
import { rightEdgeWidths, tilePath, type RightEdge } from '../../../tlog/tiles.js';
import { badPartialTile, edgeTileStored, fullTilesFrom, tileBeyond, type TileRow } from './evidence.repository.js';

/** A stored tile that is not the tile the records make: the report's problem and the tile's path (tlog-tiles). */
export interface BadTile {
  problem: string;
  first_bad_tile: string;
}

/**
 * The stored tiles, held to the ones the records make as the rebuild completes them: each full
 * tile against the stored one of its place (read a page at a time, per level), each stored
 * partial tile of that place against its prefix, and at the end the tree's edge.
 */
export class StoredTiles {
  private readonly pages = new Map<number, { rows: TileRow[]; at: number; next: number; done: boolean }>();

  constructor(
    private readonly db: Queryable,
    private readonly pageSize: number,
  ) {}

  async check(full: Array<{ level: number; index: number; hashes: Buffer }>): Promise<BadTile | undefined> {
    for (const tile of full) {
      const stored = await this.nextFull(tile.level);
      const path = tilePath(tile.level, tile.index);
      if (!stored || stored.idx !== tile.index) return { problem: `the stored tree lacks full tile ${path}, which the records fill`, first_bad_tile: path };
      if (!Buffer.from(stored.hashes).equals(tile.hashes)) return { problem: `stored tile ${path} is not the tile the records make: the stored tree was changed`, first_bad_tile: path };
      if (tile.level > 0) {
        const width = await badPartialTile(this.db, tile.level, tile.index, tile.hashes);
        if (width !== undefined) return this.badPartial(tile.level, tile.index, width);
      }
    }
    return undefined;
  }

  /**
   * The tree's edge: each level's last tile is stored at its width (level 0's is the seal's own
   * leaves), its stored narrower widths are prefixes of it, and nothing is stored beyond it.
   */
  async checkEdge(edge: RightEdge): Promise<BadTile | undefined> {
    const widths = rightEdgeWidths(edge.size);
    for (let level = 0; level <= widths.length; level++) {
      const at = widths[level] ?? { level, index: 0, width: 0 };
      if (level > 0 && at.width > 0) {
        const width = await badPartialTile(this.db, level, at.index, edge.partial(level));
        if (width !== undefined) return this.badPartial(level, at.index, width);
        if (!(await edgeTileStored(this.db, level, at.index, at.width))) {
          const path = tilePath(level, at.index, at.width);
          return { problem: `the stored tree lacks tile ${path} at its right edge: the stored tree was changed (proofs through it are refused)`, first_bad_tile: path };
        }
      }
      const beyond = await tileBeyond(this.db, level, at.index, at.width);
      if (beyond) {
        const path = tilePath(beyond.level, beyond.idx, beyond.width);
        return { problem: `stored tile ${path} lies beyond the ${edge.size} sealed records: the seal was cut short, or the tile was added`, first_bad_tile: path };
      }
    }
    return undefined;
  }

  private badPartial(level: number, index: number, width: number): BadTile {
    const path = tilePath(level, index, width);
    return { problem: `stored tile ${path} is not the tile the records make: the stored tree was changed`, first_bad_tile: path };
  }

  private async nextFull(level: number): Promise<TileRow | undefined> {
    let page = this.pages.get(level);
    if (!page) this.pages.set(level, (page = { rows: [], at: 0, next: 0, done: false }));
    if (page.at >= page.rows.length && !page.done) {
      page.rows = await fullTilesFrom(this.db, level, page.next, this.pageSize);
      page.at = 0;
      page.done = page.rows.length < this.pageSize;
      if (page.rows.length > 0) page.next = page.rows[page.rows.length - 1]!.idx + 1;
    }
    return page.rows[page.at++];
  }
}
