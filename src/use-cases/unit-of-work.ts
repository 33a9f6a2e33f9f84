// The unit of work a use case runs in, and the rules it keeps by construction (use-cases/runner.ts
// says what the runner does with them): the caller checked on locked rows, exactly one audit
// record for an audited use case, refusals through authorize(). Shared by a run alone
// (runner.ts) and a run in a batch (batch.ts).
import type { Actor, RequestContext } from '../context.js';
import type { Tx } from '../db/database.js';
import { pgConstraint, pgErrorCode } from '../db/database.js';
import { refusalOf, type Verdict } from '../domain/authorization.js';
import { conflict, type DomainError } from '../domain/errors.js';
import type { AuditAction, ResourceType } from '../domain/audit-vocabulary.js';
import type { OutboxEvent } from '../domain/events.js';
import type { AloneChange, AuditEntry, CallerLock, Written } from './ports.js';
import { liveActor, type SessionRow } from '../domain/session-verdict.js';
import type { Committed } from '../background/commit-signal.js';

/** A use case's name (for errors and logs) and the audit actions it may record. */
export interface UseCase {
  readonly name: string;
  /** Empty: the use case is not audited and may write no record. */
  readonly audits: readonly AuditAction[];
  /**
   * Concurrent runs may share one transaction and one commit (use-cases/batch.ts). Only for a
   * hot write that takes the caller's rows FOR KEY SHARE (no callerLock), never commits a
   * failure (failAfterCommit), and names in `batchKey` the row it reads and then changes.
   */
  readonly batch: boolean;
}

export const useCase = (name: string, audits: readonly AuditAction[] = [], opts: { batch?: boolean } = {}): UseCase => ({
  name,
  audits,
  batch: opts.batch ?? false,
});

export interface RunOptions<T = unknown> {
  /**
   * How the caller's user and session rows are locked (default: FOR KEY SHARE). A use case
   * that will lock those rows more strongly later must say so here, so that the stronger lock
   * is taken first: logout revokes its own session ('revoking own session'); a change of
   * users' rights or sessions ({ changingUsers }) locks those users with the caller, in id
   * order. Two runs that each took a shared lock and then upgraded, or that locked the same
   * users in opposite orders, would deadlock.
   */
  callerLock?: CallerLock;
  /**
   * For a batched use case that reads a row and then changes it on what it read (a task's
   * status, a post's likes): the row, e.g. `task:7`. Two runs with one key never share a batch,
   * since inside one transaction the row lock that orders them would not.
   */
  batchKey?: string;
  /**
   * The run as one statement with its record and outbox row, for when it goes alone (a batch of
   * one): one round trip, no BEGIN or COMMIT, instead of three round trips and six statements.
   * Only where it writes must it agree with the body: when it writes nothing (the caller is no
   * longer entitled, or the case is one the SQL leaves to the body) or fails, the body runs as
   * usual and decides.
   */
  alone?: AloneForm<T>;
}

/** A use case's one-statement form (RunOptions.alone): the change as SQL, its parameters, and the run's answer from its row. */
export interface AloneForm<T> {
  change: AloneChange;
  /** The change's own parameters ($8 on). */
  params: readonly unknown[];
  answer(row: Record<string, unknown>): T;
}

/** What a refused, audited action records (result DENIED): the action and what it was aimed at. */
export interface DeniedRecord {
  action: AuditAction;
  resourceType: ResourceType;
  resourceId: number | null;
  metadata?: Record<string, unknown>;
}

/** Thrown by `authorize`: the runner rolls back, records the refusal, and throws `error`. */
export class Refusal extends Error {
  constructor(
    readonly error: DomainError,
    readonly record: DeniedRecord | undefined,
  ) {
    super(error.message);
  }
}

/** Returned by a use case whose failure is itself a change to keep (failAfterCommit). */
export class CommittedFailure {
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

/** The caller's locked row, however it was locked: by the run itself, or with its batch's callers. */
export type CallerRow = (tx: Tx, actor: Actor) => Promise<SessionRow | undefined>;

export class Work implements UnitOfWork {
  private record: AuditEntry | undefined;
  private noRecord: string | undefined;
  private readonly events: OutboxEvent[] = [];
  private readonly caller: Promise<Actor> | undefined;

  constructor(
    readonly tx: Tx,
    readonly ctx: RequestContext,
    private readonly uc: UseCase,
    callerRow: CallerRow,
  ) {
    const actor = ctx.actor;
    if (actor) {
      // Sent now, answered with the use case's first statement (pipelined). The verdict is
      // awaited at the latest before COMMIT, so no run commits for a caller who lost the right.
      this.caller = callerRow(tx, actor).then((row) => liveActor(row, actor));
      this.caller.catch(() => {}); // awaited in finish(); never an unhandled rejection
    }
  }

  get audited(): boolean {
    return this.uc.audits.length > 0;
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

  /** Before COMMIT: the caller is still entitled and the record rule holds. Answers what the run writes last. */
  async settle(): Promise<Written> {
    if (this.caller) await this.caller;
    if (this.uc.audits.length > 0) {
      if (this.record && this.noRecord) throw new UseCaseContractError(`${this.uc.name} recorded ${this.record.action} and also said ${this.noRecord}`);
      if (!this.record && !this.noRecord) throw new UseCaseContractError(`${this.uc.name} committed without its audit record`);
    }
    return { ctx: this.ctx, entry: this.record, events: this.events };
  }
}

export type UseCaseBody<T> = (uow: UnitOfWork) => Promise<T | CommittedFailure>;
export type Run = <T>(ctx: RequestContext, uc: UseCase, body: UseCaseBody<T>, opts?: RunOptions<T>) => Promise<T>;

/** The caller's domain answer to a unique constraint that a concurrent request won, else the error itself. */
export function lostRaceOr(err: unknown): unknown {
  const lostRace = pgErrorCode(err) === '23505' ? CONSTRAINT_CONFLICTS[pgConstraint(err) ?? ''] : undefined;
  return lostRace ? lostRace() : err;
}

