// What the use-case runner locks and writes through. The runner is a floor below the modules
// (test/architecture.test.ts: imports point down), so it names here what it needs of them, and
// runtime.ts hands it their implementations (runnerStore): the audit writer
// (modules/audit/audit.writer.ts), the caller's lock (modules/sessions/sessions.repository.ts)
// and the outbox's insert (modules/outbox/outbox.repository.ts).
import type { RequestContext } from '../context.js';
import type { Queryable, Tx } from '../db/database.js';
import type { AuditAction, AuditResult, ResourceType } from '../domain/audit-vocabulary.js';
import type { OutboxEvent } from '../domain/events.js';
import type { SessionRow } from '../domain/session-verdict.js';

export interface AuditEntry {
  action: AuditAction;
  resourceType: ResourceType;
  resourceId: number | null;
  result?: AuditResult;
  /** camelCase keys. Never a password, token or secret. */
  metadata?: Record<string, unknown>;
  /** Defaults to the request's actor; null for an unknown login email or the CLI. */
  actorId?: number | null;
  /** Whose personal data the metadata names (for erasure); defaults to the resource when it is a user. */
  subjectUserId?: number | null;
}

/** What one run of a batch writes last: its record, if any, and its events. */
export interface Written {
  ctx: RequestContext;
  entry: AuditEntry | undefined;
  events: OutboxEvent[];
}

export interface AuditWriter {
  /**
   * Sends the record of a change in the change's transaction, with the transaction's outbox row:
   * `events` (the change's), then the record's own /admin event.
   */
  record(tx: Tx, ctx: RequestContext, entry: AuditEntry, events?: OutboxEvent[]): void;
  /**
   * The same for a batch of runs in one transaction (use-cases/batch.ts), in one statement: every
   * record, and one outbox row with each run's events followed by its record's event, run by run.
   */
  recordBatch(tx: Tx, written: readonly Written[]): void;
  /**
   * A change and its record as one statement, outside any transaction (a lone run's one-statement
   * form, AloneForm): answers the change's one row, or none when the caller's session no longer
   * entitles them or a condition of the change did not hold (then nothing was written).
   */
  recordAlone(q: Queryable, ctx: RequestContext, change: AloneChange, params: readonly unknown[]): Promise<Record<string, unknown>[]>;
  /**
   * The same for many runs in one statement (AloneChange.many): answers the change's rows, each
   * with its run's `ord` (1-based, in the order of `runs`); a run without a row wrote nothing.
   */
  recordMany(q: Queryable, change: AloneChange, runs: ReadonlyArray<{ ctx: RequestContext; params: readonly unknown[] }>): Promise<Record<string, unknown>[]>;
}

/**
 * A use case's change written as SQL that runs, with its caller's check, its audit record and its
 * outbox row, as one statement (audit-writer.repository.ts composes it; the SQL file shows it).
 * `ctes` are common table expressions that may read `caller` (one row, `id`, when the caller's
 * user is active and their session live, both locked FOR KEY SHARE: the runner's caller lock) and
 * `$1` (the caller's id); the change's own parameters are `$8` on. The last one is `change`: one
 * row per run answered, with `recorded` (boolean: false for a change that changed nothing, which
 * is answered with no record and no event), `resource_id` (bigint), `metadata` (jsonb; no personal
 * value, which the writer would have to store apart) and `events` (the change's outbox items, a
 * JSON array as text; '[]' when not recorded), besides what the run answers.
 */
export interface AloneChange {
  /** The composed statement's name: `audit-writer.alone.<name>`. */
  readonly name: string;
  readonly action: AuditAction;
  readonly resourceType: ResourceType;
  /** How many events `events` holds for a recorded change (the record's own /admin event aside). */
  readonly events: number;
  readonly ctes: string;
  /**
   * The same change for many runs in one statement (a batch whose runs all offer this form,
   * use-cases/batch.ts). `columns`: the change's parameters, named and typed, each sent as an
   * array of every run's value. `ctes` read `caller`: one row per run whose caller is live, their
   * user and session rows locked FOR KEY SHARE (`ord`, the run's place from 1; `actor_id`; the
   * columns). The last one is `change`, as above, with each row's `ord`; a run without a row
   * wrote nothing.
   */
  readonly many?: { readonly columns: ReadonlyArray<readonly [name: string, type: string]>; readonly ctes: string };
}

/**
 * How a run locks its caller's rows: FOR KEY SHARE, or FOR UPDATE when it revokes the caller's
 * own session, or with the users whose rights or sessions it changes, in id order.
 */
export type CallerLock = 'key share' | 'revoking own session' | { changingUsers: readonly number[] };

export interface RunnerStore {
  writer: AuditWriter;
  /** Locks the caller's user and session rows (and any users changed); answers the caller's row. */
  lockActor(q: Queryable, userId: number, sessionId: number, mode?: CallerLock): Promise<SessionRow | undefined>;
  /** Locks a batch's callers' rows in one statement; answers each caller's row by session id. */
  lockActors(q: Queryable, callers: ReadonlyArray<{ userId: number; sessionId: number }>): Promise<Map<number, SessionRow>>;
  /** Sends a transaction's outbox row when no record carries its events. */
  addEvents(tx: Tx, events: OutboxEvent[]): void;
}
