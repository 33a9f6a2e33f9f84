// A socket that passed its handshake (handshake.ts) connects: it holds its live events if it
// reconnects with a last_event_id, its session is checked once more (socket-session.ts), its
// project rooms follow what changed while it was set up, and it catches up from the database
// (replay.ts) before the presence snapshot. `/` also takes the client's new-message.
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../db/database.js';
import { projectsOf } from '../modules/projects/projects.repository.js';
import type { Services } from '../services.js';
import { handleClientMessages } from './client-messages.js';
import type { CatchingUp, Namespaces } from './delivery.js';
import type { Dispatcher } from './dispatcher.js';
import type { HandshakeLimit } from './handshake.js';
import type { Presence } from './presence.js';
import { catchUp, holdLive } from './replay.js';
import type { SocketContext } from './socket-context.js';
import { expireAt, handleReauth, recheckSession } from './socket-session.js';
import type { SocketSlots } from './socket-slots.js';
import { projectRoom, type RealtimeNamespace, type RealtimeSocket } from './sockets.js';

export interface ConnectionParts {
  db: Database;
  log: FastifyBaseLogger;
  services: Pick<Services, 'auth' | 'messages'>;
  dispatcher: Dispatcher;
  catchingUp: CatchingUp;
  presence: Presence;
  slots: SocketSlots;
  contextOf: SocketContext;
  /** The general rate limit, which a `reauth` counts against (none when RATE_LIMIT_PER_MINUTE is 0). */
  limit: HandshakeLimit | undefined;
  /** The caller's address, as the handshake reads it. */
  addressOf: (socket: RealtimeSocket) => string | null;
}

type LastEventId = number | undefined | 'invalid';

export function serveConnections(namespaces: Namespaces, parts: ConnectionParts): void {
  const { services, catchingUp, log } = parts;
  const session = { auth: services.auth, log, catchingUp };

  namespaces.main.on('connection', (socket: RealtimeSocket) => {
    const lastEventId = parseLastEventId(socket.handshake.auth?.last_event_id);
    // Before any await: from here on no live event can pass this socket by.
    if (lastEventId !== undefined) holdLive(socket, namespaces.main, catchingUp);
    connectedSocket(socket, parts);
    handleClientMessages(socket, services.messages, parts.contextOf(socket), log);
    void recheckSession(socket, false, session).then((stays) => (stays ? welcome(socket, namespaces.main, lastEventId, true, parts) : undefined));
  });

  namespaces.admin.on('connection', (socket: RealtimeSocket) => {
    const lastEventId = parseLastEventId(socket.handshake.auth?.last_event_id);
    if (lastEventId !== undefined) holdLive(socket, namespaces.admin, catchingUp);
    connectedSocket(socket, parts);
    void recheckSession(socket, true, session).then((stays) => (stays ? welcome(socket, namespaces.admin, lastEventId, false, parts) : undefined));
  });
}

function parseLastEventId(raw: unknown): LastEventId {
  if (raw === undefined || raw === null) return undefined;
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d{1,16}$/.test(raw) ? Number(raw) : NaN;
  return Number.isSafeInteger(n) && n >= 0 ? n : 'invalid';
}

/** What every connected socket gets: its slot given back when it goes, its expiry, reauth, and the log lines. */
function connectedSocket(socket: RealtimeSocket, { slots, log, services, limit, addressOf }: ConnectionParts): void {
  slots.connected(socket);
  const { actor } = socket.data;
  log.debug({ userId: actor.id, namespace: socket.nsp.name, socketId: socket.id }, 'socket connected');
  socket.on('disconnect', (reason) => {
    clearTimeout(socket.data.expiry);
    log.debug({ userId: actor.id, namespace: socket.nsp.name, socketId: socket.id, reason }, 'socket disconnected');
    slots.giveBack(socket);
  });
  expireAt(socket);
  handleReauth(socket, services.auth, { limit, address: addressOf(socket) ?? 'unknown' });
}

/**
 * A membership that changed while the socket was being set up went by before the socket
 * could follow it (delivery.ts moves only live sockets): read the rooms again.
 */
async function followMemberships(socket: RealtimeSocket, { db, dispatcher }: ConnectionParts): Promise<void> {
  if (dispatcher.position === socket.data.roomsAsOf) return;
  const now = new Set((await projectsOf(db, socket.data.actor.id)).map(projectRoom));
  for (const room of socket.rooms) if (room.startsWith('project:') && !now.has(room)) socket.leave(room);
  socket.join([...now]);
}

/** Replay what the client missed, then the presence snapshot; errors leave the socket live with what it has. */
async function welcome(socket: RealtimeSocket, ns: RealtimeNamespace, lastEventId: LastEventId, withPresence: boolean, parts: ConnectionParts): Promise<void> {
  const { db, catchingUp, dispatcher, presence, log } = parts;
  try {
    if (withPresence) await followMemberships(socket, parts);
    const position =
      lastEventId === undefined ? dispatcher.position : await catchUp(socket, ns, lastEventId === 'invalid' ? -1 : lastEventId, { db, catchingUp, livePosition: () => dispatcher.position });
    if (withPresence) socket.emit('presence-snapshot', { online: await presence.online(), event_id: position });
  } catch (err) {
    log.warn({ err }, 'socket catch-up failed');
  }
}
