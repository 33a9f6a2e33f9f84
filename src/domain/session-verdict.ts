// Whether a session still entitles its caller, decided the same way for every request
// (authentication) and again inside every use case's transaction (use-cases/runner.ts).
import type { Actor, UserRole } from '../context.js';
import { accountDeactivated, unauthenticated } from './errors.js';

/** A session with its user, as sessions.repository reads it. */
export interface SessionRow {
  id: number;
  email: string;
  name: string;
  role: UserRole;
  active: boolean;
  revoked: boolean;
  expired: boolean;
}

/** The caller as the row says they are now; throws when the session no longer entitles them. */
export function liveActor(row: SessionRow | undefined, claimed: { id: number; sessionId: number }): Actor {
  if (!row || row.id !== claimed.id) throw unauthenticated('TOKEN_REVOKED', 'The session no longer exists');
  if (!row.active) throw accountDeactivated();
  if (row.revoked) throw unauthenticated('TOKEN_REVOKED', 'The session has been revoked');
  if (row.expired) throw unauthenticated('TOKEN_EXPIRED', 'The session has expired; log in again');
  return { id: row.id, email: row.email, name: row.name, role: row.role, sessionId: claimed.sessionId };
}
