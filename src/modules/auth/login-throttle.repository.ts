// The statements of the brute-force throttle (auth/auth.throttle.ts): failed logins, counted in the
// database so that every instance agrees.
import type { Queryable, Tx } from '../../db/database.js';
import { query, statements } from '../../db/statements.js';

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

/** Serializes the attempts on one address and on one email until the transaction ends. */
export const lockLoginAttempts = (tx: Tx, ip: string, email: string) => query(tx, S.lock, [ip, email]);

/**
 * Seconds until enough failures for this email or address leave the last `windowMinutes` for
 * neither to hold more than the limit's worth (`emailLimit`, `addressLimit`); undefined when
 * neither limit is reached.
 */
export async function loginRetryAfter(q: Queryable, email: string, ip: string, windowMinutes: number, emailLimit: number, addressLimit: number): Promise<number | undefined> {
  const rows = await query<{ retry_after: number | null }>(q, S.retryAfter, [email, ip, windowMinutes, emailLimit - 1, addressLimit - 1]);
  return rows[0]?.retry_after ?? undefined;
}

export const countLoginFailure = (tx: Tx, email: string, ip: string) => query(tx, S.countFailure, [email, ip]);

export const pruneLoginFailuresOlderThan = (q: Queryable, minutes: number) => query(q, S.prune, [minutes]);
