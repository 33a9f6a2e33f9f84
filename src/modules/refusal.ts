// Refusing an audited action on an existing resource writes one DENIED record (in its own
// transaction: nothing else changed), whether the answer is 403 or a 404 that hides the
// resource from a caller who may not see it (API.md 5.3).
import type { RequestContext } from '../context.js';
import type { Deps } from '../deps.js';
import { forbidden, notFound } from '../http/errors.js';
import type { AuditEntry } from './audit/audit.writer.js';

export type Refusal = { status: 403 } | { status: 404; what: string };

export async function refuse(
  deps: Pick<Deps, 'db' | 'audit'>,
  ctx: RequestContext,
  refusal: Refusal,
  audited?: Omit<AuditEntry, 'result'>,
): Promise<never> {
  if (audited) await deps.audit.deny(deps.db, ctx, audited);
  throw refusal.status === 404 ? notFound(refusal.what) : forbidden();
}
