// A socket's handshake (docs/api.md section 6): the same session check as HTTP; /admin also
// wants an ADMIN; then the user's socket limit (socket-slots.ts). The rooms are read and joined
// here, before the socket can receive anything. A refusal is the client's connect_error.
//
// A handshake counts against the general rate limit (RATE_LIMIT_PER_MINUTE, docs/api.md section 7)
// like an HTTP request: against its user, or against its address when its token is refused. An
// address that spent its minute (over HTTP or in handshakes) is refused before its session is
// looked up: each handshake of a revoked token would otherwise cost a database read.
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { ExtendedError } from 'socket.io';
import type { Actor } from '../context.js';
import type { Database } from '../db/database.js';
import type { Deps } from '../deps.js';
import { DomainError } from '../domain/errors.js';
import { projectsOf } from '../modules/projects/projects.repository.js';
import type { Services } from '../services.js';
import type { Dispatcher } from './dispatcher.js';
import type { SocketSlots } from './socket-slots.js';
import { projectRoom, sessionRoom, userRoom, type RealtimeNamespace, type RealtimeSocket } from './sockets.js';

export interface HandshakeParts {
  /** Its metrics count the handshakes refused for too many connections, and by the general limit. */
  app: FastifyInstance;
  db: Database;
  log: FastifyBaseLogger;
  auth: Services['auth'];
  dispatcher: Dispatcher;
  slots: SocketSlots;
  /** The general rate limit (http/rate-limit.ts's GeneralLimit, handed over by app.ts); none when RATE_LIMIT_PER_MINUTE is 0. */
  limit: HandshakeLimit | undefined;
  /** The caller's address, as HTTP's request.ip reads it (socket-context.ts, callerAddress). */
  addressOf: (socket: RealtimeSocket) => string | null;
  testHooks: Deps['testHooks'];
}

/** The general rate limit as a handshake uses it (the shape of http/rate-limit.ts's GeneralLimit: sockets do not import HTTP). */
export interface HandshakeLimit {
  /** Seconds until an address that spent its minute may come back, when this instance knows it did. */
  refusedFor(address: string): number | undefined;
  /** Counts one request against the user, or the address when there is none: the seconds to wait when past the limit. */
  count(caller: { userId?: number; address: string }): Promise<number | undefined>;
}

type Refusal = 'unauthorized' | 'forbidden' | 'unavailable' | 'too_many_connections' | 'rate_limited';

/** `next(error)` of a handshake: the client's connect_error, with the contract's message. */
const refused = (message: Refusal, code?: string, more?: Record<string, unknown>): ExtendedError =>
  Object.assign(new Error(message), { data: { code: code ?? message.toUpperCase(), ...more } });

/** Over the general limit: `retry_after` says in how many seconds the window ends, as Retry-After does over HTTP. */
const rateLimited = (seconds: number) => refused('rate_limited', 'RATE_LIMITED', { retry_after: seconds });

export function authenticateHandshakes(ns: RealtimeNamespace, adminOnly: boolean, parts: HandshakeParts): void {
  const { app, db, log, auth, dispatcher, slots, limit, testHooks } = parts;

  /** A refusal of the general limit, counted as HTTP's are (teamlog_requests_limited_total{limit="general"}). */
  const overLimit = (seconds: number) => {
    app.metrics.limited.inc({ limit: 'general' });
    return rateLimited(seconds);
  };

  /** The handshake's session, or the code its token is refused with. */
  async function sessionOf(token: unknown): Promise<{ actor: Actor; expiresAt: number } | { refusal: string }> {
    if (typeof token !== 'string' || token === '' || token.length > 4096) return { refusal: 'UNAUTHENTICATED' };
    testHooks?.onHandshakeSessionLookup?.();
    try {
      return await auth.authenticateToken(token);
    } catch (err) {
      if (err instanceof DomainError) return { refusal: err.code };
      throw err;
    }
  }

  ns.use(async (socket, next) => {
    const address = parts.addressOf(socket) ?? 'unknown';
    const spent = limit?.refusedFor(address);
    if (spent !== undefined) return next(overLimit(spent));
    try {
      const session = await sessionOf(socket.handshake.auth?.token);
      if ('refusal' in session) {
        // Counted against the address, as a 401 is; the one that goes past the limit is told so.
        const wait = await limit?.count({ address });
        return next(wait === undefined ? refused('unauthorized', session.refusal) : overLimit(wait));
      }
      const { actor, expiresAt } = session;
      const wait = await limit?.count({ userId: actor.id, address });
      if (wait !== undefined) return next(overLimit(wait));
      if (adminOnly && actor.role !== 'ADMIN') return next(refused('forbidden'));
      // A test's pause (Deps.testHooks): test/limits-sockets.test.ts races revocations against this gap.
      await testHooks?.afterHandshakeSessionCheck?.();
      const roomsAsOf = dispatcher.position;
      const projects = adminOnly ? [] : await projectsOf(db, actor.id);
      if (!(await slots.take(socket, actor.id, adminOnly))) {
        app.metrics.limited.inc({ limit: 'sockets' });
        log.debug({ userId: actor.id, namespace: ns.name }, 'socket refused: too many connections');
        return next(refused('too_many_connections'));
      }
      // Closed while it waited: Socket.IO drops it, and its slot went back with the connection.
      if (socket.conn.readyState !== 'open') {
        slots.giveBack(socket);
        return next(refused('unavailable'));
      }
      socket.data = { actor, expiresAt, buffer: undefined, expiry: undefined, roomsAsOf };
      socket.join([userRoom(actor.id), sessionRoom(actor.sessionId), ...(adminOnly ? ['admin'] : ['general', ...projects.map(projectRoom)])]);
      next();
    } catch (err) {
      if (err instanceof DomainError) return next(refused('unauthorized', err.code));
      log.warn({ err }, 'socket handshake failed');
      next(refused('unavailable'));
    }
  });
}
