// The brute-force throttle, counted in the database so that every instance agrees: 5 counted
// failures per email or 20 per address within 15 minutes lock further attempts until the
// window passes (docs/api.md section 3). Only failures count: an attempt holds no slot while its
// password is being checked, so a burst of correct logins from one address (an office behind
// one NAT) is never refused. Parallel guesses cannot slip past the limit either: each attempt
// is settled after its check, under an advisory lock per address and per email, against the
// failures committed by then; once the limit is reached every later attempt, right password
// or not, is throttled (recorded, not counted), so a burst tests at most as many guesses as a
// sequence would.
import type { Queryable, Tx } from '../../db/database.js';
import { countLoginFailure, lockLoginAttempts, loginRetryAfter, pruneLoginFailuresOlderThan } from './login-throttle.repository.js';

export const WINDOW_MINUTES = 15;
export const MAX_PER_EMAIL = 5;
export const MAX_PER_ADDRESS = 20;

/** Seconds to wait when the committed failures for this email or address reach a limit. */
export async function throttledFor(q: Queryable, email: string, ip: string): Promise<number | undefined> {
  return loginRetryAfter(q, email, ip, WINDOW_MINUTES, MAX_PER_EMAIL, MAX_PER_ADDRESS);
}

/**
 * Settles an attempt whose password was checked, in the transaction that acts on it: when
 * a limit was reached meanwhile, answers how long to wait (the attempt is not counted);
 * otherwise counts it if it failed.
 */
export async function settleAttempt(tx: Tx, email: string, ip: string, failed: boolean): Promise<number | undefined> {
  await lockLoginAttempts(tx, ip, email);
  const retryAfter = await throttledFor(tx, email, ip);
  if (retryAfter === undefined && failed) await countLoginFailure(tx, email, ip);
  return retryAfter;
}

export const pruneLoginFailures = (q: Queryable) => pruneLoginFailuresOlderThan(q, WINDOW_MINUTES);
