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
import { query, statements } from '../../db/statements.js';

export const WINDOW_MINUTES = 15;
export const MAX_PER_EMAIL = 5;
export const MAX_PER_ADDRESS = 20;

const S = statements('login-throttle', {
  lock: `SELECT pg_advisory_xact_lock(hashtext('login-ip:' || $1)), pg_advisory_xact_lock(hashtext('login-email:' || $2))`,
  // Seconds until the oldest failure that keeps a limit reached leaves the window; null when
  // neither limit is reached.
  retryAfter: `SELECT GREATEST(
    (SELECT extract(epoch FROM created_at + make_interval(mins => $3) - now()) FROM login_failures
      WHERE email = $1 AND created_at > now() - make_interval(mins => $3) ORDER BY created_at DESC OFFSET $4 LIMIT 1),
    (SELECT extract(epoch FROM created_at + make_interval(mins => $3) - now()) FROM login_failures
      WHERE ip = $2 AND created_at > now() - make_interval(mins => $3) ORDER BY created_at DESC OFFSET $5 LIMIT 1)
  )::float8 AS retry_after`,
  countFailure: 'INSERT INTO login_failures (email, ip) VALUES ($1, $2)',
  prune: `DELETE FROM login_failures WHERE created_at < now() - make_interval(mins => $1)`,
});

/** Seconds to wait when the committed failures for this email or address reach a limit. */
export async function throttledFor(q: Queryable, email: string, ip: string): Promise<number | undefined> {
  const rows = await query<{ retry_after: number | null }>(q, S.retryAfter, [email, ip, WINDOW_MINUTES, MAX_PER_EMAIL - 1, MAX_PER_ADDRESS - 1]);
  return rows[0]?.retry_after ?? undefined;
}

/**
 * Settles an attempt whose password was checked, in the transaction that acts on it: when
 * a limit was reached meanwhile, answers how long to wait (the attempt is not counted);
 * otherwise counts it if it failed.
 */
export async function settleAttempt(tx: Tx, email: string, ip: string, failed: boolean): Promise<number | undefined> {
  await query(tx, S.lock, [ip, email]);
  const retryAfter = await throttledFor(tx, email, ip);
  if (retryAfter === undefined && failed) await query(tx, S.countFailure, [email, ip]);
  return retryAfter;
}

export const pruneLoginFailures = (q: Queryable) => query(q, S.prune, [WINDOW_MINUTES]);
