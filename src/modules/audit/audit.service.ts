// Reading the audit log (ADMINs) and one's own security events. Records carry personal data
// only as references (audit.writer.ts); reading puts the values back, or "[redacted]" once
// they were erased.
import type { Actor, ActorContext, RequestContext } from '../../context.js';
import type { Database, Queryable } from '../../db/database.js';
import type { Deps } from '../../deps.js';
import { invalidQuery, notFound } from '../../domain/errors.js';
import { useCase } from '../../use-cases/runner.js';
import { pageOf, type Page, type PageRequest } from '../../domain/page.js';
import { PERSONAL_MARKER, personalRefOf } from './audit.writer.js';
import {
  findAuditRecord, findPersonalData, findUsersByEmail, queryAuditLog, queryAuditLogUnderCeiling, querySecurityLog,
  type AuditFilters, type AuditRow, type ResolvedSearch,
} from './audit.repository.js';
import { parseAuditSearch, windowsBoundedAbove, type AuditSearch } from './audit.search.js';
import { findActorDeletions, findActorUsers } from './audit-actors.repository.js';
import { readAuditStats, statsWindow, type AuditStats, type StatsInterval } from './audit-stats.service.js';

export const REDACTED = '[redacted]';

const isRef = (v: unknown): v is Record<string, string> => personalRefOf(v) !== undefined;

/** Puts personal data back into records (or rows with a record's metadata): the stored value while it exists, else "[redacted]". */
export async function resolvePersonalData<R extends Pick<AuditRow, 'metadata'>>(q: Queryable, rows: R[]): Promise<R[]> {
  const refs = new Set<string>();
  for (const row of rows) for (const v of Object.values(row.metadata)) if (isRef(v)) refs.add(v[PERSONAL_MARKER]!);
  if (refs.size === 0) return rows;
  const values = new Map((await findPersonalData(q, [...refs])).map((r) => [r.ref, r.value]));
  return rows.map((row) => {
    if (!Object.values(row.metadata).some(isRef)) return row;
    const metadata = Object.fromEntries(Object.entries(row.metadata).map(([k, v]) => [k, isRef(v) ? (values.get(v[PERSONAL_MARKER]!) ?? REDACTED) : v]));
    return { ...row, metadata };
  });
}

/** The search (q=) parsed, or 400 INVALID_QUERY; undefined for none. Pure: before anything is read or written. */
export function checkedSearch(q: string | undefined): AuditSearch | undefined {
  if (q === undefined) return undefined;
  const parsed = parseAuditSearch(q);
  if (!parsed.ok) throw invalidQuery(parsed.detail);
  return parsed.terms > 0 ? parsed.search : undefined;
}

/**
 * The filters with their search parsed and its emails looked up (an email nobody holds names
 * nobody): what the list and the export query with.
 */
export async function resolveSearch(q: Queryable, filters: AuditFilters): Promise<AuditFilters> {
  const search = checkedSearch(filters.q);
  if (!search) return filters;
  const { actor, ...rest } = search;
  if (!actor) return { ...filters, search: rest };
  const emails = [...new Set([...actor.any, ...actor.not].flatMap((a) => (typeof a === 'object' && 'email' in a ? [a.email] : [])))];
  const ids = new Map((emails.length > 0 ? await findUsersByEmail(q, emails) : []).map((u) => [u.email, u.id]));
  const resolve = (a: (typeof actor.any)[number]) => (a === 'none' ? a : 'id' in a ? { ids: [a.id] } : { ids: ids.has(a.email) ? [ids.get(a.email)!] : [] });
  const resolved: ResolvedSearch = { ...rest, actor: { any: actor.any.map(resolve), not: actor.not.map(resolve) } };
  return { ...filters, search: resolved };
}

/**
 * A page of the list of records matching resolved filters (resolveSearch), newest first by id.
 * When the search's created: windows are all bounded above, the page is read under their id
 * ceiling, in a read-only transaction of its own planned for its values (audit.repository.ts,
 * queryAuditLogUnderCeiling): a window months old no longer walks every newer record.
 */
export function listAuditLog(db: Database, f: AuditFilters, beforeId: number | undefined, limit: number): Promise<AuditRow[]> {
  const windows = windowsBoundedAbove(f.search?.created);
  if (!windows) return queryAuditLog(db, f, beforeId, limit);
  return db.transaction((tx) => queryAuditLogUnderCeiling(tx, f, windows, beforeId, limit), { planEachStatement: true });
}

/** An actor as the console names it; null where nothing is known (an id that names no user now, and no deletion of one). */
export interface ActorName {
  email: string | null;
  name: string | null;
}

/**
 * The users `ids` name, as the API shows them: a user's email and name as they are now (as
 * GET /users shows them); a user deleted since, the email their DELETE_USER record holds, as
 * the record shows it ("[redacted]" once erased), and no name (the log never held one).
 */
export async function actorNames(q: Queryable, ids: number[]): Promise<Map<number, ActorName>> {
  const wanted = [...new Set(ids)].sort((a, b) => a - b);
  const names = new Map<number, ActorName>();
  if (wanted.length === 0) return names;
  const users = new Map((await findActorUsers(q, wanted)).map((u) => [u.id, u]));
  const gone = wanted.filter((id) => !users.has(id));
  const deletions = new Map(gone.length === 0 ? [] : (await resolvePersonalData(q, await findActorDeletions(q, gone))).map((d) => [d.id, d.metadata]));
  for (const id of wanted) {
    const user = users.get(id);
    const email = deletions.get(id)?.email;
    names.set(id, user ? { email: user.email, name: user.name } : { email: typeof email === 'string' ? email : null, name: null });
  }
  return names;
}

const EXPORT = useCase('audit.export', ['EXPORT_AUDIT_LOG']);

export function createAuditService(deps: Deps) {
  const { db, run } = deps;

  const resolvedPage = async (page: Page<AuditRow>): Promise<Page<AuditRow>> => ({ items: await resolvePersonalData(db, page.items), next: page.next });

  return {
    async search(filters: AuditFilters, page: PageRequest): Promise<Page<AuditRow>> {
      return resolvedPage(pageOf(await listAuditLog(db, await resolveSearch(db, filters), page.after, page.limit), page));
    },

    /** The page's actors by id (GET /audit-logs?include=actors): each non-null actor_id of `records` once. */
    async actorsOf(records: AuditRow[]): Promise<Record<string, ActorName>> {
      const names = await actorNames(db, records.flatMap((r) => (r.actor_id === null ? [] : [r.actor_id])));
      return Object.fromEntries([...names].map(([id, name]) => [String(id), name]));
    },

    /** Counts of the records a list with the same filters and q would give, over their window (audit-stats.service.ts). */
    async stats(filters: AuditFilters, interval: StatsInterval | undefined): Promise<AuditStats> {
      const resolved = await resolveSearch(db, filters);
      return readAuditStats(db, resolved, statsWindow(resolved, interval, Date.now()), (ids) => actorNames(db, ids));
    },

    /** An export is itself audited (docs/api.md 4): one EXPORT_AUDIT_LOG record, written before the first line. */
    async recordExport(ctx: ActorContext | RequestContext, format: string, filters: AuditFilters): Promise<void> {
      // A query the syntax refuses is refused before anything is written, as a bad filter is (by its schema).
      checkedSearch(filters.q);
      await run(ctx, EXPORT, async (uow) => {
        // Metadata keys are camelCase (docs/api.md 5); the filters keep their query names' meaning.
        const camel = Object.fromEntries(Object.entries(filters).filter(([, v]) => v !== undefined).map(([k, v]) => [k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()), v]));
        uow.audit({ action: 'EXPORT_AUDIT_LOG', resourceType: 'AUDIT_LOG', resourceId: null, metadata: { format, filters: camel } });
      });
    },

    async get(id: number): Promise<AuditRow> {
      const record = await findAuditRecord(db, id);
      if (!record) throw notFound('Audit record');
      return (await resolvePersonalData(db, [record]))[0]!;
    },

    /**
     * A user's own security events. Someone else's action on their account (an ADMIN changing
     * their email, a refused attempt) is shown, but that actor's address and user agent are
     * theirs, not the user's.
     */
    async securityLog(viewer: Actor, page: PageRequest): Promise<Page<AuditRow>> {
      const rows = await querySecurityLog(db, viewer.id, page.after, page.limit);
      const own = rows.map((r) => (r.actor_id === viewer.id || r.actor_id === null ? r : { ...r, ip: null, user_agent: null }));
      return resolvedPage(pageOf(own, page));
    },
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
