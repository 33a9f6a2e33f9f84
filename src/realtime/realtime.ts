// Socket.IO on the API's own port (/socket.io), docs/api.md section 6. The handshake authenticates
// with the same session check as HTTP (handshake.ts); sockets join their rooms (user, session,
// general, projects); a reconnecting client catches up from the database (connections.ts,
// replay.ts); events reach sockets after commit, numbered in commit order (relay.ts), on every
// instance (dispatcher.ts, delivery.ts). With REDIS_URL the Redis pub/sub adapter joins the
// instances (redis-adapter.ts), and presence is shared through Redis (presence.ts).
// Limits (docs/api.md section 6): a user holds at most MAX_SOCKETS_PER_USER sockets at once, across
// instances (socket-slots.ts, presence.ts counts them); a socket whose handshake overlapped a
// revocation is disconnected once connected (socket-session.ts); new-message is limited per user
// (modules/messages/messages.limit.ts, with POST /messages); a handshake counts against the
// general rate limit like a request (handshake.ts).
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Server } from 'socket.io';
import { trustedNetworks } from '../config.js';
import type { Deps } from '../deps.js';
import type { Redis } from '../redis.js';
import type { Services } from '../services.js';
import { serveConnections } from './connections.js';
import { CatchingUp, createDelivery, type Namespaces } from './delivery.js';
import { Dispatcher } from './dispatcher.js';
import { authenticateHandshakes, type HandshakeLimit, type HandshakeParts } from './handshake.js';
import { startWorkers, stopRealtime, type RealtimeWorkers } from './lifecycle.js';
import { createPresence } from './presence.js';
import { presenceNotices } from './presence-notices.js';
import { linkInstances } from './redis-adapter.js';
import { createRelay } from './relay.js';
import { callerAddress, socketContexts } from './socket-context.js';
import { SocketSlots } from './socket-slots.js';
import type { RealtimeServer } from './sockets.js';

/** Where Socket.IO answers (its handshake, long polling and WebSocket upgrades). */
export const SOCKET_IO_PATH = '/socket.io';

/** Above it Socket.IO closes the connection (docs/api.md section 6). */
export const MAX_HTTP_BUFFER_SIZE = 1024 * 1024;

/**
 * `limit`: the general rate limit (http/rate-limit.ts), which handshakes count against like
 * requests (handshake.ts); none when RATE_LIMIT_PER_MINUTE is 0.
 */
export function attachRealtime(app: FastifyInstance, deps: Deps, services: Services, redis: Redis | undefined, limit?: HandshakeLimit) {
  const { db, config, log } = deps;
  const instanceId = randomUUID();
  const instances = linkInstances(redis, config.redisKeyPrefix, log);
  const io: RealtimeServer = new Server(app.server, {
    path: SOCKET_IO_PATH,
    maxHttpBufferSize: MAX_HTTP_BUFFER_SIZE,
    serveClient: true,
    ...(instances.adapter ? { adapter: instances.adapter } : {}),
  });
  const namespaces: Namespaces = { main: io.of('/'), admin: io.of('/admin') };
  const catchingUp = new CatchingUp();
  const dispatcher = new Dispatcher(db, createDelivery(namespaces, catchingUp, db, { beforeSend: deps.testHooks?.beforeDeliverySend }), log);
  const relay = createRelay(db, log, (events) => dispatcher.offer(events));
  const presence = createPresence({ redis, keyPrefix: config.redisKeyPrefix, instanceId, onError: (err) => log.warn({ err }, 'presence: Redis failed; retrying') });
  const announcePresence = presenceNotices(namespaces, { catchingUp, dispatcher, acrossInstances: redis !== undefined });
  const slots = new SocketSlots(presence, announcePresence, log);
  const trusted = trustedNetworks(config.trustProxy);
  const contextOf = socketContexts(trusted);

  const handshake: HandshakeParts = {
    app, db, log, auth: services.auth, dispatcher, slots, limit, addressOf: (socket) => callerAddress(socket, trusted), testHooks: deps.testHooks,
  };
  authenticateHandshakes(namespaces.main, false, handshake);
  authenticateHandshakes(namespaces.admin, true, handshake);
  serveConnections(namespaces, { db, log, services, dispatcher, catchingUp, presence, slots, contextOf, limit, addressOf: handshake.addressOf });

  const stopListening = deps.commits.onCommitted((c) => {
    if (c.events > 0) relay.wake();
  });
  const workers: RealtimeWorkers = { io, namespaces, dispatcher, relay, presence, announcePresence, slots, instances, log };
  app.addHook('onReady', () => startWorkers(workers));
  // Before the HTTP server stops, so that this instance's sockets go first (lifecycle.ts).
  app.addHook('preClose', () => stopRealtime(workers, stopListening));

  return { io, dispatcher, relay };
}
