// The brute-force throttle, counted in the database so that every instance agrees: 5 counted
// failures per email or 20 per address within 15 minutes lock further attempts until the
// window passes. An attempt reserves its failure row before the password is checked (under
// an advisory lock per address and per email), so a burst of parallel guesses cannot slip
// past the limit; a success or an uncounted outcome releases the reservation.
import type { Tx } from '../../db/database.js';

export const WINDOW_MINUTES = 15;
export const MAX_PER_EMAIL = 5;
export const MAX_PER_ADDRESS = 20;

export type Reservation = { throttled: true; retryAfter: number } | { throttled: false; id: number };

export async function reserveAttempt(tx: Tx, email: string, ip: string): Promise<Reservation> {
  await tx.query(`SELECT pg_advisory_xact_lock(hashtext('login-ip:' || $1)), pg_advisory_xact_lock(hashtext('login-email:' || $2))`, [ip, email]);
  const rows = await tx.query<{ retry_after: number | null }>(
    `SELECT GREATEST(
       (SELECT extract(epoch FROM created_at + make_interval(mins => $3) - now()) FROM login_failures
         WHERE email = $1 AND created_at > now() - make_interval(mins => $3) ORDER BY created_at DESC OFFSET $4 LIMIT 1),
       (SELECT extract(epoch FROM created_at + make_interval(mins => $3) - now()) FROM login_failures
         WHERE ip = $2 AND created_at > now() - make_interval(mins => $3) ORDER BY created_at DESC OFFSET $5 LIMIT 1)
     )::float8 AS retry_after`,
    [email, ip, WINDOW_MINUTES, MAX_PER_EMAIL - 1, MAX_PER_ADDRESS - 1],
  );
  const retryAfter = rows[0]?.retry_after;
  if (retryAfter !== null && retryAfter !== undefined) return { throttled: true, retryAfter };
  const inserted = await tx.query<{ id: number }>('INSERT INTO login_failures (email, ip) VALUES ($1, $2) RETURNING id', [email, ip]);
  return { throttled: false, id: inserted[0]!.id };
}

/** The attempt did not fail (or its failure is not counted): it no longer counts. */
export async function releaseAttempt(tx: Tx, id: number): Promise<void> {
  await tx.query('DELETE FROM login_failures WHERE id = $1', [id]);
}
