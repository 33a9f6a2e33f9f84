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
