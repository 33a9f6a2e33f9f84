// The tree the sealer extends and the checkpointer signs, held in memory and never taken from
// the database on trust (docs/architecture.md: never trust a row you can recompute). It is loaded
// from the newest checkpoint, which must verify under a key trusted from outside the database:
// the stored tiles of its right edge must reproduce its signed root. Records sealed after it
// (by this instance or another) are taken from their records, their leaves recomputed and
// compared with the seal's. Anything that does not hold stops the sealer and the checkpointer
// (TreeUnverifiable), so that a tampered tree is never extended and never signed over.
import type { Queryable } from '../../../db/database.js';
import { checkCheckpoint } from '../../../tlog/checkpoint-check.js';
import { latestCheckpoint, sealedRowsFrom } from './evidence.repository.js';
import type { LogIdentity } from './log.identity.js';
import { sealingLeaf } from './record.sealed-form.js';
import { MissingTile, storedEdge } from './tile.store.js';
import { RightEdge } from '../../../tlog/tiles.js';

/** Why the stored evidence cannot be built on, and the first record it concerns, if one. */
export class TreeUnverifiable extends Error {
  constructor(
    message: string,
    readonly recordId?: number,
  ) {
    super(message);
    this.name = 'TreeUnverifiable';
  }
}

const READ = 2000;

/** A copy that appends independently (a batch is built on a copy, adopted once it commits). */
export function copyEdge(edge: RightEdge): RightEdge {
  return new RightEdge(edge.size, Array.from({ length: edge.levels() }, (_, level) => edge.partial(level)));
}

export class VerifiedTree {
  private edge: RightEdge | undefined;

  constructor(private readonly identity: LogIdentity) {}

  /** The verified tree of `size` sealed records (read through `q`); throws TreeUnverifiable. */
  async at(q: Queryable, size: number): Promise<RightEdge> {
    const known = this.edge;
    if (known && known.size === size) return known;
    const edge = known && known.size < size ? copyEdge(known) : await this.anchored(q, size);
    await this.extend(q, edge, size);
    this.edge = edge;
    return edge;
  }

  /** Takes a tree this process built from verified state and committed. */
  adopt(edge: RightEdge): void {
    this.edge = edge;
  }

  /** Forgets what it holds: the next `at` loads and verifies again. */
  forget(): void {
    this.edge = undefined;
  }

  /** The stored right edge at the newest checkpoint, checked against its signed root (none yet: the empty tree). */
  private async anchored(q: Queryable, size: number): Promise<RightEdge> {
    const checkpoint = await latestCheckpoint(q);
    if (!checkpoint) return new RightEdge();
    const verdict = checkCheckpoint(checkpoint.note, this.identity.trusted, { treeSize: checkpoint.tree_size, rootHash: Buffer.from(checkpoint.root_hash) });
    if (!verdict.ok) {
      throw new TreeUnverifiable(
        `the newest checkpoint (${checkpoint.id}) does not verify under a trusted key (${verdict.problem}): tampering, or a key rotation without AUDIT_PREVIOUS_VERIFIER_KEYS`,
      );
    }
    if (checkpoint.tree_size > size) throw new TreeUnverifiable(`checkpoint ${checkpoint.id} covers ${checkpoint.tree_size} records, but only ${size} are sealed: the seal was truncated`);
    let edge: RightEdge;
    try {
      edge = await storedEdge(q, checkpoint.tree_size);
    } catch (err) {
      if (err instanceof MissingTile) throw new TreeUnverifiable(err.message);
      throw err;
    }
    if (!edge.root().equals(checkpoint.root_hash)) {
      throw new TreeUnverifiable(`the stored tiles of the tree's right edge do not reproduce the root of checkpoint ${checkpoint.id} (tree size ${checkpoint.tree_size}): the stored tree was changed`);
    }
    return edge;
  }

  /** Appends the records sealed from edge.size to `size`, each leaf recomputed from its record and held to the seal's. */
  private async extend(q: Queryable, edge: RightEdge, size: number): Promise<void> {
    while (edge.size < size) {
      const rows = await sealedRowsFrom(q, edge.size, Math.min(READ, size - edge.size));
      if (rows.length === 0) throw new TreeUnverifiable(`the seal ends at ${edge.size}, short of the ${size} records it claims`);
      for (const row of rows) {
        if (row.seq !== edge.size) throw new TreeUnverifiable(`the seal jumps from seq ${edge.size - 1} to ${row.seq}`, row.record_id);
        if (!row.present) throw new TreeUnverifiable(`sealed record ${row.record_id} (seq ${row.seq}) no longer exists`, row.record_id);
        const { leaf } = sealingLeaf(row);
        if (!leaf.equals(row.leaf_hash)) throw new TreeUnverifiable(`record ${row.record_id} no longer matches its seal (seq ${row.seq})`, row.record_id);
        edge.append(leaf);
      }
    }
  }
}
