// A test's own corner of Redis for presence (src/realtime/presence.ts): a key prefix of its own,
// the Presence instances ("servers") and Redis clients it makes, all cleaned up after the test.
import { randomUUID } from 'node:crypto';
import type { TestContext } from 'node:test';
import { Redis, type RedisOptions } from 'ioredis';
import { createPresence, type Presence, type PresenceOptions } from '../../src/realtime/presence.js';
import { TEST_REDIS_URL } from './server.js';

/** A test's own key prefix, its Presence instances ("servers") and Redis clients, all cleaned up after it. */
export function redisWorld(t: TestContext) {
  const prefix = `presence-test:${randomUUID()}:`;
  const clients: Redis[] = [];
  const presences: Presence[] = [];
  const client = (options: RedisOptions = {}) => {
    const c = new Redis(TEST_REDIS_URL, options);
    clients.push(c);
    return c;
  };
  const admin = client();
  t.after(async () => {
    await Promise.all(presences.map((p) => p.stop().catch(() => {})));
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length > 0) await admin.del(...keys);
    await Promise.all(clients.map((c) => c.quit().catch(() => {})));
  });
  return {
    prefix,
    admin,
    client,
    /** Another instance; its id is the returned `id`. */
    instance(opts: Partial<PresenceOptions> = {}) {
      const id = opts.instanceId ?? randomUUID();
      const p = createPresence({ redis: opts.redis ?? client(), keyPrefix: prefix, ...opts, instanceId: id });
      presences.push(p);
      return Object.assign(p, { id });
    },
    countKey: `${prefix}presence:count`,
    instanceKey: (id: string) => `${prefix}presence:instance:${id}`,
  };
}
