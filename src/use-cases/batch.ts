// Natural batching of the hot writes (docs/architecture.md, "A batch"): concurrent runs of a
// batched use case share one transaction and one commit. A run that finds no batch in flight goes
// at once (alone, if nothing else is queued); one that arrives while a batch is in flight waits
// for the next, which starts when a batch ends, or at once when a full batch is waiting, or when
// every batch in flight has taken longer than stallMs (it may be waiting for a lock). So a
// batch grows only under load, and there is no timer on the way of a lone run. On this hardware
// a write's cost is per statement and per transaction, not per row (docs/performance.md).
//
// Runs that offer one change's form for many runs (AloneChange.many: POST /tasks and
// PUT /tasks/:id/status by a member)
// go as that one statement, with their callers' check, records and outbox row: one round trip.
// A run it did not answer wrote nothing, and runs alone as usual, which decides and answers why.
// Every other batched run goes in a shared transaction, where the rest of this comment holds.
//
// Inside a batch every run keeps the runner's promises, item by item:
//   - the callers' user and session rows are locked FOR KEY SHARE in one statement for all of
//     them (RunnerStore.lockActors), and each run decides on its own locked rows;
//   - each run's body runs as it would alone (its statements pipelined with the others' on the
//     batch's connection), records its one audit record, and gets its own answer;
//   - a run refused before it wrote anything commits its DENIED record with the batch (its
//     changes are none of the batch's; docs/api.md 5.3); one that failed before writing
//     (404, 400, 409, 412) is answered with its error, and the others commit;
//   - when a statement fails (the transaction is then aborted) or a run fails after writing,
//     the batch rolls back: the run whose statement failed runs again alone, for an answer of its
//     own, and the others run again as a batch once more, then alone. The batch's records go
//     in one statement with COMMIT: should that statement fail, nothing committed and every run
//     goes again alone. No run is ever answered with another's error;
//   - a lock wait stalls the whole batch, so a batch waits at most LOCK_TIMEOUT for a row lock,
//     and the run that waited runs again alone, where it may wait as long as it must;
//   - two runs that read a row and then change it on what they read (RunOptions.batchKey) never
//     share a batch: inside one transaction the row lock that orders them would not.
// The queue is bounded: beyond it a run is refused with 503 and Retry-After, never queued without end.
import type { RequestContext } from '../context.js';
import type { Tx } from '../db/database.js';
import { isUnavailableError, pgErrorCode } from '../db/database.js';
import { IN_FAILED_TRANSACTION, RunTx, Together, setLockTimeout } from '../db/shared-transaction.js';
import { DomainError } from '../domain/errors.js';
import type { SessionRow } from '../domain/session-verdict.js';
import type { Database } from '../db/database.js';
import type { RunnerStore, Written } from './ports.js';
import type { CommitSignal, Committed } from '../background/commit-signal.js';
import { CommittedFailure, Refusal, UseCaseContractError, Work, lostRaceOr, type AloneForm, type CallerRow, type UseCase, type UseCaseBody } from './unit-of-work.js';

/** What a run needs besides its use case: the database, what it locks and writes through, and whom to tell of a commit. */
export interface RunnerParts {
  db: Database;
  store: RunnerStore;
  commits: CommitSignal;
}

/** A run alone: in its one-statement form when it has one, else in a transaction of its own (runner.ts runLone). */
export type RunAlone = (ctx: RequestContext, uc: UseCase, body: UseCaseBody<unknown>, alone?: AloneForm<unknown>) => Promise<unknown>;

export interface BatchSettings {
  /** Batches in flight at most; at least two, so that one stalled batch does not stop the writes. */
  writers: number;
  /** The most runs in one batch. */
  maxBatch: number;
  /** The most runs waiting for a writer; one more is refused (503). */
  maxQueue: number;
  /** How long a batch waits for a row lock (PostgreSQL) before its waiting run goes alone. */
  lockTimeoutMs: number;
  /**
   * How long a batch in flight holds the runs queued behind it for the next batch, unless a full
   * batch is waiting. Holding them is what keeps batches large: a writer that took whatever was
   * queued the moment it was free made a tenth of POST /tasks at 50 connections batches of one,
   * each costing PostgreSQL about three times a batched run (docs/performance.md, 2026-11-30).
   * A batch in flight longer than this is likely waiting for a row lock (up to lockTimeoutMs) or
   * on an overloaded machine, and the runs behind it go on another writer.
   */
  stallMs: number;
}

export const DEFAULT_BATCHING: BatchSettings = { writers: 2, maxBatch: 32, maxQueue: 2000, lockTimeoutMs: 200, stallMs: 25 };

/**
 * The batching a database gets. On PostgreSQL a batch spends most of its time waiting for its
 * round trips and its commit's flush, not computing, so four batches in flight keep the cores
 * busier than two: POST /tasks at 50 connections, three alternated pairs of quick runs, 1.26×
 * the bare app (median of nine rounds) against 1.10× with two; eight made batches half as large
 * and cost PostgreSQL a quarter more CPU a request, 0.88–0.97× (docs/performance.md). PGlite
 * has one connection: a batch formed while another holds it only waits, smaller than it would
 * have grown. Since a batch in flight holds what queues behind it (stallMs), a second batch
 * starts only when a full one waits or one stalls, and two writers measured as four did
 * (docs/performance.md, 2026-11-30, later); four stay for the stalls.
 */
export const batchingFor = (kind: Database['kind']): BatchSettings => (kind === 'postgres' ? { ...DEFAULT_BATCHING, writers: 4 } : DEFAULT_BATCHING);

interface Item {
  ctx: RequestContext;
  uc: UseCase;
  body: UseCaseBody<unknown>;
  key: string | undefined;
  /** Its one-statement form, for when it goes alone at once (RunOptions.alone). */
  alone: AloneForm<unknown> | undefined;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
  /** Batches this run was in that rolled back: after one, it runs alone. */
  retried: number;
}

type Outcome = { ok: true; value: unknown; carried: Committed | undefined; written: Written } | { ok: false; error: unknown };

interface Run {
  item: Item;
  tx: RunTx;
  outcome?: Outcome;
}

/** Thrown inside a batch's transaction to roll it back; the runs are then settled one by one. */
class RollBack extends Error {}

export class Batcher {
  private readonly queue: Item[] = [];
  /** When each batch in flight started (performance.now()), oldest first: each is pushed as it starts. */
  private readonly started: number[] = [];
  /** Pumps again when the youngest batch in flight turns stallMs old, while runs are held. */
  private stallTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly parts: RunnerParts,
    private readonly settings: BatchSettings,
    private readonly runAlone: RunAlone,
  ) {
  }

  submit<T>(ctx: RequestContext, uc: UseCase, body: UseCaseBody<T>, key: string | undefined, alone?: AloneForm<T>): Promise<T> {
    if (this.queue.length >= this.settings.maxQueue) {
      return Promise.reject(new DomainError('unavailable', 'UNAVAILABLE', 'Too many writes are waiting; nothing was written. Retry shortly.', { retryAfterSeconds: 1 }));
    }
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ ctx, uc, body: body as UseCaseBody<unknown>, key, alone: alone as AloneForm<unknown> | undefined, resolve: resolve as (v: unknown) => void, reject, retried: 0 });
      this.pump();
    });
  }

  /**
   * Starts a batch on every free writer, each taking what is queued (one run per key), unless a
   * batch started less than stallMs ago is in flight and no full batch is waiting: then the
   * queued runs wait for the next batch.
   */
  private pump(): void {
    while (this.started.length < this.settings.writers && this.queue.length > 0) {
      const hold = this.queue.length < this.settings.maxBatch ? this.holdFor() : 0;
      if (hold > 0) {
        this.stallTimer ??= setTimeout(() => {
          this.stallTimer = undefined;
          this.pump();
        }, hold).unref();
        return;
      }
      const batch: Item[] = [];
      const keys = new Set<string>();
      for (let i = 0; i < this.queue.length && batch.length < this.settings.maxBatch; ) {
        const item = this.queue[i]!;
        if (item.key !== undefined && keys.has(item.key)) {
          i++;
          continue;
        }
        if (item.key !== undefined) keys.add(item.key);
        batch.push(item);
        this.queue.splice(i, 1);
      }
      const start = performance.now();
      this.started.push(start);
      void this.runBatch(batch).finally(() => {
        this.started.splice(this.started.indexOf(start), 1);
        this.pump();
      });
    }
  }

  /** How much longer (ms) the youngest batch in flight holds what is queued; 0 when none does. */
  private holdFor(): number {
    const youngest = this.started.at(-1);
    return youngest === undefined ? 0 : Math.max(0, youngest + this.settings.stallMs - performance.now());
  }

  /** A run on its own; `first`: it goes alone at once, not again after a batch rolled back, so its one-statement form may serve. */
  private alone(item: Item, first = false): Promise<void> {
    return this.runAlone(item.ctx, item.uc, item.body, first ? item.alone : undefined).then(item.resolve, item.reject);
  }

  /**
   * Runs a batch: runs that offer one change's form for many runs (AloneChange.many), when two
   * or more do, as that one statement; the others in one shared transaction (or alone, if one).
   * A run that went in a batch that rolled back goes on as its body, never in a form again.
   */
  private async runBatch(items: Item[]): Promise<void> {
    const byChange = new Map<string, Item[]>();
    const shared: Item[] = [];
    for (const item of items) {
      const change = item.retried === 0 ? item.alone?.change : undefined;
      if (!change?.many) shared.push(item);
      else if (byChange.has(change.name)) byChange.get(change.name)!.push(item);
      else byChange.set(change.name, [item]);
    }
    const many = [...byChange.values()].filter((group) => group.length > 1);
    for (const group of byChange.values()) if (group.length === 1) shared.push(...group);
    await Promise.all([...many.map((group) => this.runMany(group)), shared.length > 0 ? this.runShared(shared) : undefined]);
  }

  /**
   * Runs that all offer one change's form for many runs, as that one statement with their
   * records and outbox row (AloneChange.many): one round trip, pipelined with BEGIN, the lock
   * timeout and COMMIT, instead of a shared transaction's three. A run the statement did not
   * answer (its caller no longer entitled, a condition the SQL leaves to the use case) wrote
   * nothing, and runs alone as usual, which answers why. When the statement fails (a lock
   * timeout, a deadlock, a constraint), nothing committed and every run goes alone; when the
   * connection is lost, the outcome is unknown and every run is answered 503, as in a shared
   * transaction.
   */
  private async runMany(items: Item[]): Promise<void> {
    const { db, store, commits } = this.parts;
    const change = items[0]!.alone!.change;
    let rows: Record<string, unknown>[];
    try {
      const sent = await db.transaction(async (tx) => {
        const pipelined = db.kind === 'postgres';
        if (pipelined) setLockTimeout(tx, this.settings.lockTimeoutMs);
        const answer = store.writer.recordMany(tx, change, items.map((item) => ({ ctx: item.ctx, params: item.alone!.params })));
        answer.catch(() => {}); // awaited below
        // PostgreSQL: COMMIT goes right behind the statement; should the statement fail, the
        // COMMIT rolls back, and `answer` throws. PGlite runs one statement after the other.
        if (!pipelined) await answer;
        return { answer };
      });
      rows = await sent.answer;
    } catch (err) {
      // A lost connection (the outcome unknown), or not the database's error (a bug of the form).
      if (isUnavailableError(err) || pgErrorCode(err) === undefined) return items.forEach((item) => item.reject(err));
      await Promise.all(items.map((item) => this.alone(item)));
      return;
    }
    const byRun: Array<Record<string, unknown>[]> = items.map(() => []);
    for (const row of rows) byRun[Number(row.ord) - 1]?.push(row);
    let recorded = 0;
    const left: Item[] = [];
    items.forEach((item, i) => {
      const mine = byRun[i]!;
      if (mine.length === 0) left.push(item);
      else if (mine.length > 1) item.reject(new UseCaseContractError(`${item.uc.name}: its form for many runs made ${mine.length} changes for one run`));
      else {
        if (mine[0]!.recorded) recorded++;
        item.resolve(item.alone!.answer(mine[0]!));
      }
    });
    // Announced in the same turn as the answers, before any of them is sent.
    if (recorded > 0) commits.committed({ audited: true, events: recorded * (change.events + 1) });
    await Promise.all(left.map((item) => this.alone(item)));
  }

  /** Runs in one shared transaction, each as it would run alone. */
  private async runShared(items: Item[]): Promise<void> {
    if (items.length === 1) return this.alone(items[0]!, items[0]!.retried === 0);
    const { db, store, commits } = this.parts;
    const runs: Run[] = [];
    try {
      await db.transaction(async (tx) => {
        if (db.kind === 'postgres') setLockTimeout(tx, this.settings.lockTimeoutMs);
        const callers = store.lockActors(tx, items.map((i) => ({ userId: i.ctx.actor!.id, sessionId: i.ctx.actor!.sessionId })));
        callers.catch(() => {}); // each run awaits it through its caller
        const callerRow: CallerRow = async (_tx, actor): Promise<SessionRow | undefined> => (await callers).get(actor.sessionId);
        const together = new Together(tx);
        await Promise.all(items.map((item) => this.runIn(tx, item, callerRow, runs, together)));
        await callers.catch((err: unknown) => {
          throw new RollBack(String(err)); // the batch's own statement failed: every run goes again
        });
        // A failed statement aborted the transaction; a run that failed after writing left changes in it.
        if (runs.some((r) => r.tx.failure !== undefined || (!r.outcome!.ok && r.tx.wrote))) throw new RollBack();
        // Every record, the refused runs' DENIED ones among them, and one outbox row, in one
        // statement, pipelined with COMMIT (one round trip less a batch): it is sent on the
        // transaction itself, so that should it fail, the COMMIT rolls back and the transaction
        // throws its error (db/database.ts runTransaction), and every run goes again alone.
        const written: Written[] = [];
        for (const r of runs) {
          const outcome = r.outcome!;
          if (outcome.ok) written.push(outcome.written);
          else if (outcome.error instanceof Refusal && outcome.error.record) {
            written.push({ ctx: r.item.ctx, entry: { ...outcome.error.record, result: 'DENIED' }, events: [] });
          }
        }
        store.writer.recordBatch(tx, written);
      });
    } catch (err) {
      return this.afterRollBack(runs, items, err);
    }
    // Committed: every run is answered, in the order it was submitted.
    let audited = false;
    let events = 0;
    for (const r of runs) {
      const outcome = r.outcome!;
      if (outcome.ok) {
        for (const hook of r.tx.hooks) hook();
        if (outcome.carried) {
          audited ||= outcome.carried.audited;
          events += outcome.carried.events;
        }
        if (outcome.value instanceof CommittedFailure) r.item.reject(outcome.value.error);
        else r.item.resolve(outcome.value);
      } else if (outcome.error instanceof Refusal) {
        if (outcome.error.record) {
          audited = true;
          events += 1;
        }
        r.item.reject(outcome.error.error);
      } else {
        r.item.reject(lostRaceOr(outcome.error));
      }
    }
    if (audited || events > 0) commits.committed({ audited, events });
  }

  /** Runs one item's body inside the batch's transaction, as it would run alone. */
  private async runIn(tx: Tx, item: Item, callerRow: CallerRow, runs: Run[], together: Together): Promise<void> {
    const run: Run = { item, tx: new RunTx(tx, together) };
    runs.push(run);
    const work = new Work(run.tx, item.ctx, item.uc, callerRow);
    try {
      const value = await item.body(work);
      run.outcome = { ok: true, value, carried: work.carried, written: await work.settle() };
    } catch (error) {
      run.outcome = { ok: false, error };
    }
    await run.tx.settled();
  }

  /**
   * The batch rolled back. A run that failed before writing anything keeps its answer (a refusal
   * goes again alone, to record it); a run whose own statement failed goes again alone; the rest go
   * again as a batch once, then alone. A lost connection answers every run with it (503): what
   * was in flight rolled back, and an Idempotency-Key makes the retry safe.
   */
  private async afterRollBack(runs: Run[], items: Item[], err: unknown): Promise<void> {
    const lost = isUnavailableError(err) ? err : runs.map((r) => r.tx.failure?.error).find(isUnavailableError);
    const again: Item[] = [];
    const alone: Item[] = [];
    for (const item of items) {
      const run = runs.find((r) => r.item === item);
      const outcome = run?.outcome;
      if (lost !== undefined) item.reject(lost);
      else if (run && outcome && !outcome.ok && !run.tx.wrote && run.tx.failure === undefined && !(outcome.error instanceof Refusal) && pgErrorCode(outcome.error) === undefined) {
        item.reject(lostRaceOr(outcome.error)); // its answer did not depend on the batch
      } else if (err instanceof RollBack && item.retried === 0 && run && !run.tx.culprit && (outcome?.ok || pgErrorCode(outcome?.error) === IN_FAILED_TRANSACTION)) {
        item.retried++;
        again.push(item);
      } else {
        alone.push(item);
      }
    }
    await Promise.all([...alone.map((item) => this.alone(item)), again.length > 0 ? this.runBatch(again) : undefined]);
  }
}
