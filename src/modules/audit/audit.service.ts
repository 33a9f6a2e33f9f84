// Reading the audit log (ADMINs) and one's own security events. Records carry personal data
// only as references (audit.writer.ts); reading puts the values back, or "[redacted]" once
// they were erased.
import type { Actor } from '../../context.js';
import type { Deps } from '../../deps.js';
import { notFound } from '../../domain/errors.js';
import { pageOf, type Page, type PageRequest } from '../../domain/page.js';
import { PERSONAL_MARKER } from './audit.writer.js';
import { findAuditRecord, findAuditRecords, findPersonalData, queryAuditLog, querySecurityLog, type AuditFilters, type AuditRow } from './audit.repository.js';

export const REDACTED = '[redacted]';

const isRef = (v: unknown): v is Record<string, string> =>
  typeof v === 'object' && v !== null && typeof (v as Record<string, unknown>)[PERSONAL_MARKER] === 'string';

export function createAuditService(deps: Deps) {
  const { db } = deps;

  /** Puts personal data back into records: the stored value while it exists, else "[redacted]". */
  async function resolvePersonalData(rows: AuditRow[]): Promise<AuditRow[]> {
    const refs = new Set<string>();
    for (const row of rows) for (const v of Object.values(row.metadata)) if (isRef(v)) refs.add(v[PERSONAL_MARKER]!);
    if (refs.size === 0) return rows;
    const values = new Map((await findPersonalData(db, [...refs])).map((r) => [r.ref, r.value]));
    return rows.map((row) => {
      if (!Object.values(row.metadata).some(isRef)) return row;
      const metadata = Object.fromEntries(Object.entries(row.metadata).map(([k, v]) => [k, isRef(v) ? (values.get(v[PERSONAL_MARKER]!) ?? REDACTED) : v]));
      return { ...row, metadata };
    });
  }

  const resolvedPage = async (page: Page<AuditRow>): Promise<Page<AuditRow>> => ({ items: await resolvePersonalData(page.items), next: page.next });

  return {
    async search(filters: AuditFilters, page: PageRequest): Promise<Page<AuditRow>> {
      return resolvedPage(pageOf(await queryAuditLog(db, filters, page.after, page.limit), page));
    },

    /** Records by id, as the API shows them (for the /admin namespace's audit-record events). */
    async byIds(ids: number[]): Promise<AuditRow[]> {
      return resolvePersonalData(await findAuditRecords(db, ids));
    },

    async get(id: number): Promise<AuditRow> {
      const record = await findAuditRecord(db, id);
      if (!record) throw notFound('Audit record');
      return (await resolvePersonalData([record]))[0]!;
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
