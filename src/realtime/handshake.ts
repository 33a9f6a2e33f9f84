// A socket's handshake (docs/api.md section 6): the same session check as HTTP; /admin also
// wants an ADMIN; then the user's socket limit (socket-slots.ts). The rooms are read and joined
// here, before the socket can receive anything. A refusal is the client's connect_error.
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { ExtendedError } from 'socket.io';
import type { Database } from '../db/database.js';
import type { Deps } from '../deps.js';
import { DomainError } from '../domain/errors.js';
import { projectsOf } from '../modules/projects/projects.repository.js';
import type { Services } from '../services.js';
import type { Dispatcher } from './dispatcher.js';
import type { SocketSlots } from './socket-slots.js';
import { projectRoom, sessionRoom, userRoom, type RealtimeNamespace } from './sockets.js';

export interface HandshakeParts {
  /** Its metrics count the sockets refused for too many connections. */
  app: FastifyInstance;
  db: Database;
  log: FastifyBaseLogger;
  auth: Services['auth'];
  dispatcher: Dispatcher;
  slots: SocketSlots;
  testHooks: Deps['testHooks'];
}

/** `next(error)` of a handshake: the client's connect_error, with the contract's message. */
const refused = (message: 'unauthorized' | 'forbidden' | 'unavailable' | 'too_many_connections', code?: string): ExtendedError =>
  Object.assign(new Error(message), { data: { code: code ?? message.toUpperCase() } });

export function authenticateHandshakes(ns: RealtimeNamespace, adminOnly: boolean, { app, db, log, auth, dispatcher, slots, testHooks }: HandshakeParts): void {
  ns.use(async (socket, next) => {
    const token: unknown = socket.handshake.auth?.token;
    if (typeof token !== 'string' || token === '' || token.length > 4096) return next(refused('unauthorized', 'UNAUTHENTICATED'));
    try {
      const { actor, expiresAt } = await auth.authenticateToken(token);
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
