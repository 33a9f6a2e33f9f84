// The real-time workers start once the app is ready, and everything real-time stops before the
// HTTP server does: this instance's sockets, then the workers, then its presence and Redis.
import type { FastifyBaseLogger } from 'fastify';
import type { BackgroundLoop } from '../background/background-loop.js';
import { REDIS_GOODBYE_MS, within } from '../redis.js';
import type { Namespaces } from './delivery.js';
import type { Dispatcher } from './dispatcher.js';
import type { Presence } from './presence.js';
import type { AnnouncePresence } from './presence-notices.js';
import type { InstancesLink } from './redis-adapter.js';
import type { SocketSlots } from './socket-slots.js';
import type { RealtimeServer } from './sockets.js';

export interface RealtimeWorkers {
  io: RealtimeServer;
  namespaces: Namespaces;
  dispatcher: Dispatcher;
  relay: BackgroundLoop;
  presence: Presence;
  announcePresence: AnnouncePresence;
  slots: SocketSlots;
  instances: InstancesLink;
  log: FastifyBaseLogger;
}

export async function startWorkers({ dispatcher, relay, presence, announcePresence }: RealtimeWorkers): Promise<void> {
  await dispatcher.start();
  relay.start();
  presence.start((userIds) => announcePresence(userIds, false), (userIds) => announcePresence(userIds, true));
}

/** `stopListening`: what stops this instance's commits from waking its relay. */
export async function stopRealtime({ io, namespaces, dispatcher, relay, presence, slots, instances, log }: RealtimeWorkers, stopListening: () => void): Promise<void> {
  stopListening();
  // This instance's sockets only: through the Redis adapter a plain disconnectSockets would
  // close every instance's.
  for (const ns of [namespaces.main, namespaces.admin]) ns.local.disconnectSockets(true);
  io.engine.close();
  await Promise.all([relay.stop(), dispatcher.stop(), within(REDIS_GOODBYE_MS, slots.departures())]);
  // A Redis that hangs (no answer, no error) delays the stop by REDIS_GOODBYE_MS; what this
  // instance could not remove then expires, and a live instance sweeps its users offline.
  await within(REDIS_GOODBYE_MS, presence.stop().catch((err: unknown) => log.warn({ err }, 'presence: stop failed')));
  await instances.letGo();
}
