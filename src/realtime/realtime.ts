// Socket.IO on the API's own port (/socket.io), docs/api.md section 6. The handshake authenticates
// with the same session check as HTTP; sockets join their rooms (user, session, general,
// projects); a reconnecting client catches up from the database (replay.ts); events reach
// sockets after commit, numbered in commit order (relay.ts), on every instance
// (dispatcher.ts, delivery.ts). With REDIS_URL the Redis pub/sub adapter joins the instances,
// and presence is shared through Redis (presence.ts).
// Limits (docs/api.md section 6): a user holds at most MAX_SOCKETS_PER_USER sockets at once, across
// instances (presence.ts counts them); a socket whose handshake overlapped a revocation is
// disconnected once connected (recheck below); new-message is limited per user
// (modules/messages/messages.limit.ts, with POST /messages).
import { randomUUID } from 'node:crypto';
import { createAdapter } from '@socket.io/redis-adapter';
import type { FastifyInstance } from 'fastify';
import { Server, type ExtendedError } from 'socket.io';
import { trustedNetworks } from '../config.js';
import type { ActorContext } from '../context.js';
import type { Deps } from '../deps.js';
import { DomainError, forbidden } from '../domain/errors.js';
import { projectsOf } from '../modules/projects/projects.repository.js';
import { letGo, REDIS_GOODBYE_MS, within, type Redis } from '../redis.js';
import type { Services } from '../services.js';
import { errorAck, type Ack } from './acks.js';
import { handleClientMessages } from './client-messages.js';
import { CatchingUp, createDelivery, type Namespaces } from './delivery.js';
import { Dispatcher } from './dispatcher.js';
import { createPresence } from './presence.js';
import { catchUp, holdLive } from './replay.js';
import { createRelay } from './relay.js';
import { projectRoom, sessionRoom, userRoom, type RealtimeNamespace, type RealtimeServer, type RealtimeSocket } from './sockets.js';

/** Above it Socket.IO closes the connection (docs/api.md section 6). */
export const MAX_HTTP_BUFFER_SIZE = 1024 * 1024;
/** Sockets (of both namespaces) one user may hold at once, on all instances together (docs/api.md section 6). */
export const MAX_SOCKETS_PER_USER = 20;
/** How long a handshake waits for Redis to count its socket before letting it in anyway. */
const SLOT_WAIT_MS = 1000;

/** `next(error)` of a handshake: the client's connect_error, with the contract's message. */
const refused = (message: 'unauthorized' | 'forbidden' | 'unavailable' | 'too_many_connections', code?: string): ExtendedError =>
  Object.assign(new Error(message), { data: { code: code ?? message.toUpperCase() } });

function parseLastEventId(raw: unknown): number | undefined | 'invalid' {
  if (raw === undefined || raw === null) return undefined;
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d{1,16}$/.test(raw) ? Number(raw) : NaN;
  return Number.isSafeInteger(n) && n >= 0 ? n : 'invalid';
}

export function attachRealtime(app: FastifyInstance, deps: Deps, services: Services, redis: Redis | undefined) {
  const { db, config, log } = deps;
  const instanceId = randomUUID();
  // The adapter publishes and subscribes without handling failures: its connections must never
  // reject a command (an unhandled rejection ends the process). They wait for Redis instead,
  // and what they queued meanwhile (presence notices, room changes) goes out when it is back.
  const pub = redis?.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null });
  const sub = redis?.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null });
  // One way remains for a command to fail: the connection is let go while a PUBLISH waits for
  // its reply (a graceful stop during an outage, another instance's request answered late).
  if (pub) publishWithoutRejecting(pub, log);
  const io: RealtimeServer = new Server(app.server, {
    path: '/socket.io',
    maxHttpBufferSize: MAX_HTTP_BUFFER_SIZE,
    serveClient: true,
    // The pub/sub adapter: instances share rooms and broadcasts, never events to replay (those
    // come from PostgreSQL), so what pub/sub may drop during an outage is not what clients miss.
    ...(pub && sub ? { adapter: createAdapter(pub, sub, { key: `${config.redisKeyPrefix}socket.io` }) } : {}),
  });
  const namespaces: Namespaces = { main: io.of('/'), admin: io.of('/admin') };
  const catchingUp = new CatchingUp();
  const dispatcher = new Dispatcher(db, createDelivery(namespaces, catchingUp, db, { beforeSend: deps.testHooks?.beforeDeliverySend }), log);
  const relay = createRelay(db, log, (events) => dispatcher.offer(events));
  const presence = createPresence({ redis, keyPrefix: config.redisKeyPrefix, instanceId, onError: (err) => log.warn({ err }, 'presence: Redis failed; retrying') });
  const trusted = trustedNetworks(config.trustProxy);
  // Disconnects whose presence change is still on its way: a graceful stop waits for them, so
  // that their user-offline notices reach the other instances before Redis is let go.
  const leaving = new Set<Promise<void>>();
  /** Gives back a socket's slot (presence.ts), once: when it disconnects, or when its connection closes before it connected. */
  const slots = new WeakMap<RealtimeSocket, () => void>();
  /** Until a socket connects, what frees its slot if its connection closes first (Socket.IO then drops it without a disconnect event). */
  const beforeConnect = new WeakMap<RealtimeSocket, () => void>();

  /** The caller's address as for HTTP: a forwarded one only from a trusted proxy. */
  function addressOf(socket: RealtimeSocket): string | null {
    const peer = socket.conn.remoteAddress ?? null;
    const forwarded = socket.handshake.headers['x-forwarded-for'];
    if (peer && trusted(peer) && typeof forwarded === 'string') return forwarded.split(',')[0]!.trim() || peer;
    return peer;
  }

  const contextOf = (socket: RealtimeSocket) => (requestId: string): ActorContext => {
    const ua = socket.handshake.headers['user-agent'];
    return { actor: socket.data.actor, ip: addressOf(socket), userAgent: typeof ua === 'string' ? ua : null, requestId };
  };

  /**
   * Takes one of the user's MAX_SOCKETS_PER_USER slots for the socket: false when they hold all
   * of them. Redis failing, the socket is let in (counted here; presence.ts publishes the count
   * once Redis is back): the limit then holds per instance. Redis slow, it is let in after
   * SLOT_WAIT_MS, and counted when Redis answers (or not at all if it then says 'full').
   */
  async function takeSlot(socket: RealtimeSocket, userId: number, admin: boolean): Promise<boolean> {
    const taking = presence.connected(userId, { admin, max: MAX_SOCKETS_PER_USER }).then(
      (first) => {
        if (first === true && !admin) announcePresence([userId], true);
        return first;
      },
      (err: unknown) => {
        log.warn({ err }, 'presence: connect not recorded');
        return false as const;
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), SLOT_WAIT_MS)));
    const first = await Promise.race([taking, late]);
    clearTimeout(timer);
    if (first === 'full') return false;
    if (first === 'late') log.warn({ userId }, 'presence: Redis is slow to answer; a socket is let in before it is counted');
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      // After its connect is recorded (or refused: then there is nothing to give back).
      const recorded = taking
        .then((taken) => (taken === 'full' ? false : presence.disconnected(userId, { admin })))
        .then((last) => void (last && !admin && announcePresence([userId], false)))
        .catch((err: unknown) => log.warn({ err }, 'presence: disconnect not recorded'));
      leaving.add(recorded);
      void recorded.finally(() => leaving.delete(recorded));
    };
    slots.set(socket, release);
    beforeConnect.set(socket, release);
    socket.conn.once('close', release);
    return true;
  }

  /**
   * Same session check as HTTP; /admin also wants an ADMIN; then the user's socket limit. The
   * rooms are read here, before the socket can receive anything.
   */
  function handshake(ns: RealtimeNamespace, adminOnly: boolean) {
    ns.use(async (socket, next) => {
      const token: unknown = socket.handshake.auth?.token;
      if (typeof token !== 'string' || token === '' || token.length > 4096) return next(refused('unauthorized', 'UNAUTHENTICATED'));
      try {
        const { actor, expiresAt } = await services.auth.authenticateToken(token);
        if (adminOnly && actor.role !== 'ADMIN') return next(refused('forbidden'));
        // A test's pause (Deps.testHooks): test/limits-sockets.test.ts races revocations against this gap.
        await deps.testHooks?.afterHandshakeSessionCheck?.();
        const roomsAsOf = dispatcher.position;
        const projects = adminOnly ? [] : await projectsOf(db, actor.id);
        if (!(await takeSlot(socket, actor.id, adminOnly))) {
          app.metrics.limited.inc({ limit: 'sockets' });
          log.debug({ userId: actor.id, namespace: ns.name }, 'socket refused: too many connections');
          return next(refused('too_many_connections'));
        }
        // Closed while it waited: Socket.IO drops it, and its slot went back with the connection.
        if (socket.conn.readyState !== 'open') {
          slots.get(socket)?.();
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

  /**
   * A connected socket's session (and for /admin its role) is checked again. The handshake
   * checked it before the socket joined its rooms and connected, and a revocation delivered in
   * between (delivery.ts acts on connected sockets only) passed it by. From connection on, a
   * revocation that commits after this read starts is delivered to the socket, and one that
   * committed before is seen here: either way it goes within moments. Answers whether it stays.
   */
  async function recheck(socket: RealtimeSocket, adminOnly: boolean): Promise<boolean> {
    let reason: string | undefined;
    const before = socket.data.actor;
    try {
      const { actor } = await services.auth.authenticateToken(String(socket.handshake.auth?.token));
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

  /** What every connected socket gets: its slot given back when it goes, its expiry, reauth, and the log lines. */
  function connectedSocket(socket: RealtimeSocket): void {
    const early = beforeConnect.get(socket);
    if (early) socket.conn.off('close', early);
    beforeConnect.delete(socket);
    const { actor } = socket.data;
    log.debug({ userId: actor.id, namespace: socket.nsp.name, socketId: socket.id }, 'socket connected');
    socket.on('disconnect', (reason) => {
      clearTimeout(socket.data.expiry);
      log.debug({ userId: actor.id, namespace: socket.nsp.name, socketId: socket.id, reason }, 'socket disconnected');
      slots.get(socket)?.();
    });
    expireAt(socket);
    handleReauth(socket);
  }

  /** An access token that expires disconnects its socket, unless the client sent `reauth` with a fresh one. */
  function expireAt(socket: RealtimeSocket): void {
    clearTimeout(socket.data.expiry);
    socket.data.expiry = setTimeout(() => socket.disconnect(true), Math.max(0, socket.data.expiresAt - Date.now()));
    socket.data.expiry.unref();
  }

  function handleReauth(socket: RealtimeSocket): void {
    socket.on('reauth', (payload: unknown, ack?: unknown) => {
      const answer: Ack = typeof ack === 'function' ? (ack as Ack) : () => {};
      const token = typeof payload === 'object' && payload !== null ? (payload as { token?: unknown }).token : undefined;
      if (typeof token !== 'string') return answer(errorAck(new DomainError('invalid', 'VALIDATION_FAILED', 'token must be an access token'), 'UNAVAILABLE'));
      services.auth.authenticateToken(token).then(
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

  /** Presence changes reach every socket of every instance, each with its instance's position. */
  function announcePresence(userIds: number[], online: boolean, fromElsewhere = false): void {
    const held = [...catchingUp.of(namespaces.main)].filter((s) => s.data.buffer !== undefined).map((s) => s.id);
    for (const userId of userIds) namespaces.main.local.except(held).emit(online ? 'user-online' : 'user-offline', { user_id: userId, event_id: dispatcher.position });
    if (!fromElsewhere && redis) namespaces.main.serverSideEmit('presence', { user_ids: userIds, online });
  }
  namespaces.main.on('presence', (p: { user_ids: number[]; online: boolean }) => announcePresence(p.user_ids, p.online, true));

  /**
   * A membership that changed while the socket was being set up went by before the socket
   * could follow it (delivery.ts moves only live sockets): read the rooms again.
   */
  async function followMemberships(socket: RealtimeSocket): Promise<void> {
    if (dispatcher.position === socket.data.roomsAsOf) return;
    const now = new Set((await projectsOf(db, socket.data.actor.id)).map(projectRoom));
    for (const room of socket.rooms) if (room.startsWith('project:') && !now.has(room)) socket.leave(room);
    socket.join([...now]);
  }

  /** Replay what the client missed, then the presence snapshot; errors leave the socket live with what it has. */
  async function welcome(socket: RealtimeSocket, ns: RealtimeNamespace, lastEventId: number | undefined | 'invalid', withPresence: boolean) {
    try {
      if (withPresence) await followMemberships(socket);
      const position =
        lastEventId === undefined ? dispatcher.position : await catchUp(socket, ns, lastEventId === 'invalid' ? -1 : lastEventId, { db, catchingUp, livePosition: () => dispatcher.position });
      if (withPresence) socket.emit('presence-snapshot', { online: await presence.online(), event_id: position });
    } catch (err) {
      log.warn({ err }, 'socket catch-up failed');
    }
  }

  handshake(namespaces.main, false);
  handshake(namespaces.admin, true);

  namespaces.main.on('connection', (socket: RealtimeSocket) => {
    const lastEventId = parseLastEventId(socket.handshake.auth?.last_event_id);
    // Before any await: from here on no live event can pass this socket by.
    if (lastEventId !== undefined) holdLive(socket, namespaces.main, catchingUp);
    connectedSocket(socket);
    handleClientMessages(socket, services.messages, contextOf(socket), log);
    void recheck(socket, false).then((stays) => (stays ? welcome(socket, namespaces.main, lastEventId, true) : undefined));
  });

  namespaces.admin.on('connection', (socket: RealtimeSocket) => {
    const lastEventId = parseLastEventId(socket.handshake.auth?.last_event_id);
    if (lastEventId !== undefined) holdLive(socket, namespaces.admin, catchingUp);
    connectedSocket(socket);
    void recheck(socket, true).then((stays) => (stays ? welcome(socket, namespaces.admin, lastEventId, false) : undefined));
  });

  const unsubscribe = deps.commits.onCommitted((c) => {
    if (c.events > 0) relay.wake();
  });
  app.addHook('onReady', async () => {
    await dispatcher.start();
    relay.start();
    presence.start((userIds) => announcePresence(userIds, false), (userIds) => announcePresence(userIds, true));
  });
  // Before the HTTP server stops: this instance's sockets go (local: through the Redis adapter a
  // plain disconnectSockets would close every instance's), then the workers, then Redis.
  app.addHook('preClose', async () => {
    unsubscribe();
    for (const ns of [namespaces.main, namespaces.admin]) ns.local.disconnectSockets(true);
    io.engine.close();
    await Promise.all([relay.stop(), dispatcher.stop(), within(REDIS_GOODBYE_MS, Promise.all(leaving))]);
    // A Redis that hangs (no answer, no error) delays the stop by REDIS_GOODBYE_MS; what this
    // instance could not remove then expires, and a live instance sweeps its users offline.
    await within(REDIS_GOODBYE_MS, presence.stop().catch((err: unknown) => log.warn({ err }, 'presence: stop failed')));
    await Promise.all([pub, sub].map((c) => c && letGo(c)));
  });

  return { io, dispatcher, relay };
}

/**
 * The Redis adapter publishes and drops the promise: a rejected PUBLISH would be an unhandled
 * rejection, which ends the process. Its client's publish() resolves instead (to 0 receivers,
 * what Redis itself answers when nobody listens) and the loss is logged.
 */
function publishWithoutRejecting(client: Redis, log: Deps['log']): void {
  const publish = client.publish.bind(client) as (channel: string | Buffer, message: string | Buffer) => Promise<number>;
  const safe = (channel: string | Buffer, message: string | Buffer) =>
    publish(channel, message).catch((err: unknown) => {
      log.warn({ err: { message: err instanceof Error ? err.message : String(err) } }, 'realtime: a message to the other instances was lost');
      return 0;
    });
  client.publish = safe as Redis['publish'];
}
