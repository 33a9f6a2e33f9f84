// The project's one Redis client (ioredis): the shared rate-limit counters now, the Socket.IO
// adapter and presence later. Only made when REDIS_URL is set; everything works without it,
// in one process.
import type { FastifyBaseLogger } from 'fastify';
import { Redis } from 'ioredis';

export type { Redis };

export function createRedis(url: string, log: FastifyBaseLogger): Redis {
  const redis = new Redis(url, {
    // A request never waits long for Redis: a command fails after one retry, and while the
    // connection is down commands fail at once instead of queueing (callers decide what a
    // failure means: the rate limit lets the request through).
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 2000,
    connectionName: 'teamlog',
  });
  // ioredis reconnects by itself and reports every failed attempt: say it once per outage.
  let down = false;
  redis.on('error', (err) => {
    if (!down) log.warn({ err: { message: err.message } }, 'Redis is unreachable; retrying in the background');
    down = true;
  });
  redis.on('ready', () => {
    if (down) log.info('Redis is reachable again');
    down = false;
  });
  return redis;
}

/** How long a graceful stop waits for Redis to answer what was sent (QUIT comes after it). */
export const REDIS_GOODBYE_MS = 1000;

/**
 * QUIT answers after every command sent before it, so the last ones go out; but a Redis that
 * accepts the connection and never answers (a blackholed host) would hold QUIT, and the stop,
 * forever: past REDIS_GOODBYE_MS the connection is dropped.
 */
export async function letGo(client: Redis): Promise<void> {
  await within(REDIS_GOODBYE_MS, client.quit());
  client.disconnect();
}

/** Waits for `work` (never for its failure) at most `ms`: a graceful stop must end even on a Redis that hangs. */
export async function within(ms: number, work: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  await Promise.race([work.then(() => {}, () => {}), deadline]);
  clearTimeout(timer);
}
