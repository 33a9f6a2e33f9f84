// Seals committed audit records into the RFC 6962 tree, in commit order, and signs the tree
// head as a checkpoint at least every AUDIT_CHECKPOINT_INTERVAL_MS while sealed records are
// not covered by one (docs/audit-integrity.md §3–4). It is the second user of the shared
// commit-order worker (db/commit-order.ts): every instance runs one, each batch under a
// transaction-level advisory lock, so one instance seals at a time and another carries on at
// once when it dies. The service's own transactions never touch the seal.
import type { FastifyBaseLogger } from 'fastify';
import { CommitOrderWorker } from '../../../db/commit-order.js';
import type { Database, Tx } from '../../../db/database.js';
import {
  fetchNodes, insertCheckpoint, insertNodes, insertSeals, latestCheckpoint, recordsToSeal, recordsWaiting, sealCursor, type CheckpointRow,
} from './evidence.repository.js';
import { checkCheckpoint, noteHash } from './checkpoint-check.js';
import type { LogIdentity } from './log-identity.js';
import { frontierNodes, rootHash, rootNodes, TreeBuilder, type Hash, type NodeKey } from './merkle.js';
import { sealingLeaf } from './sealed-form.js';
import { formatCheckpoint, signNote, signText } from './signed-note.js';

const SEALER_LOCK = 7_245_020;
/** Records sealed per transaction: short enough not to hold PGlite's one connection for long. */
const BATCH = 500;
/** The safety net for records nobody told this instance about (the CLI, another instance). */
const POLL_MS = 1000;
/**
 * A commit wakes the sealer 20 ms later: under load the records of those 20 ms are sealed in
 * one transaction instead of one transaction each (a batch is about eight statements).
 */
const LINGER_MS = 20;

export interface SealerOptions {
  db: Database;
  identity: LogIdentity;
  checkpointIntervalMs: number;
  log: FastifyBaseLogger;
  /** After a batch that sealed records or signed a checkpoint has committed (the webhook wakes). */
  onSealed?: () => void;
}

/** A node source over a map fetched beforehand; a missing node is a broken store, never silently zero. */
export function nodeSource(nodes: Map<string, Hash>) {
  return (key: NodeKey): Hash => {
    const hash = nodes.get(`${key.level}:${key.index}`);
    if (!hash) throw new Error(`audit tree node ${key.level}:${key.index} is missing`);
    return hash;
  };
}

export function createSealer(opts: SealerOptions): CommitOrderWorker {
  const { db, identity, checkpointIntervalMs, log } = opts;
  let checkpointTimer: NodeJS.Timeout | undefined;
  let refusalLogged = false;

  const worker = new CommitOrderWorker({
    name: 'audit sealer',
    db,
    lockKey: SEALER_LOCK,
    batchSize: BATCH,
    pollMs: POLL_MS,
    lingerMs: LINGER_MS,
    // Records held back by a running transaction: that transaction's own commit wakes the
    // sealer (every audited commit does), so there is no need to look again every 5 ms.
    firstRetryMs: 50,
    log,
    async batch(tx, limit) {
      const cursor = await sealCursor(tx);
      let size = cursor ? cursor.seq + 1 : 0;
      const records = await recordsToSeal(tx, cursor, limit);
      let builder: TreeBuilder | undefined;
      if (records.length > 0) {
        const frontierKeys = frontierNodes(size);
        const stored = await fetchNodes(tx, frontierKeys);
        builder = new TreeBuilder(size, frontierKeys.map(nodeSource(stored)));
        const seals = [];
        const nodes = [];
        for (const record of records) {
          const { leaf, canonical } = sealingLeaf(record);
          if (!canonical) {
            log.error({ recordId: record.id }, 'audit sealer: a record has no canonical form (written behind the service\'s back); sealed as unverifiable, so that verification names it');
          }
          seals.push({ seq: size++, recordId: record.id, xactId: record.xact_id, leaf });
          nodes.push(...builder.append(leaf));
        }
        insertSeals(tx, seals);
        insertNodes(tx, nodes);
      }
      const signed = await checkpointIfDue(tx, size, builder);
      const last = records[records.length - 1];
      const waiting = records.length < limit && (await recordsWaiting(tx, last ? { seq: size - 1, record_id: last.id, record_xact_id: last.xact_id } : cursor));
      return { processed: records.length + (signed ? 1 : 0), waiting };
    },
    afterCommit: () => opts.onSealed?.(),
  });

  /**
   * Signs the head of a tree of `size` leaves when records are not covered by the newest
   * checkpoint and the interval has passed since it (or it was signed by another key: after a
   * rotation the newest checkpoint must be under the key this service holds). Otherwise, when
   * a checkpoint is owed later, wakes the worker then.
   */
  async function checkpointIfDue(tx: Tx, size: number, builder: TreeBuilder | undefined): Promise<boolean> {
    if (size === 0) return false;
    const latest = await latestCheckpoint(tx);
    const rotated = latest !== undefined && latest.key_id !== identity.keyId;
    if (latest && latest.tree_size >= size && !rotated) return false;
    const dueAt = latest && !rotated ? Date.parse(latest.created_at) + checkpointIntervalMs : 0;
    if (Date.now() < dueAt) {
      wakeAt(dueAt);
      return false;
    }
    // The new checkpoint names the newest one (prev), and so vouches for it: only one signed by
    // a key trusted from outside the database may be chained onto. Anything else is a forgery
    // (or a rotation whose old key was not given in AUDIT_PREVIOUS_VERIFIER_KEYS): sign nothing,
    // so that verification keeps failing, and say so loudly.
    if (latest && !checkCheckpoint(latest.note, identity.trusted, { treeSize: latest.tree_size, rootHash: Buffer.from(latest.root_hash) }).ok) {
      if (!refusalLogged) {
        log.error(
          { checkpointId: latest.id, keyId: latest.key_id },
          'audit sealer: the newest checkpoint does not verify under a trusted key; no checkpoint is signed until this is resolved ' +
            '(tampering, or a key rotation without AUDIT_PREVIOUS_VERIFIER_KEYS). Run `teamlog audit verify`.',
        );
        refusalLogged = true;
      }
      return false;
    }
    refusalLogged = false;
    const root = builder ? builder.root() : rootHash(size, nodeSource(await fetchNodes(tx, rootNodes(size))));
    insertCheckpoint(tx, makeCheckpoint(identity, size, root, latest));
    return true;
  }

  function wakeAt(at: number): void {
    if (checkpointTimer) return;
    checkpointTimer = setTimeout(() => {
      checkpointTimer = undefined;
      worker.wake();
    }, Math.max(0, at - Date.now()) + 5);
    checkpointTimer.unref();
  }

  const stop = worker.stop.bind(worker);
  worker.stop = async () => {
    clearTimeout(checkpointTimer);
    await stop();
  };
  return worker;
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
