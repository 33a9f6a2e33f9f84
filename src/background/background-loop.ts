// The one background loop. Every piece of work that runs beside the requests (the relay that
// numbers events, each instance's dispatcher, the sealer, the checkpointer, the webhook,
// pruning) is this primitive, configured: a round of work run when woken, again at once while
// it says there is more, after a backoff when it failed or was held back, on a slow safety poll
// for work nobody announced (another process's commits), and never after a bounded stop.
import type { FastifyBaseLogger } from 'fastify';
import type { Database, Tx } from '../db/database.js';
import { tryAdvisoryLock } from './background-loop.repository.js';

/**
 * What a round says of the work left:
 * - 'idle': nothing (until the next wake or poll);
 * - 'more': run again at once (a full batch);
 * - 'held': work waits on something outside (a lock another instance holds, a transaction still
 *   running): look again after a backoff;
 * - `{ afterMs }`: run again then (e.g. when a checkpoint falls due), unless woken earlier.
 */
export type RoundOutcome = 'idle' | 'more' | 'held' | { afterMs: number };

export interface BackgroundLoopOptions {
  name: string;
  round(): Promise<RoundOutcome>;
  log: FastifyBaseLogger;
  /** How long a wake waits before the round, so that the commits of that moment go in one round (default 0). */
  lingerMs?: number;
  /**
   * The least time between the starts of two rounds that wakes run (default 0). A wake after a
   * quiet moment runs at once; one that comes sooner after the last round's start waits for the
   * rest, so that the commits of a busy moment share a round, where a linger would delay the
   * first one too.
   */
  spacingMs?: number;
  /** The safety net: a round this often whatever happens (default: none). */
  pollMs?: number;
  /** Told just before each poll's wake, so that a round can tell the poll (work nobody announced may be there) from a wake. */
  onPoll?: () => void;
  /** The first wait after 'held', doubling up to maxRetryMs; a wake may cut it short (new work may be takeable). */
  firstRetryMs?: number;
  maxRetryMs?: number;
  /**
   * The wait after the `attempt`-th failure in a row (a round that threw); a wake does not cut it
   * short. Default: as for 'held'.
   */
  failureBackoffMs?: (attempt: number) => number;
  /** stop() waits this long at most for a round under way (default 5 s). */
  stopTimeoutMs?: number;
}

const DEFAULTS = { lingerMs: 0, spacingMs: 0, firstRetryMs: 50, maxRetryMs: 1000, stopTimeoutMs: 5000 };

export class BackgroundLoop {
  private readonly o: BackgroundLoopOptions & typeof DEFAULTS;
  private stopped = true;
  private running = false;
  private again = false;
  private retryMs: number;
  /** Failures in a row, and until when their backoff runs (a wake waits for it). */
  private failures = 0;
  private failedUntil = 0;
  /** The one timer that runs the next round (linger, retry or a requested delay), and when it fires. */
  private timer: { handle: NodeJS.Timeout; at: number } | undefined;
  private poll: NodeJS.Timeout | undefined;
  private current: Promise<void> = Promise.resolve();
  /** When the last round started (Date.now()). */
  private lastStart = -Infinity;

  constructor(opts: BackgroundLoopOptions) {
    this.o = { ...DEFAULTS, ...opts };
    this.retryMs = this.o.firstRetryMs;
  }

  get name(): string {
    return this.o.name;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    if (this.o.pollMs) {
      this.poll = setInterval(() => {
        this.o.onPoll?.();
        this.wake();
      }, this.o.pollMs);
      this.poll.unref();
    }
    this.runNow();
  }

  /** There may be work: run after the linger (a round under way runs once more afterwards). */
  wake(): void {
    if (this.stopped || Date.now() < this.failedUntil) return;
    if (this.running) {
      this.again = true;
      return;
    }
    const spaced = this.lastStart + this.o.spacingMs - Date.now();
    if (this.o.lingerMs > 0) this.runIn(this.o.lingerMs, { onlyIfSooner: true });
    else if (spaced > 0) this.runIn(spaced, { onlyIfSooner: true });
    else this.runNow();
  }

  /** Stops: no round starts after this; waits for the one under way, at most stopTimeoutMs. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poll);
    this.clearTimer();
    let timeout: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timeout = setTimeout(() => resolve('late'), this.o.stopTimeoutMs)));
    const outcome = await Promise.race([this.current.then(() => 'done' as const), late]);
    clearTimeout(timeout);
    if (outcome === 'late') this.o.log.warn(`${this.o.name}: a round was still running ${this.o.stopTimeoutMs} ms after the stop; left behind`);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer.handle);
    this.timer = undefined;
  }

  /** Schedules the next round in `ms`; with onlyIfSooner, an earlier one already scheduled stands. */
  private runIn(ms: number, { onlyIfSooner }: { onlyIfSooner: boolean }): void {
    const at = Date.now() + ms;
    if (this.timer && onlyIfSooner && this.timer.at <= at) return;
    this.clearTimer();
    const handle = setTimeout(() => {
      this.timer = undefined;
      this.runNow();
    }, ms);
    handle.unref();
    this.timer = { handle, at };
  }

  private runNow(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.clearTimer();
    this.running = true;
    this.again = false;
    this.lastStart = Date.now();
    this.current = this.rounds().finally(() => {
      this.running = false;
      if (this.again && !this.stopped) this.wake();
    });
  }

  /** Rounds while there is more, then schedules what the last one asked for. */
  private async rounds(): Promise<void> {
    for (;;) {
      if (this.stopped) return;
      let outcome: RoundOutcome;
      try {
        outcome = await this.o.round();
      } catch (err) {
        if (this.stopped) return;
        this.failures++;
        const retryInMs = Math.round(this.o.failureBackoffMs ? this.o.failureBackoffMs(this.failures) : this.nextHeldDelay());
        this.o.log.warn({ err, attempt: this.failures, retryInMs }, `${this.o.name}: round failed; retrying`);
        this.failedUntil = Date.now() + retryInMs;
        this.runIn(retryInMs, { onlyIfSooner: false });
        return;
      }
      if (this.failures > 0) this.o.log.info({ failedAttempts: this.failures }, `${this.o.name}: working again`);
      this.failures = 0;
      this.failedUntil = 0;
      if (outcome === 'more') {
        this.retryMs = this.o.firstRetryMs;
        continue;
      }
      if (outcome === 'held') return this.backOff();
      this.retryMs = this.o.firstRetryMs;
      if (outcome !== 'idle' && !this.again) this.runIn(outcome.afterMs, { onlyIfSooner: true });
      return;
    }
  }

  private backOff(): void {
    if (this.stopped) return;
    this.runIn(this.nextHeldDelay(), { onlyIfSooner: false });
  }

  private nextHeldDelay(): number {
    const ms = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, this.o.maxRetryMs);
    return ms;
  }
}

/**
 * A round that one instance runs at a time: `body` runs in a transaction that first takes the
 * advisory lock `key` (without waiting; answered 'held' when another instance has it). The lock
 * ends with the transaction, so an instance that dies mid-round frees it at once. Its statements
 * are planned for their values (a consumer's read depends on where it stands: db/commit-order.ts).
 *
 * `first`, a read every round begins with, is sent behind the lock without waiting for its
 * answer (one round trip less a round on PostgreSQL, where a transaction's statements are
 * pipelined); PostgreSQL still runs it after the lock is taken, as if it had waited. When the
 * lock is held elsewhere, its answer is dropped.
 */
export function exclusiveRound<F = undefined>(
  db: Database,
  key: number,
  body: (tx: Tx, first: F) => Promise<RoundOutcome>,
  first?: (tx: Tx) => Promise<F>,
): () => Promise<RoundOutcome> {
  return () =>
    db.transaction(
      async (tx) => {
        const locked = tryAdvisoryLock(tx, key);
        const read = first ? first(tx) : Promise.resolve(undefined as F);
        read.catch(() => {}); // awaited once the lock is taken; its failure then fails the round
        if (!(await locked)) return 'held';
        return body(tx, await read);
      },
      { planEachStatement: true },
    );
}
