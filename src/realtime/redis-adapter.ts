// With REDIS_URL, the Socket.IO pub/sub adapter joins the instances: they share rooms and
// broadcasts, never events to replay (those come from PostgreSQL), so what pub/sub may drop
// during an outage is not what clients miss. Its two connections are this module's to open and
// to let go.
import { createAdapter } from '@socket.io/redis-adapter';
import type { FastifyBaseLogger } from 'fastify';
import { letGo, type Redis } from '../redis.js';

export interface InstancesLink {
  /** The adapter for Socket.IO's Server; undefined without Redis (one instance alone). */
  adapter: ReturnType<typeof createAdapter> | undefined;
  /** Lets go of the adapter's connections (a graceful stop, once the sockets are gone). */
  letGo(): Promise<void>;
}

export function linkInstances(redis: Redis | undefined, keyPrefix: string, log: FastifyBaseLogger): InstancesLink {
  // The adapter publishes and subscribes without handling failures: its connections must never
  // reject a command (an unhandled rejection ends the process). They wait for Redis instead,
  // and what they queued meanwhile (presence notices, room changes) goes out when it is back.
  const pub = redis?.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null });
  const sub = redis?.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null });
  // One way remains for a command to fail: the connection is let go while it waits (a graceful
  // stop during an outage, another instance's request answered late). The adapter drops the
  // promises of PUBLISH and of its (un)subscriptions, so none of them may reject.
  if (pub) withoutRejecting(pub, ['publish'], log);
  if (sub) withoutRejecting(sub, ['subscribe', 'psubscribe', 'unsubscribe', 'punsubscribe'], log);
  return {
    adapter: pub && sub ? createAdapter(pub, sub, { key: `${keyPrefix}socket.io` }) : undefined,
    letGo: async () => {
      await Promise.all([pub, sub].map((c) => c && letGo(c)));
    },
  };
}

/** The commands the adapter sends and forgets (@socket.io/redis-adapter 8: publish, and its subscriptions on open and close). */
type Forgotten = 'publish' | 'subscribe' | 'psubscribe' | 'unsubscribe' | 'punsubscribe';

/**
 * The Redis adapter sends these commands and drops their promises: a rejected one would be an
 * unhandled rejection, which ends the process. On `client` they resolve instead, PUBLISH to 0
 * receivers (what Redis itself answers when nobody listens), and the loss is logged. A
 * subscription lost this way belongs to a connection being let go, which listens no more anyway.
 */
export function withoutRejecting(client: Redis, commands: readonly Forgotten[], log: FastifyBaseLogger): void {
  for (const command of commands) {
    const send = (client[command] as (...args: unknown[]) => Promise<unknown>).bind(client);
    const safe = (...args: unknown[]) =>
      send(...args).catch((err: unknown) => {
        log.warn({ err: { message: err instanceof Error ? err.message : String(err) }, command }, 'realtime: a command to the other instances was lost');
        return command === 'publish' ? 0 : undefined;
      });
    (client as unknown as Record<Forgotten, unknown>)[command] = safe;
  }
}
