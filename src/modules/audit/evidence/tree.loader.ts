// The tree the sealer extends and the checkpointer signs, held in memory and never taken from
// the database on trust (docs/architecture.md: never trust a row you can recompute). It is loaded
// from the newest checkpoint, which must verify under a key trusted from outside the database:
// the stored tiles of its right edge must reproduce its signed root. Records sealed after it
// (by this instance or another) are taken from their records, their leaves recomputed and
// compared with the seal's. The newest checkpoint is checked against the one before it (its
// `prev` names it, the tree never shrinks, one root a size) and against the newest this process
// has seen or signed (a newest row deleted leaves an older one newest): a replayed or removed
// checkpoint is never chained onto. Anything that does not hold stops the sealer and the
// checkpointer (TreeUnverifiable), so that a tampered tree is never extended and never signed over.
import type { Queryable } from '../../../db/database.js';
import { checkCheckpoint } from '../../../tlog/checkpoint-check.js';
import { newestTwoCheckpoints, sealedRowsFrom, type CheckpointRow } from './evidence.repository.js';
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
  /**
   * The largest tree this process has seen signed (checked, or signed itself). Kept across
   * forget(): only a checkpoint as large may be newest from then on. A restart forgets it;
   * witnesses remember for longer (docs/audit-integrity.md).
   */
  private seen: { treeSize: number; checkpointId?: number } | undefined;

  constructor(private readonly identity: LogIdentity) {}

  /**
   * The newest checkpoint, once it has been checked: signed by a trusted key and saying what its
   * row says, naming the checkpoint before it as its `prev` (none for the first), no smaller than
   * that one (and with its root at the same size), and no smaller than the largest this process
   * has seen signed. Throws TreeUnverifiable.
   */
  async head(q: Queryable): Promise<CheckpointRow | undefined> {
    const [newest, before] = await newestTwoCheckpoints(q);
    const seen = this.seen;
    if (!newest) {
      if (seen) throw new TreeUnverifiable(`every checkpoint is gone, where this instance saw tree size ${seen.treeSize} signed: the checkpoints were deleted`);
      return undefined;
    }
    const claim = { treeSize: newest.tree_size, rootHash: Buffer.from(newest.root_hash), signature: Buffer.from(newest.signature) };
    const signed = checkCheckpoint(newest.note, this.identity.trusted, claim);
    if (!signed.ok) {
      throw new TreeUnverifiable(
        `the newest checkpoint (${newest.id}) does not verify under a trusted key (${signed.problem}): tampering, or a key rotation without AUDIT_PREVIOUS_VERIFIER_KEYS`,
      );
    }
    const chained = checkCheckpoint(newest.note, this.identity.trusted, { previousNote: before?.note ?? null });
    if (!chained.ok) throw new TreeUnverifiable(`the newest checkpoint (${newest.id}) does not extend the one before it: ${chained.problem} (a replayed or reordered checkpoint row)`);
    if (before && newest.tree_size < before.tree_size) {
      throw new TreeUnverifiable(`the newest checkpoint (${newest.id}) says tree size ${newest.tree_size} after ${before.tree_size}: the tree never shrinks (a replayed checkpoint row)`);
    }
    if (before && newest.tree_size === before.tree_size && !Buffer.from(newest.root_hash).equals(before.root_hash)) {
      throw new TreeUnverifiable(`checkpoints ${before.id} and ${newest.id} sign two roots for tree size ${newest.tree_size}`);
    }
    if (seen && newest.tree_size < seen.treeSize) {
      throw new TreeUnverifiable(
        `the newest checkpoint (${newest.id}) covers ${newest.tree_size} records, where this instance saw ${seen.treeSize} signed${seen.checkpointId ? ` (checkpoint ${seen.checkpointId})` : ''}: newer checkpoints were deleted`,
      );
    }
    if (!seen || newest.tree_size > seen.treeSize) this.seen = { treeSize: newest.tree_size, checkpointId: newest.id };
    return newest;
  }

  /** This process signed a checkpoint of `treeSize` records, and it committed. */
  signed(treeSize: number): void {
    if (!this.seen || treeSize > this.seen.treeSize) this.seen = { treeSize };
  }

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

  /** The stored right edge at the newest checkpoint (head), checked against its signed root (none yet: the empty tree). */
  private async anchored(q: Queryable, size: number): Promise<RightEdge> {
    const checkpoint = await this.head(q);
    if (!checkpoint) return new RightEdge();
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
