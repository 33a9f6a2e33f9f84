// The Socket.IO Redis adapter sends PUBLISH and its (un)subscriptions and drops their promises
// (realtime/redis-adapter.ts): a rejected one is an unhandled rejection, which ends the process.
// ioredis rejects what a connection queued when the connection is let go while an attempt to
// connect is in flight, as a graceful stop during a Redis outage does. No Redis is needed: the
// address is one nothing listens on.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { Redis } from 'ioredis';
import { withoutRejecting } from '../src/realtime/redis-adapter.js';

const NOBODY = 'redis://127.0.0.1:1';

/** A client as the adapter's are made (offline queue, no retry limit), its commands queued, let go mid-attempt. */
async function letGoWhileConnecting(prepare: (client: Redis) => void): Promise<PromiseSettledResult<unknown>[]> {
  const client = new Redis(NOBODY, { enableOfflineQueue: true, maxRetriesPerRequest: null, retryStrategy: () => 20 });
  client.on('error', () => {});
  prepare(client);
  const sent = [client.publish('c', 'm'), client.subscribe('a', 'b'), client.psubscribe('p*'), client.unsubscribe('a'), client.punsubscribe('p*')];
  await once(client, 'connecting');
  client.disconnect();
  return Promise.allSettled(sent);
}

test('ioredis rejects the commands a connection queued when it is let go while connecting (what the adapter must survive)', async () => {
  const settled = await letGoWhileConnecting(() => {});
  assert.deepEqual(settled.map((s) => (s.status === 'rejected' ? (s.reason as Error).message : s.status)), Array(5).fill('Connection is closed.'));
});

test('on the adapter\'s clients, none of those commands rejects: PUBLISH answers 0 receivers, and each loss is logged', async () => {
  const warned: string[] = [];
  const log = { warn: (obj: { command: string }, msg: string) => warned.push(`${obj.command}: ${msg}`) } as unknown as FastifyBaseLogger;
  const settled = await letGoWhileConnecting((client) => withoutRejecting(client, ['publish', 'subscribe', 'psubscribe', 'unsubscribe', 'punsubscribe'], log));
  assert.deepEqual(settled, [0, undefined, undefined, undefined, undefined].map((value) => ({ status: 'fulfilled', value })));
  assert.deepEqual(warned, ['publish', 'subscribe', 'psubscribe', 'unsubscribe', 'punsubscribe'].map((c) => `${c}: realtime: a command to the other instances was lost`));
});
