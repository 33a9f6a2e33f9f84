// The signed checkpoints, held to the tree a verification rebuilds from the records
// (log.verifier.ts): each, once the tree reaches its size, must be signed by a registered key,
// chained to the one before and on the root the records make; at the end none may lie beyond
// the seal, and the newest must be signed by a trusted key.
import type { Queryable } from '../../../db/database.js';
import { checkCheckpoint } from '../../../tlog/checkpoint-check.js';
import type { NoteVerifier } from '../../../tlog/signed-note.js';
import type { RightEdge } from '../../../tlog/tiles.js';
import { checkpointsAfter, type CheckpointRow } from './evidence.repository.js';

const CHECKPOINT_PAGE = 1000;

/** A checkpoint the records do not bear out: the report's problem and the record it names. */
export interface BadCheckpoint {
  problem: string;
  /** The first record sealed since the last checkpoint that matched: where a resealed change can start. */
  first_bad_id: number | undefined;
}

/**
 * The checkpoints up to the newest one when the run began, in id order, as the rebuilt tree
 * passes them. The next one is awaited only once one is passed: not a promise per record.
 */
export class CheckpointChain {
  /** Checkpoints that matched the tree. */
  checked = 0;
  private readonly stream: ReturnType<typeof checkpointStream>;
  private upcoming: CheckpointRow | undefined;
  /** The last checkpoint that matched: the next one must chain to its note, and the trusted key must have signed it. */
  private newest: CheckpointRow | undefined;
  /** The first record sealed after the last checkpoint that matched. */
  private firstSince: number | undefined;

  constructor(
    db: Queryable,
    upTo: number,
    private readonly keys: ReadonlyMap<string, NoteVerifier>,
    private readonly origin: string,
  ) {
    this.stream = checkpointStream(db, upTo);
  }

  /** Reads the first checkpoint. */
  async start(): Promise<void> {
    this.upcoming = await this.stream.peek();
  }

  /** A record the tree was just built from, checked. */
  sealed(id: number): void {
    this.firstSince ??= id;
  }

  /** Whether the tree, at this size, has reached the next checkpoint: then pass() checks it. */
  reached(size: number): boolean {
    return this.upcoming !== undefined && this.upcoming.tree_size <= size;
  }

  /** Checks each checkpoint the tree has reached, in turn. */
  async pass(tree: RightEdge): Promise<BadCheckpoint | undefined> {
    for (let cp = this.upcoming; cp && cp.tree_size <= tree.size; cp = this.upcoming) {
      if (cp.tree_size < tree.size) return this.bad(`checkpoint ${cp.id} (tree size ${cp.tree_size}) is out of order`);
      const verifier = this.keys.get(cp.key_id);
      const verdict = verifier
        ? checkCheckpoint(cp.note, [verifier], {
            treeSize: cp.tree_size, rootHash: Buffer.from(cp.root_hash), signature: Buffer.from(cp.signature), previousNote: this.newest?.note ?? null, origin: this.origin,
          })
        : { ok: false as const, problem: `it names key "${cp.key_id}", which is not registered` };
      if (!verdict.ok) return this.bad(`checkpoint ${cp.id}: ${verdict.problem}`);
      if (!tree.root().equals(cp.root_hash)) {
        return this.bad(`the records no longer hash to the root of checkpoint ${cp.id} (tree size ${cp.tree_size}): records sealed since the checkpoint before it were changed, and their seal recomputed`);
      }
      this.newest = cp;
      this.checked++;
      this.firstSince = undefined;
      this.stream.take();
      this.upcoming = await this.stream.peek();
    }
    return undefined;
  }

  /** Once the seal is read to its end: a checkpoint that covers more records than the tree holds. */
  async beyond(size: number): Promise<{ problem: string } | undefined> {
    const cp = await this.stream.peek();
    return cp && { problem: `checkpoint ${cp.id} covers ${cp.tree_size} records, but only ${size} are sealed: the seal was truncated` };
  }

  /** The newest checkpoint against the trusted keys. None (a fresh log): nothing signed holds the records yet. */
  unanchored(anchors: NoteVerifier[]): { problem: string } | undefined {
    if (!this.newest) return undefined;
    const anchored = checkCheckpoint(this.newest.note, anchors);
    return anchored.ok ? undefined : { problem: `the newest checkpoint (${this.newest.id}) is not signed by the trusted key: ${anchored.problem}` };
  }

  private bad(problem: string): BadCheckpoint {
    return { problem, first_bad_id: this.firstSince };
  }
}

/** Checkpoints in id order up to id `upTo`, a page at a time. */
function checkpointStream(db: Queryable, upTo: number) {
  let page: CheckpointRow[] = [];
  let at = 0;
  let lastId = 0;
  let done = false;
  return {
    async peek(): Promise<CheckpointRow | undefined> {
      if (at >= page.length && !done) {
        const rows = await checkpointsAfter(db, lastId, CHECKPOINT_PAGE);
        page = rows.filter((c) => c.id <= upTo);
        at = 0;
        done = rows.length < CHECKPOINT_PAGE || page.length < rows.length;
        if (rows.length > 0) lastId = rows[rows.length - 1]!.id;
      }
      return page[at];
    },
    take() {
      at++;
    },
  };
}
