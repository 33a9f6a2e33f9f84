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
import type { Actor, RequestContext } from '../context.js';
import type { Database, Tx } from '../db/database.js';
import { pgConstraint, pgErrorCode } from '../db/database.js';
import { refusalOf, type Verdict } from '../domain/authorization.js';
import { conflict, type DomainError } from '../domain/errors.js';
import type { AuditAction, AuditEntry, AuditWriter, ResourceType } from '../modules/audit/audit.writer.js';
import type { OutboxEvent } from '../modules/outbox/outbox.events.js';
import { addEvents } from '../modules/outbox/outbox.repository.js';
import { liveActor } from '../modules/sessions/sessions.verdict.js';
import { lockActor, type CallerLock } from '../modules/sessions/sessions.repository.js';
import type { CommitSignal, Committed } from './commit-signal.js';

/** A use case's name (for errors and logs) and the audit actions it may record. */
export interface UseCase {
  readonly name: string;
  /** Empty: the use case is not audited and may write no record. */
  readonly audits: readonly AuditAction[];
}

export const useCase = (name: string, audits: readonly AuditAction[] = []): UseCase => ({ name, audits });

export interface RunOptions {
  /**
   * How the caller's user and session rows are locked (default: FOR KEY SHARE). A use case
   * that will lock those rows more strongly later must say so here, so that the stronger lock
   * is taken first: logout revokes its own session ('revoking own session'); a change of
   * users' rights or sessions ({ changingUsers }) locks those users with the caller, in id
   * order. Two runs that each took a shared lock and then upgraded, or that locked the same
   * users in opposite orders, would deadlock.
   */
  callerLock?: CallerLock;
}

/** What a refused, audited action records (result DENIED): the action and what it was aimed at. */
export interface DeniedRecord {
  action: AuditAction;
  resourceType: ResourceType;
  resourceId: number | null;
  metadata?: Record<string, unknown>;
}

/** Thrown by `authorize`: the runner rolls back, records the refusal, and throws `error`. */
class Refusal extends Error {
  constructor(
    readonly error: DomainError,
    readonly record: DeniedRecord | undefined,
  ) {
    super(error.message);
  }
}

/** Returned by a use case whose failure is itself a change to keep (failAfterCommit). */
class CommittedFailure {
  constructor(readonly error: DomainError) {}
}

/** A use case broke the runner's rules: a bug, never the caller's fault (answered 500). */
export class UseCaseContractError extends Error {
  override name = 'UseCaseContractError';
}

export interface UnitOfWork {
  readonly tx: Tx;
  readonly ctx: RequestContext;
  /**
   * The caller as the database has them now (role, active, session), locked for this
   * transaction. Throws 401/403 when the session was revoked or the user deactivated since
   * the request was authenticated. Decide with this, never with the request-time role.
   */
  actor(): Promise<Actor>;
  /** The use case's one audit record (after its change; sent at the end, with COMMIT). */
  audit(entry: AuditEntry): void;
  /** Outbox events of the change (real-time), written in the same transaction. */
  emit(...events: OutboxEvent[]): void;
  /** An audited use case that changed nothing audited says so instead of recording. */
  withoutRecord(reason: 'unchanged' | 'not audited'): void;
  /**
   * Goes on when `verdict` allows; else refuses: rolls back, records `denied` as DENIED (the
   * refused action of an audited use case), and throws 404 for `resource` when the caller may
   * not know it exists, else 403.
   */
  authorize(verdict: Verdict, resource: string, denied?: DeniedRecord): void;
  /**
   * Commits what the use case did (its record included), then throws `error` to the caller.
   * Only for a failure that is itself a change to keep: a failed login (its LOGIN_FAILURE record
   * and throttle count), a reused refresh token (the session revoked), a wrong current password
   * (its DENIED record and throttle count). Return it from the use case.
   */
  failAfterCommit(error: DomainError): CommittedFailure;
}

/** A unique constraint a concurrent request can win, and the domain's answer to losing. */
const CONSTRAINT_CONFLICTS: Record<string, () => DomainError> = {
  users_email_key: () => conflict('EMAIL_TAKEN', 'A user with this email already exists'),
};

class Work implements UnitOfWork {
  private record: AuditEntry | undefined;
  private noRecord: string | undefined;
  private readonly events: OutboxEvent[] = [];
  private readonly caller: Promise<Actor> | undefined;

  constructor(
    readonly tx: Tx,
    readonly ctx: RequestContext,
    private readonly uc: UseCase,
    callerLock: CallerLock | undefined,
  ) {
    const actor = ctx.actor;
    if (actor) {
      // Sent now, answered with the use case's first statement (pipelined). The verdict is
      // awaited at the latest before COMMIT, so no run commits for a caller who lost the right.
      this.caller = lockActor(tx, actor.id, actor.sessionId, callerLock).then((row) => liveActor(row, actor));
      this.caller.catch(() => {}); // awaited in finish(); never an unhandled rejection
    }
  }

  actor(): Promise<Actor> {
    if (!this.caller) throw new UseCaseContractError(`${this.uc.name} needs an authenticated caller`);
    return this.caller;
  }

  audit(entry: AuditEntry): void {
    if (!this.uc.audits.includes(entry.action)) {
      throw new UseCaseContractError(`${this.uc.name} may record only ${this.uc.audits.join(', ') || 'nothing'}, not ${entry.action}`);
    }
    if (this.record) throw new UseCaseContractError(`${this.uc.name} recorded twice (${this.record.action}, ${entry.action})`);
    this.record = entry;
  }

  emit(...events: OutboxEvent[]): void {
    this.events.push(...events);
  }

  withoutRecord(reason: 'unchanged' | 'not audited'): void {
    this.noRecord = reason;
  }

  authorize(verdict: Verdict, resource: string, denied?: DeniedRecord): void {
    if (denied && !this.uc.audits.includes(denied.action)) {
      throw new UseCaseContractError(`${this.uc.name} may not record a refused ${denied.action}`);
    }
    if (!verdict.allowed) throw new Refusal(refusalOf(verdict, resource), denied);
  }

  failAfterCommit(error: DomainError): CommittedFailure {
    return new CommittedFailure(error);
  }

  /** What the commit carries (a record brings its /admin event); undefined when nothing worth announcing. */
  get carried(): Committed | undefined {
    const audited = this.record !== undefined;
    const events = this.events.length + (audited ? 1 : 0);
    return audited || events > 0 ? { audited, events } : undefined;
  }

  /** Before COMMIT: the caller is still entitled, the record rule holds, and the record goes out. */
  async finish(writer: AuditWriter): Promise<void> {
    if (this.caller) await this.caller;
    if (this.uc.audits.length > 0) {
      if (this.record && this.noRecord) throw new UseCaseContractError(`${this.uc.name} recorded ${this.record.action} and also said ${this.noRecord}`);
      if (!this.record && !this.noRecord) throw new UseCaseContractError(`${this.uc.name} committed without its audit record`);
    }
    if (this.record) writer.record(this.tx, this.ctx, this.record, this.events);
    else addEvents(this.tx, this.events);
  }
}

export type UseCaseBody<T> = (uow: UnitOfWork) => Promise<T | CommittedFailure>;
export type Run = <T>(ctx: RequestContext, uc: UseCase, body: UseCaseBody<T>, opts?: RunOptions) => Promise<T>;

/** `commits` is told after every commit that carried a record or events (the relay and the sealer take them). */
export function createRunner(db: Database, writer: AuditWriter, commits: CommitSignal): Run {
  return async function run<T>(ctx: RequestContext, uc: UseCase, body: UseCaseBody<T>, opts: RunOptions = {}): Promise<T> {
    let outcome: T | CommittedFailure;
    try {
      outcome = await db.transaction(async (tx) => {
        const work = new Work(tx, ctx, uc, opts.callerLock);
        const result = await body(work);
        await work.finish(writer);
        const carried = work.carried;
        if (carried) tx.afterCommit(() => commits.committed(carried));
        return result;
      });
    } catch (err) {
      if (err instanceof Refusal) {
        if (err.record) {
          const denied = err.record;
          await db.transaction(async (tx) => writer.record(tx, ctx, { ...denied, result: 'DENIED' }));
          commits.committed({ audited: true, events: 1 });
        }
        throw err.error;
      }
      const lostRace = pgErrorCode(err) === '23505' ? CONSTRAINT_CONFLICTS[pgConstraint(err) ?? ''] : undefined;
      throw lostRace ? lostRace() : err;
    }
    if (outcome instanceof CommittedFailure) throw outcome.error;
    return outcome;
  };
}
