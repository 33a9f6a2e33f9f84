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
    return { actor: socket.data.actor, ip: callerAddress(socket, trusted), userAgent: typeof ua === 'string' ? ua : null, requestId };
  };
}

/**
 * The caller's address exactly as HTTP's request.ip reads it (Fastify's proxy-addr): from the
 * peer back along X-Forwarded-For, the first hop that is not a trusted proxy. The general rate
 * limit keys handshakes by it (handshake.ts), so that an address refused over HTTP is the same
 * address here, and a client behind a trusted proxy cannot name another by prepending to the header.
 */
export function callerAddress(socket: RealtimeSocket, trusted: (address: string) => boolean): string | null {
  let address = socket.conn.remoteAddress ?? null;
  const forwarded = socket.handshake.headers['x-forwarded-for'];
  if (address === null || typeof forwarded !== 'string') return address;
  const hops = forwarded.split(',');
  for (let i = hops.length - 1; i >= 0 && trusted(address); i--) address = hops[i]!.trim();
  return address;
}
