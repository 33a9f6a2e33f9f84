// Who may read the audit log: the one rule, checked for every audit route (audit.routes.ts) and
// again, against the session as it stands, while an export streams (evidence.service.ts).
import type { Actor } from '../../context.js';
import { authorize, definePolicy } from '../../domain/authorization.js';

export const auditPolicy = definePolicy<Actor, 'read'>({ see: () => true, read: (actor) => actor.role === 'ADMIN' }, { read: 'The audit log is for ADMINs only' });

export function requireAuditor(actor: Actor): void {
  authorize(auditPolicy.can('read', actor), 'Audit log');
}
