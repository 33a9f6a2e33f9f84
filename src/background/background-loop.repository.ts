// The statement of the background loop (background-loop.ts): the advisory lock of a round that
// one instance runs at a time.
import type { Tx } from '../db/database.js';
import { query, statements } from '../db/statements.js';

const S = statements('background-loop', {
  tryLock: 'SELECT pg_try_advisory_xact_lock($1) AS locked',
});

/** Takes the transaction-scoped advisory lock `key` if no other transaction holds it; answers whether it did. */
export async function tryAdvisoryLock(tx: Tx, key: number): Promise<boolean> {
  const [lock] = await query<{ locked: boolean }>(tx, S.tryLock, [key]);
  return lock?.locked === true;
}
