// Seals committed audit records into the RFC 6962 tree, in commit order (db/commit-order.ts),
// and signs the tree's head as a checkpoint at least every AUDIT_CHECKPOINT_INTERVAL_MS while
// sealed records are not covered by one (docs/audit-integrity.md §3–4). Two background loops
// (background/background-loop.ts) under one advisory lock, so that one instance seals and signs at a
// time and another carries on at once when it dies: the sealer, woken by audited commits, and
// the checkpointer, woken by seals and by the interval. Both build on a VerifiedTree, never on
// the stored tree taken on trust. The service's own transactions never touch the seal.
import type { FastifyBaseLogger } from 'fastify';
import type { Database, Tx } from '../../../db/database.js';
import { BackgroundLoop, exclusiveRound, type RoundOutcome } from '../../../background/background-loop.js';
import { noteHash } from '../../../tlog/checkpoint-check.js';
import { committedRecords, insertCheckpoint, insertSealBatch, insertTiles, lastSealBatch, type CheckpointRow, type SealBatchRow } from './evidence.repository.js';
import type { LogIdentity } from './log.identity.js';
import type { Hash } from '../../../tlog/merkle.js';
import { sealingLeaf } from './record.sealed-form.js';
import { formatCheckpoint, signNote, signText } from '../../../tlog/signed-note.js';
import { storedEdge } from './tile.store.js';
import type { RightEdge } from '../../../tlog/tiles.js';
import { copyEdge, TreeUnverifiable, VerifiedTree } from './tree.loader.js';

const SEAL_LOCK = 7_245_020;
/** Records sealed per transaction: short enough not to hold PGlite's one connection for long. */
const BATCH = 500;
/** The safety net for records nobody told this instance about (the CLI, another instance). */
const POLL_MS = 1000;
/**
 * Sealing rounds start at least this far apart. A commit after a quiet moment is sealed at once;
 * under load the records of each tenth of a second share one round. A round has a fixed cost
 * (its transaction, the seal's lock, the tree's edge, the batch and tile rows): about a third of
 * the sealer's CPU at 20 ms apart, as a 20 ms linger had it (docs/performance.md). A record is
 * covered by a signed checkpoint only every AUDIT_CHECKPOINT_INTERVAL_MS (5 s by default), so
 * sealing sooner than this would not make its evidence available sooner.
 */
const SPACING_MS = 100;
/** While the stored evidence cannot be built on, how often the loops look again. */
const REFUSED_RETRY_MS = 5000;

export interface SealerOptions {
  db: Database;
  identity: LogIdentity;
  checkpointIntervalMs: number;
  log: FastifyBaseLogger;
  /** After a batch was sealed or a checkpoint signed (the webhook wakes). */
  onSealed?: () => void;
  /**
   * As a sealing round begins, before it reads what is committed: a wake given after this is for
   * records the round may not see (sealing.thread.ts lowers its wake latch here).
   */
  beforeRound?: () => void;
}

export interface Sealing {
  sealer: BackgroundLoop;
  checkpointer: BackgroundLoop;
  /** An audited commit happened: seal soon. */
  wake(): void;
  start(): void;
  stop(): Promise<void>;
}

export function createSealing(opts: SealerOptions): Sealing {
  const { db, identity, checkpointIntervalMs, log } = opts;
  // The sealer and the checkpointer share the seal's advisory lock. Between this instance's own
  // two loops a round waits for the other's to end instead of finding the lock held and backing
  // off (up to a second each time: a backlog sealed at a quarter of its speed); 'held' is left
  // for another instance's rounds.
  const oneAtATime = serialized();
  const tree = new VerifiedTree(identity);
  /** The problem that stopped the loops, logged once until it clears. */
  let refusal: string | undefined;

  /** What is served (tiles, proofs) must be the tree that is signed: the stored right edge at its size must give its root. */
  async function checkStoredEdge(tx: Tx, edge: RightEdge): Promise<void> {
    const stored = await storedEdge(tx, edge.size).catch(() => undefined);
    if (!stored || !stored.root().equals(edge.root())) {
      throw new TreeUnverifiable(`the stored tiles of the tree's right edge (tree size ${edge.size}) are not the tree the records make: the stored tree was changed`);
    }
  }

  /**
   * Runs a round that builds on the tree. A tree that cannot be verified stops both loops
   * (loudly, once), until a round finds it whole again: loaded afresh from its newest signed
   * checkpoint, and its stored edge agreeing. Every round begins with the newest seal batch
   * (`last`), read behind the lock in the same round trip.
   */
  const guarded = (body: (tx: Tx, last: SealBatchRow | undefined) => Promise<RoundOutcome>) =>
    oneAtATime(exclusiveRound(db, SEAL_LOCK, async (tx, last) => {
      try {
        if (refusal !== undefined) {
          tree.forget();
          await checkStoredEdge(tx, await tree.at(tx, last?.next_seq ?? 0));
          log.info('audit sealer: the stored evidence verifies again; sealing and signing resumed');
          refusal = undefined;
        }
        return await body(tx, last);
      } catch (err) {
        if (!(err instanceof TreeUnverifiable)) throw err;
        tree.forget();
        if (refusal !== err.message) {
          log.error({ recordId: err.recordId }, `audit sealer: ${err.message}. Nothing is sealed or signed until this is resolved: run \`teamlog audit verify\``);
          refusal = err.message;
        }
        return { afterMs: REFUSED_RETRY_MS };
      }
    }, lastSealBatch));

  const sealer = new BackgroundLoop({
    name: 'audit sealer',
    log,
    pollMs: POLL_MS,
    spacingMs: SPACING_MS,
    round: guarded(async (tx, last) => {
      opts.beforeRound?.();
      const size = last?.next_seq ?? 0;
      const edge = await tree.at(tx, size);
      const { rows, position } = await committedRecords.next(tx, last, BATCH);
      if (!position) return 'idle';
      const next = copyEdge(edge);
      const leaves: Hash[] = [];
      const full = [];
      for (const record of rows) {
        const { leaf, canonical } = sealingLeaf(record);
        if (!canonical) {
          log.error({ recordId: record.id }, 'audit sealer: a record has no canonical form (written behind the service\'s back); sealed as unverifiable, so that verification names it');
        }
        leaves.push(leaf);
        full.push(...next.append(leaf).full);
      }
      insertSealBatch(tx, size, rows.map((r) => r.id), leaves, position);
      insertTiles(tx, [...full, ...next.changedSince(size)]);
      tx.afterCommit(() => {
        tree.adopt(next);
        // A checkpointer waiting for its interval has nothing to do before then, however much is sealed.
        if (!checkpointWaiting) checkpointer.wake();
        opts.onSealed?.();
      });
      return rows.length >= BATCH ? 'more' : 'idle';
    }),
  });

  /** The checkpointer's last round ended waiting for a checkpoint to fall due (its timer is set). */
  let checkpointWaiting = false;
  const checkpointRound = guarded(async (tx, last) => {
    const size = last?.next_seq ?? 0;
    if (size === 0) return 'idle';
    // The new checkpoint names the newest one (prev), and so vouches for it: the newest must be
    // signed by a key trusted from outside the database and extend the one before it (head).
    const latest = await tree.head(tx);
    // After a rotation the newest checkpoint must be under the key this service holds: sign the head again at once.
    const rotated = latest !== undefined && latest.key_id !== identity.keyId;
    if (latest && latest.tree_size >= size && !rotated) return 'idle';
    const dueAt = latest && !rotated ? Date.parse(latest.created_at) + checkpointIntervalMs : 0;
    if (Date.now() < dueAt) return { afterMs: dueAt - Date.now() + 5 };
    const edge = await tree.at(tx, size);
    await checkStoredEdge(tx, edge);
    insertCheckpoint(tx, makeCheckpoint(identity, size, edge.root(), latest));
    tx.afterCommit(() => {
      tree.signed(size);
      opts.onSealed?.();
    });
    return 'idle';
  });
  const checkpointer = new BackgroundLoop({
    name: 'audit checkpointer',
    log,
    pollMs: POLL_MS,
    round: async () => {
      checkpointWaiting = false;
      const outcome = await checkpointRound();
      checkpointWaiting = typeof outcome === 'object' && refusal === undefined;
      return outcome;
    },
  });

  return {
    sealer,
    checkpointer,
    wake: () => {
      // While the evidence is refused the loops look again on their own schedule, not per commit.
      if (refusal === undefined) sealer.wake();
    },
    start() {
      sealer.start();
      checkpointer.start();
    },
    async stop() {
      await Promise.all([sealer.stop(), checkpointer.stop()]);
    },
  };
}

/** Wraps rounds so that those wrapped by one serializer run one after another, never together. */
function serialized() {
  let tail: Promise<unknown> = Promise.resolve();
  return (round: () => Promise<RoundOutcome>) => (): Promise<RoundOutcome> => {
    const run = tail.then(round, round);
    tail = run.catch(() => undefined);
    return run;
  };
}

/** A C2SP tlog-checkpoint over the tree head, chained to the previous checkpoint's note. */
export function makeCheckpoint(identity: LogIdentity, treeSize: number, rootHash: Hash, previous: CheckpointRow | undefined) {
  const createdAt = new Date().toISOString();
  const prevHash = previous ? noteHash(previous.note) : null;
  const extensions = [`time ${createdAt}`, ...(prevHash ? [`prev ${prevHash.toString('base64')}`] : [])];
  const text = formatCheckpoint({ origin: identity.origin, treeSize, rootHash, extensions });
  return {
    treeSize,
    rootHash,
    prevHash,
    keyId: identity.keyId,
    signature: signText(text, identity.signer),
    note: signNote(text, identity.signer),
    createdAt,
  };
}
