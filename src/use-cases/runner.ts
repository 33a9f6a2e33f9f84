// The one use-case runner. Every mutating use case (HTTP route, socket event, CLI command)
// runs through it, so the rules below hold by construction instead of by habit:
//
//   1. One transaction per run. The caller's user and session rows are locked first
//      (FOR KEY SHARE, pipelined with BEGIN: no round trip of its own), so a demotion,
//      deactivation or revocation either waits for the run to commit or is seen by it.
//      The use case then loads and locks the rows that decide its right (membership,
//      the resource) and decides, inside the transaction (docs/api.md section 3).
//   2. `audit` and `emit` are bound to the transaction and the caller. An audited use case
//      commits exactly one record, or says explicitly that nothing audited happened
//      (`withoutRecord`); anything else fails the run (a bug, answered 500, nothing written).
//      The record and the change's outbox row go out in one statement, after the change,
//      pipelined with COMMIT; after commit the runner announces what the commit carried
//      (commit-signal.ts), so that the relay and the sealer take it at once.
//   3. A right is refused in one way: `authorize(verdict, …)` with a policy's verdict
//      (domain/authorization.ts). It rolls everything back; then, for an audited action, one
//      DENIED record is written in a transaction of its own (docs/api.md 5.3), and the caller gets
//      404 when they may not know the resource exists, else 403. Other failures (no such
//      resource, bad input, a conflicting state) are thrown as their domain errors, and roll
//      back too. `failAfterCommit` is only for a failure that is itself a change to keep.
//   4. A unique constraint that a concurrent request won is the domain's conflict (e.g.
//      EMAIL_TAKEN), never a driver error.
//
// Lock order, everywhere: users → sessions → projects → project_members → tasks. Taking
// rows in one order is what keeps concurrent use cases from deadlocking each other.
import type { RequestContext } from '../context.js';
import type { Database } from '../db/database.js';
import { isUnavailableError, pgErrorCode } from '../db/database.js';
import { Batcher, batchingFor, type BatchSettings, type RunnerParts } from './batch.js';
import type { CommitSignal } from '../background/commit-signal.js';
import type { RunnerStore } from './ports.js';
import { CommittedFailure, Refusal, UseCaseContractError, Work, lostRaceOr, type AloneForm, type CallerRow, type RunOptions, type Run, type UseCase, type UseCaseBody } from './unit-of-work.js';

export { UseCaseContractError, useCase, type AloneForm, type DeniedRecord, type Run, type RunOptions, type UnitOfWork, type UseCase, type UseCaseBody } from './unit-of-work.js';

/**
 * A deadlock or a serialization failure rolled the whole run back, so running it again is safe;
 * it is tried this many times in all before its error is answered (409 with Retry-After).
 */
const ATTEMPTS = 3;
const RETRYABLE = new Set(['40P01', '40001']);


/** One run in a transaction of its own (retried on a deadlock): the path of every use case, and of a batch of one. */
export async function runAlone<T>({ db, store, commits }: RunnerParts, ctx: RequestContext, uc: UseCase, body: UseCaseBody<T>, opts: RunOptions = {}): Promise<T> {
  const callerRow: CallerRow = (tx, actor) => store.lockActor(tx, actor.id, actor.sessionId, opts.callerLock);
  let outcome: T | CommittedFailure;
  for (let attempt = 1; ; attempt++) {
    try {
      outcome = await db.transaction(async (t) => {
        const work = new Work(t, ctx, uc, callerRow);
        const result = await body(work);
        // The record (or the events alone) goes out last, pipelined with COMMIT.
        const { entry, events } = await work.settle();
        if (entry) store.writer.record(t, ctx, entry, events);
        else store.addEvents(t, events);
        const carried = work.carried;
        if (carried) t.afterCommit(() => commits.committed(carried));
        return result;
      });
      break;
    } catch (err) {
      if (err instanceof Refusal) {
        if (err.record) {
          const denied = err.record;
          await db.transaction(async (t) => store.writer.record(t, ctx, { ...denied, result: 'DENIED' }));
          commits.committed({ audited: true, events: 1 });
        }
        throw err.error;
      }
      if (attempt < ATTEMPTS && RETRYABLE.has(pgErrorCode(err) ?? '')) continue;
      throw lostRaceOr(err);
    }
  }
  if (outcome instanceof CommittedFailure) throw outcome.error;
  return outcome;
}

/**
 * A lone run in its one-statement form (RunOptions.alone), else as usual (runAlone). The statement
 * commits by itself, so it either wrote the change, its record and its outbox row, or nothing: on
 * no row, or on a database's failure (a constraint, a lock timeout, a deadlock), the body runs and
 * decides; any other failure is a bug of the form, and is thrown rather than hidden by the body.
 * A lost connection is answered 503, as in a batch: the statement may have committed, and an
 * Idempotency-Key makes the retry safe.
 */
export async function runLone<T>(parts: RunnerParts, ctx: RequestContext, uc: UseCase, body: UseCaseBody<T>, alone: AloneForm<T> | undefined): Promise<T> {
  if (alone === undefined || !ctx.actor) return runAlone(parts, ctx, uc, body);
  let rows: Record<string, unknown>[];
  try {
    rows = await parts.store.writer.recordAlone(parts.db, ctx, alone.change, alone.params);
  } catch (err) {
    if (isUnavailableError(err) || pgErrorCode(err) === undefined) throw err;
    return runAlone(parts, ctx, uc, body);
  }
  if (rows.length !== 1) {
    if (rows.length > 1) throw new UseCaseContractError(`${uc.name}: its one-statement form made ${rows.length} changes`);
    return runAlone(parts, ctx, uc, body);
  }
  if (rows[0]!.recorded) parts.commits.committed({ audited: true, events: alone.change.events + 1 });
  return alone.answer(rows[0]!);
}

/**
 * `store`: what runs lock and write through (runtime.ts, runnerStore). `commits` is told after every
 * commit that carried a record or events (the relay and the sealer take them).
 */
export function createRunner(db: Database, store: RunnerStore, commits: CommitSignal, batching: BatchSettings = batchingFor(db.kind)): Run {
  const parts: RunnerParts = { db, store, commits };
  const batcher = new Batcher(parts, batching, (ctx, uc, body, alone) => runLone(parts, ctx, uc, body, alone));
  return function run<T>(ctx: RequestContext, uc: UseCase, body: UseCaseBody<T>, opts: RunOptions<T> = {}): Promise<T> {
    if (uc.batch && ctx.actor && opts.callerLock === undefined) return batcher.submit(ctx, uc, body, opts.batchKey, opts.alone);
    if (opts.alone && opts.callerLock === undefined) return runLone(parts, ctx, uc, body, opts.alone);
    return runAlone(parts, ctx, uc, body, opts);
  };
}
