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
  // One way remains for a command to fail: the connection is let go while a PUBLISH waits for
  // its reply (a graceful stop during an outage, another instance's request answered late).
  if (pub) publishWithoutRejecting(pub, log);
  return {
    adapter: pub && sub ? createAdapter(pub, sub, { key: `${keyPrefix}socket.io` }) : undefined,
    letGo: async () => {
      await Promise.all([pub, sub].map((c) => c && letGo(c)));
    },
  };
}

/**
 * The Redis adapter publishes and drops the promise: a rejected PUBLISH would be an unhandled
 * rejection, which ends the process. Its client's publish() resolves instead (to 0 receivers,
 * what Redis itself answers when nobody listens) and the loss is logged.
 */
function publishWithoutRejecting(client: Redis, log: FastifyBaseLogger): void {
  const publish = client.publish.bind(client) as (channel: string | Buffer, message: string | Buffer) => Promise<number>;
  const safe = (channel: string | Buffer, message: string | Buffer) =>
    publish(channel, message).catch((err: unknown) => {
      log.warn({ err: { message: err instanceof Error ? err.message : String(err) } }, 'realtime: a message to the other instances was lost');
      return 0;
    });
  client.publish = safe as Redis['publish'];
}
