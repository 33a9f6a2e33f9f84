// Erasure of a user's personal data from the audit log (docs/api.md 5.10): the values go, every
// record stays as it was (it holds refs, not values: audit.personal-data.ts), and the erasure is
// itself audited. Run by the operator (`teamlog audit redact --user <id>`) over an owner
// connection: the service's own role may not delete personal data (R__privileges.sql).
import type { RequestContext } from '../../context.js';
import type { Deps } from '../../deps.js';
import { useCase } from '../../use-cases/runner.js';
import { erasePersonalDataOf, erasePersonalValue } from './personal-data.repository.js';

const REDACT = useCase('audit.redactPersonalData', ['REDACT_PERSONAL_DATA']);

export function createRedactionService(deps: Deps) {
  const { run } = deps;

  return {
    /**
     * Erases every value stored about `userId`, and records REDACT_PERSONAL_DATA with how
     * many (never the values), in one transaction. The user need not exist any more (erasure
     * after deletion is the usual case), and a user with nothing left to erase is recorded too.
     */
    async redactUser(ctx: RequestContext, userId: number): Promise<{ valuesErased: number }> {
      return run(ctx, REDACT, async (uow) => {
        const valuesErased = await erasePersonalDataOf(uow.tx, userId);
        uow.audit({
          action: 'REDACT_PERSONAL_DATA', resourceType: 'USER', resourceId: userId, actorId: null,
          metadata: { valuesErased },
        });
        return { valuesErased };
      });
    },

    /**
     * Erases every stored value equal to `email`, whoever it was about: the way to reach an
     * address that names no user (typed into a failed login), or one several users had.
     * Recorded as REDACT_PERSONAL_DATA with no resource and `scope: "email"`: the address
     * itself is never written, or the record would keep what it erased.
     */
    async redactEmail(ctx: RequestContext, email: string): Promise<{ valuesErased: number }> {
      return run(ctx, REDACT, async (uow) => {
        const valuesErased = await erasePersonalValue(uow.tx, email);
        uow.audit({
          action: 'REDACT_PERSONAL_DATA', resourceType: 'USER', resourceId: null, actorId: null,
          metadata: { valuesErased, scope: 'email' },
        });
        return { valuesErased };
      });
    },
  };
}

export type RedactionService = ReturnType<typeof createRedactionService>;
