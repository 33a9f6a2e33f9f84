// Who is calling, for a use case a socket event runs: the socket's actor, with its address and
// user agent as HTTP records them.
import type { ActorContext } from '../context.js';
import type { RealtimeSocket } from './sockets.js';

/** A socket's context maker: one context per event, named by the event's request id. */
export type SocketContext = (socket: RealtimeSocket) => (requestId: string) => ActorContext;

/** `trusted`: the proxies whose X-Forwarded-For is believed (TRUST_PROXY, config.ts's trustedNetworks). */
export function socketContexts(trusted: (address: string) => boolean): SocketContext {
  return (socket) => (requestId) => {
    const ua = socket.handshake.headers['user-agent'];
    return { actor: socket.data.actor, ip: addressOf(socket, trusted), userAgent: typeof ua === 'string' ? ua : null, requestId };
  };
}

/** The caller's address as for HTTP: a forwarded one only from a trusted proxy. */
function addressOf(socket: RealtimeSocket, trusted: (address: string) => boolean): string | null {
  const peer = socket.conn.remoteAddress ?? null;
  const forwarded = socket.handshake.headers['x-forwarded-for'];
  if (peer && trusted(peer) && typeof forwarded === 'string') return forwarded.split(',')[0]!.trim() || peer;
  return peer;
}
