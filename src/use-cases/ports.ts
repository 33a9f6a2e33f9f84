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
