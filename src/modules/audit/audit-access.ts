// Who may read the audit log: the one rule, checked for every audit route (audit.routes.ts) and
// again, against the session as it stands, while an export streams (evidence.service.ts).
import type { Actor } from '../../context.js';
import { forbidden } from '../../domain/errors.js';

export function requireAuditor(actor: Actor): void {
  if (actor.role !== 'ADMIN') throw forbidden('The audit log is for ADMINs only');
}
