// A connected socket's session (docs/api.md section 6): checked once more after it connects (a
// revocation may have slipped past its handshake), ended when its access token expires, and
// renewed by the client's `reauth` with a fresh token.
import type { FastifyBaseLogger } from 'fastify';
import { DomainError, forbidden } from '../domain/errors.js';
import type { Services } from '../services.js';
import { errorAck, type Ack } from './acks.js';
import type { CatchingUp } from './delivery.js';
import type { HandshakeLimit } from './handshake.js';
import { sessionRoom, type RealtimeSocket } from './sockets.js';

/**
 * A connected socket's session (and for /admin its role) is checked again. The handshake
 * checked it before the socket joined its rooms and connected, and a revocation delivered in
 * between (delivery.ts acts on connected sockets only) passed it by. From connection on, a
 * revocation that commits after this read starts is delivered to the socket, and one that
 * committed before is seen here: either way it goes within moments. Answers whether it stays.
 */
export async function recheckSession(
  socket: RealtimeSocket,
  adminOnly: boolean,
  { auth, log, catchingUp }: { auth: Services['auth']; log: FastifyBaseLogger; catchingUp: CatchingUp },
): Promise<boolean> {
  let reason: string | undefined;
  const before = socket.data.actor;
  try {
    const { actor } = await auth.authenticateToken(String(socket.handshake.auth?.token));
    if (actor.id !== before.id) reason = 'another user';
    else if (adminOnly && actor.role !== 'ADMIN') reason = 'no longer an ADMIN';
    // The user as they are now, unless a control event or a reauth already told the socket newer.
    else if (socket.data.actor === before && actor.sessionId === before.sessionId) socket.data.actor = actor;
  } catch (err) {
    // A revoked, expired or deactivated session; or no answer: not kept on trust.
    reason = err instanceof DomainError ? err.code : 'session check failed';
    if (!(err instanceof DomainError)) log.warn({ err }, 'socket session check failed');
  }
  if (reason === undefined) return true;
  log.debug({ userId: before.id, namespace: socket.nsp.name, socketId: socket.id, reason }, 'socket disconnected: session no longer valid');
  socket.disconnect(true);
  catchingUp.of(socket.nsp).delete(socket);
  return false;
}

/** An access token that expires disconnects its socket, unless the client sent `reauth` with a fresh one. */
export function expireAt(socket: RealtimeSocket): void {
  clearTimeout(socket.data.expiry);
  socket.data.expiry = setTimeout(() => socket.disconnect(true), Math.max(0, socket.data.expiresAt - Date.now()));
  socket.data.expiry.unref();
}

/** What a reauth is counted against: the general rate limit (handshake.ts) and the socket's address. */
export interface ReauthLimit {
  limit: HandshakeLimit | undefined;
  address: string;
}

/**
 * `reauth` with the same user's fresh access token: the socket follows its session and its new
 * expiry. Each one looks a session up, so it counts against the user's general rate limit like an
 * HTTP request (docs/api.md section 7): past it, the answer is RATE_LIMITED with `retry_after`
 * (seconds), and no session is looked up.
 */
export function handleReauth(socket: RealtimeSocket, auth: Services['auth'], { limit, address }: ReauthLimit): void {
  socket.on('reauth', async (payload: unknown, ack?: unknown) => {
    const answer: Ack = typeof ack === 'function' ? (ack as Ack) : () => {};
    const wait = await limit?.count({ userId: socket.data.actor.id, address }).catch(() => undefined);
    if (wait !== undefined) {
      return answer({ ok: false, error: { code: 'RATE_LIMITED', message: `Too many requests; retry in ${wait} s` }, retry_after: wait });
    }
    const token = typeof payload === 'object' && payload !== null ? (payload as { token?: unknown }).token : undefined;
    if (typeof token !== 'string') return answer(errorAck(new DomainError('invalid', 'VALIDATION_FAILED', 'token must be an access token'), 'UNAVAILABLE'));
    auth.authenticateToken(token).then(
      ({ actor, expiresAt }) => {
        if (actor.id !== socket.data.actor.id) return answer(errorAck(forbidden('The token is another user\'s'), 'UNAVAILABLE'));
        if (actor.sessionId !== socket.data.actor.sessionId) {
          socket.leave(sessionRoom(socket.data.actor.sessionId));
          socket.join(sessionRoom(actor.sessionId));
        }
        socket.data.actor = actor;
        socket.data.expiresAt = expiresAt;
        expireAt(socket);
        answer({ ok: true, expires_at: new Date(expiresAt).toISOString() });
      },
      (err: unknown) => answer(errorAck(err, 'UNAVAILABLE')),
    );
  });
}
