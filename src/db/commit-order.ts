// Reading rows in commit order (API.md 5.5). Ids are handed out at insert, but transactions
// commit in another order: a reader that takes `id > cursor` skips a row whose transaction
// commits after a later id was read. Every row records its transaction (`xact_id`, stamped
// from pg_current_xact_id()), and a reader takes only rows whose transaction is older than
// the oldest one still running: those transactions have all ended, so no row can appear
// among them later. Read in (xact_id, id) order, such rows come in one deterministic order
// that never admits a late row behind the reader.
//
// CommitOrderWorker is the one component every consumer shares (the outbox sequencer now, the
// audit sealer and the webhook next): it runs a consumer's batch in a transaction, under a
// transaction-level advisory lock so that one instance works at a time (and another takes
// over at once when it dies), wakes when told, retries while committed rows wait behind a
// running transaction, and polls slowly as a safety net for writers it is never told about.
import type { FastifyBaseLogger } from 'fastify';
import type { Database, Tx } from './database.js';
import { query, statements } from './statements.js';

/** The SQL condition that a row's transaction has ended (committed: uncommitted rows are invisible). */
export const COMMITTED = 'xact_id < pg_snapshot_xmin(pg_current_snapshot())';

const S = statements('commit-order', {
  tryLock: 'SELECT pg_try_advisory_xact_lock($1) AS locked',
});

export interface BatchOutcome {
  /** Rows handled by this batch. */
  processed: number;
  /** Committed rows left that this batch could not take yet (waiting behind a running transaction). */
  waiting: boolean;
}

export interface CommitOrderWorkerOptions {
  name: string;
  db: Database;
  /** The advisory lock that makes this job one instance's at a time. */
  lockKey: number;
  /** Rows per batch: a batch holds PGlite's single connection while it runs, so keep it short. */
  batchSize: number;
  /** One batch, inside the transaction the worker opened and locked. */
  batch(tx: Tx, limit: number): Promise<BatchOutcome>;
  /** After a batch that processed rows has committed. */
  afterCommit?(): void;
  /** The safety net's period. */
  pollMs: number;
  /**
   * How long a wake waits before the batch runs, so that the commits of that moment go in one
   * batch instead of one each (0: at once). For consumers whose latency matters less than the
   * cost of a transaction per commit under load, e.g. the audit sealer.
   */
  lingerMs?: number;
  /**
   * The first wait before looking again at rows held back by a running transaction (doubling
   * up to a second). Under load some transaction is nearly always running, so a short first
   * wait means a batch every few milliseconds; a consumer whose own commits wake it anyway can
   * afford a longer one.
   */
  firstRetryMs?: number;
  log: FastifyBaseLogger;
}

const FIRST_RETRY_MS = 5;
const MAX_RETRY_MS = 1000;

export class CommitOrderWorker {
  private running = false;
  private again = false;
  private stopped = true;
  private retryMs: number;
  private retryTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private lingerTimer: NodeJS.Timeout | undefined;
  private current: Promise<void> = Promise.resolve();

  constructor(private readonly opts: CommitOrderWorkerOptions) {
    this.retryMs = opts.firstRetryMs ?? FIRST_RETRY_MS;
  }

  start(): void {
    this.stopped = false;
    this.pollTimer = setInterval(() => this.wake(), this.opts.pollMs);
    this.pollTimer.unref();
    this.wake();
  }

  /** Something may be waiting: run soon (a run under way runs once more afterwards). */
  wake(): void {
    if (this.stopped) return;
    const linger = this.opts.lingerMs ?? 0;
    if (linger > 0 && !this.running) {
      if (this.lingerTimer) return;
      this.lingerTimer = setTimeout(() => {
        this.lingerTimer = undefined;
        this.run();
      }, linger);
      this.lingerTimer.unref();
      return;
    }
    this.run();
  }

  private run(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.current = this.drain().finally(() => {
      this.running = false;
      if (this.again && !this.stopped) {
        this.again = false;
        this.wake();
      }
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.pollTimer);
    clearTimeout(this.retryTimer);
    clearTimeout(this.lingerTimer);
    await this.current;
  }

  /** Batches until nothing is left that can be taken now. */
  private async drain(): Promise<void> {
    const { db, lockKey, batchSize, log, name } = this.opts;
    try {
      for (;;) {
        if (this.stopped) return;
        const outcome = await db.transaction(async (tx) => {
          const [lock] = await query<{ locked: boolean }>(tx, S.tryLock, [lockKey]);
          // Another instance is at it: it will take these rows too.
          if (!lock?.locked) return { processed: 0, waiting: false, busy: true };
          return { ...(await this.opts.batch(tx, batchSize)), busy: false };
        });
        if (outcome.processed > 0) this.opts.afterCommit?.();
        if (outcome.processed >= batchSize) continue;
        if (outcome.waiting || outcome.busy) this.retrySoon();
        else this.retryMs = this.opts.firstRetryMs ?? FIRST_RETRY_MS;
        return;
      }
    } catch (err) {
      log.warn({ err }, `${name}: batch failed; retrying`);
      this.retrySoon();
    }
  }

  /** Rows wait behind a running transaction (or another instance holds the lock): look again, less and less often. */
  private retrySoon(): void {
    if (this.stopped) return;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.wake(), this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
  }
}
