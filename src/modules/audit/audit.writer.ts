// Writes audit records. Only the use-case runner (use-cases/runner.ts) calls it: a use case
// records through its unit of work, which holds the transaction, so a record commits or
// rolls back with the change it describes, and is written after it. The record is sent, not
// awaited (Tx.send): it travels with COMMIT, and if it fails the whole transaction fails.
//
// A record is also an event: the /admin namespace shows it live (docs/api.md 5.7). So its statement
// writes the transaction's outbox row too, the change's events and then the record's own, which
// names it by id: delivery reads the record only for an instance with a socket in /admin
// (realtime/delivery.ts), and the record is not written twice (a copy in the outbox was a tenth of
// a request's WAL). One statement instead of two: the hot write paths pay per statement.
import type { Queryable, Tx } from '../../db/database.js';
import type { RequestContext } from '../../context.js';
import type { OutboxEvent } from '../../domain/events.js';
import type { AloneChange, AuditEntry, AuditWriter, Written } from '../../use-cases/ports.js';
import { runAlone, runMany, sendAuditBatch, sendAuditRecord, sendPersonalData } from './audit-writer.repository.js';
import { newPersonalDataRef } from './audit.personal-data.js';

export type { AuditEntry, AuditWriter, Written } from '../../use-cases/ports.js';
export { AUDIT_ACTIONS, AUDIT_RESULTS, RESOURCE_TYPES, type AuditAction, type AuditResult, type ResourceType } from '../../domain/audit-vocabulary.js';


/**
 * Metadata keys whose values are personal data (docs/api.md 5.10). Their values are stored in
 * audit_personal_data; the record itself holds only {"$personal": "<keyed hash>"}, a ref of
 * its own for each value written (audit.personal-data.ts), so that an erased value never comes back.
 */
export const PERSONAL_KEYS = ['email', 'oldEmail', 'newEmail'] as const;
export const PERSONAL_MARKER = '$personal';

/** The ref a metadata value stands for a personal value with (`{"$personal": ref}`), else undefined. */
export function personalRefOf(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const ref = (value as Record<string, unknown>)[PERSONAL_MARKER];
  return typeof ref === 'string' ? ref : undefined;
}

const MAX_IP = 64;
const MAX_USER_AGENT = 512;

/** The request's columns of a record (ip, user agent, request id), bounded as audit_log holds them (migrations/0008): a sealed form must fit a tlog-tiles entry. */
const requestColumns = (ctx: RequestContext): [string | null, string | null, string] => [
  ctx.ip?.slice(0, MAX_IP) ?? null,
  ctx.userAgent?.slice(0, MAX_USER_AGENT) ?? null,
  ctx.requestId,
];


export function createAuditWriter(personalDataKey: Buffer): AuditWriter {
  /** The record's columns in the order of the insert (actor_id … request_id); its personal values sent first. */
  function columnsOf(tx: Tx, ctx: RequestContext, entry: AuditEntry): unknown[] {
    const subject = entry.subjectUserId !== undefined ? entry.subjectUserId : entry.resourceType === 'USER' ? entry.resourceId : null;
    const metadata: Record<string, unknown> = { ...entry.metadata };
    const personal: Array<{ ref: string; value: string; salt: string }> = [];
    for (const key of PERSONAL_KEYS) {
      const value = metadata[key];
      if (typeof value === 'string') {
        const { ref, salt } = newPersonalDataRef(personalDataKey, subject, value);
        personal.push({ ref, value, salt: salt.toString('hex') });
        metadata[key] = { [PERSONAL_MARKER]: ref };
      }
    }
    if (personal.length > 0) {
      sendPersonalData(tx, subject, personal);
    }
    return [
      entry.actorId !== undefined ? entry.actorId : (ctx.actor?.id ?? null),
      entry.action,
      entry.resourceType,
      entry.resourceId,
      entry.result ?? 'SUCCESS',
      JSON.stringify(metadata),
      ...requestColumns(ctx),
    ];
  }

  function record(tx: Tx, ctx: RequestContext, entry: AuditEntry, events: OutboxEvent[] = []): void {
    sendAuditRecord(tx, columnsOf(tx, ctx, entry), events);
  }

  function recordBatch(tx: Tx, written: readonly Written[]): void {
    sendAuditBatch(
      tx,
      written.map((w) => (w.entry ? columnsOf(tx, w.ctx, w.entry) : undefined)),
      written.map((w) => w.events),
    );
  }

  /** The caller a one-statement form checks and records: it has no form for an anonymous one. */
  function callerOf(ctx: RequestContext, change: AloneChange) {
    if (!ctx.actor) throw new Error(`${change.name}: a one-statement form needs an authenticated caller`);
    return ctx.actor;
  }

  function recordAlone(q: Queryable, ctx: RequestContext, change: AloneChange, params: readonly unknown[]): Promise<Record<string, unknown>[]> {
    return runAlone(q, change, callerOf(ctx, change), requestColumns(ctx), params);
  }

  function recordMany(q: Queryable, change: AloneChange, runs: ReadonlyArray<{ ctx: RequestContext; params: readonly unknown[] }>): Promise<Record<string, unknown>[]> {
    return runMany(q, change, runs.map(({ ctx, params }) => ({ caller: callerOf(ctx, change), request: requestColumns(ctx), params })));
  }

  return { record, recordBatch, recordAlone, recordMany };
}
