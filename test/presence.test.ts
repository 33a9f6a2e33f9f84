// Presence (src/realtime/presence.ts, docs/api.md section 6): first socket in and last socket out
// across every instance, in one process and through Redis; dead instances swept once, by one
// live instance; a swept instance that was alive after all publishes its sockets again; and
// counts stay exact under concurrency and after failures.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { createPresence, type Presence } from '../src/realtime/presence.js';
import { redisWorld } from './helpers/presence-world.js';
import { needsRedis } from './helpers/server.js';

/** Small enough that a dead instance is swept within a test, large enough for a busy machine. */
const FAST = { heartbeatMs: 50, deadAfterMs: 400 };

async function waitFor(what: string, ok: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** `redis`, except that the answer to the next eval after holdNext() waits for release(). */
function holdingReplies(redis: Redis) {
  let next: Promise<void> | undefined;
  let release = () => {};
  const evalOf = (target: Redis) => (...args: unknown[]) => {
    const [gate, reply] = [next, (target.eval as (...a: unknown[]) => Promise<unknown>)(...args)];
    next = undefined;
    return gate ? reply.then(async (r) => (await gate, r)) : reply;
  };
  const held = new Proxy(redis, {
    get(target, prop) {
      if (prop === 'eval') return evalOf(target);
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return {
    redis: held,
    holdNext: () => void (next = new Promise<void>((r) => (release = r))),
    release: () => release(),
  };
}

async function firstInLastOut(p: Presence): Promise<void> {
  assert.deepEqual(await p.online(), []);
  assert.equal(await p.connected(10), true, 'first socket of 10');
  assert.equal(await p.connected(10), false, 'second socket of 10');
  assert.equal(await p.connected(9), true, 'first socket of 9');
  assert.deepEqual(await p.online(), [9, 10], 'ascending, as numbers');
  assert.equal(await p.disconnected(10), false, '10 has a socket left');
  assert.deepEqual(await p.online(), [9, 10]);
  assert.equal(await p.disconnected(10), true, 'last socket of 10');
  assert.deepEqual(await p.online(), [9]);
  assert.equal(await p.disconnected(10), false, 'a user without sockets cannot go offline again');
  assert.equal(await p.connected(10), true, 'and comes back online with one');
  assert.equal(await p.disconnected(10), true);
  assert.equal(await p.disconnected(9), true);
  assert.deepEqual(await p.online(), []);
}

describe('presence without a Redis server: in one process, and with Redis unreachable', () => {
  test('first socket in and last socket out report true, other sockets false; online() lists exactly the online users', async () => {
    const p = createPresence({ keyPrefix: 'unused:', instanceId: 'one' });
    p.start(() => assert.fail('nothing to sweep in one process'));
    await firstInLastOut(p);
    await p.stop();
  });

  test('Redis unreachable: calls reject, and the heartbeat reports to onError instead of throwing', async () => {
    const redis = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on('error', () => {});
    const errors: unknown[] = [];
    const p = createPresence({ redis, keyPrefix: 'unused:', instanceId: 'down', heartbeatMs: 10, deadAfterMs: 50, onError: (err) => errors.push(err) });
    await assert.rejects(p.connected(1));
    await assert.rejects(p.online());
    p.start(() => assert.fail('nothing can be swept'));
    await waitFor('two failed heartbeats', () => errors.length >= 2);
    await assert.rejects(p.stop());
    redis.disconnect();
  });
});

describe('presence across instances, with Redis', () => {
  test('first socket in and last socket out report true, other sockets false; online() lists exactly the online users', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const p = w.instance();
    await firstInLastOut(p);
    assert.equal(await w.admin.exists(w.countKey, w.instanceKey(p.id)), 0, 'counts of 0 are deleted');
  });

  test('every key expires unless renewed', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const p = w.instance(FAST);
    await p.connected(1);
    const keys = await w.admin.keys(`${w.prefix}*`);
    assert.equal(keys.length, 3, keys.join());
    for (const key of keys) {
      const ttl = await w.admin.pttl(key);
      assert.ok(ttl > 0 && ttl <= FAST.deadAfterMs + 2 * FAST.heartbeatMs, `${key}: ${ttl} ms`);
    }
  });

  test('two instances: a user online on both goes offline only with the last socket on either; online() agrees', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const [a, b] = [w.instance(), w.instance()];
    assert.equal(await a.connected(1), true);
    assert.equal(await b.connected(1), false, 'already online through a');
    assert.equal(await b.connected(2), true);
    assert.deepEqual(await a.online(), [1, 2]);
    assert.deepEqual(await b.online(), [1, 2]);
    assert.equal(await a.disconnected(1), false, 'still on b');
    assert.deepEqual(await a.online(), [1, 2]);
    assert.equal(await b.disconnected(1), true, 'the last socket anywhere');
    assert.deepEqual(await a.online(), [2]);
    assert.deepEqual(await b.online(), [2]);
    assert.equal(await b.disconnected(2), true);
    assert.deepEqual(await a.online(), []);
  });

  test('a dead instance is swept: onOffline once with exactly the users who were only there', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const live = w.instance(FAST);
    // Never started, so it never renews its heartbeat: as if its process had died.
    const dead = w.instance(FAST);
    await live.connected(1);
    for (const user of [1, 2, 3, 3]) await dead.connected(user);
    const reports: number[][] = [];
    live.start((ids) => reports.push(ids));
    await waitFor('the sweep', () => reports.length > 0);
    await sleep(4 * FAST.heartbeatMs);
    assert.deepEqual(reports, [[2, 3]]);
    assert.deepEqual(await live.online(), [1]);
    assert.equal(await w.admin.exists(w.instanceKey(dead.id)), 0);
    assert.equal(await w.admin.zscore(`${w.prefix}presence:instances`, dead.id), null);
    assert.equal(await live.disconnected(1), true, 'the dead instance no longer counts');
  });

  test('several live instances sweeping the same dead instance at once report each user once in total', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const sweepers = [1, 2, 3, 4].map(() => w.instance(FAST));
    const dead = w.instance(FAST);
    await sweepers[0]!.connected(6);
    for (const user of [1, 2, 3, 4, 5, 6]) await dead.connected(user);
    const reports: number[][] = [];
    for (const s of sweepers) s.start((ids) => reports.push(ids));
    await waitFor('the sweep', () => reports.length > 0);
    await sleep(4 * FAST.heartbeatMs);
    assert.deepEqual(reports, [[1, 2, 3, 4, 5]], 'one sweeper, one report');
    for (const s of sweepers) assert.deepEqual(await s.online(), [6]);
  });

  test('a dead instance whose hash expired before anyone swept it: its users still go offline', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    // Its keys expire after 50 ms, long before the live instance (deadAfterMs 400) judges it dead.
    const dead = w.instance({ heartbeatMs: 10, deadAfterMs: 30 });
    const live = w.instance(FAST);
    for (const user of [1, 2]) await dead.connected(user);
    await live.connected(3);
    await waitFor('the expiry', async () => (await w.admin.exists(w.instanceKey(dead.id))) === 0);
    assert.deepEqual(await live.online(), [1, 2, 3]);
    const reports: number[][] = [];
    live.start((ids) => reports.push(ids));
    await waitFor('the sweep', () => reports.length > 0);
    assert.deepEqual(reports, [[1, 2]]);
    assert.deepEqual(await live.online(), [3]);
  });

  test('a swept instance that was alive after all publishes its sockets again at its next heartbeat', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const live = w.instance(FAST);
    const paused = w.instance(FAST);
    await live.connected(1);
    for (const user of [1, 2, 2]) await paused.connected(user);
    const offline: number[][] = [];
    live.start((ids) => offline.push(ids));
    await waitFor('the sweep', () => offline.length > 0);
    assert.deepEqual(offline, [[2]]);
    assert.deepEqual(await paused.online(), [1]);

    const cameBack: number[][] = [];
    paused.start(() => assert.fail('nothing went offline'), (ids) => cameBack.push(ids));
    await waitFor('the republication', () => cameBack.length > 0);
    assert.deepEqual(cameBack, [[2]], 'user 1 was online through the live instance all along');
    assert.deepEqual(await live.online(), [1, 2]);
    await sleep(4 * FAST.heartbeatMs);
    assert.deepEqual(offline, [[2]], 'not swept again');
    // Counts are exact again: 2 had two sockets there, 1 one socket on each instance.
    assert.equal(await paused.disconnected(2), false);
    assert.equal(await paused.disconnected(2), true);
    assert.equal(await paused.disconnected(1), false);
    assert.equal(await live.disconnected(1), true);
    assert.deepEqual(await live.online(), []);
  });

  test('a swept instance that was alive after all publishes its sockets again at its next change', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const live = w.instance(FAST);
    const paused = w.instance(FAST);
    await live.connected(1);
    for (const user of [1, 2]) await paused.connected(user);
    const offline: number[][] = [];
    live.start((ids) => offline.push(ids));
    await waitFor('the sweep', () => offline.length > 0);
    assert.deepEqual(offline, [[2]]);

    assert.equal(await paused.connected(1), false, '1 is online through the live instance');
    assert.deepEqual(await live.online(), [1, 2], '2 is back with the socket it kept');
    // Alive from now on, so that a slow machine does not sweep it again mid-test.
    paused.start(() => assert.fail('nothing went offline'));
    assert.equal(await paused.connected(2), false);
    assert.equal(await paused.disconnected(2), false);
    assert.equal(await paused.disconnected(2), true);
    assert.equal(await live.disconnected(1), false, 'two sockets of 1 are left on the other instance');
    assert.equal(await paused.disconnected(1), false);
    assert.equal(await paused.disconnected(1), true);
    assert.deepEqual(await live.online(), []);
  });

  test('changes that failed (Redis unreachable) are published at the next heartbeat', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    // No offline queue: while it is disconnected, its commands fail as during an outage.
    const redis = w.client({ enableOfflineQueue: false });
    const p = w.instance({ ...FAST, redis });
    if (redis.status !== 'ready') await once(redis, 'ready');
    assert.equal(await p.connected(4), true);
    const closed = once(redis, 'end');
    redis.disconnect();
    await assert.rejects(p.connected(5));
    await assert.rejects(p.disconnected(4));
    await closed;
    await redis.connect();
    const online: number[][] = [];
    const offline: number[][] = [];
    p.start((ids) => offline.push(ids), (ids) => online.push(ids));
    await waitFor('the republication', () => online.length > 0);
    assert.deepEqual(online, [[5]]);
    assert.deepEqual(offline, [[4]]);
    assert.deepEqual(await p.online(), [5]);
    assert.equal(await p.disconnected(5), true);
  });

  test('after a reconnect, an instance publishes its counts again (a resent change may have run twice)', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const redis = w.client();
    const p = w.instance({ ...FAST, redis });
    assert.equal(await p.connected(7), true);
    p.start(() => {});
    // As if ioredis had resent connected(7) after losing its answer: it ran twice.
    await w.admin.hincrby(w.instanceKey(p.id), '7', 1);
    await w.admin.hincrby(w.countKey, '7', 1);
    const closed = once(redis, 'end');
    redis.disconnect();
    await closed;
    await redis.connect();
    await waitFor('the republication', async () => (await w.admin.hget(w.countKey, '7')) === '1');
    assert.equal(await p.disconnected(7), true);
  });

  test('stop() takes the instance out and reports the users it leaves offline; later calls do not bring it back', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const [a, b] = [w.instance(FAST), w.instance(FAST)];
    for (const user of [1, 2]) await a.connected(user);
    await b.connected(2);
    const offline: number[][] = [];
    a.start((ids) => offline.push(ids));
    // Its sockets' disconnected() calls have not run yet (they are in flight as the server closes).
    await a.stop();
    assert.deepEqual(offline, [[1]], '2 is still on b');
    assert.deepEqual(await b.online(), [2]);
    assert.equal(await a.disconnected(1), false, 'already reported');
    assert.equal(await a.connected(3), false);
    assert.deepEqual(await b.online(), [2]);
    assert.deepEqual(await w.admin.keys(`${w.prefix}presence:instance:*`), [w.instanceKey(b.id)]);
    assert.equal(await w.admin.zscore(`${w.prefix}presence:instances`, a.id), null);
    assert.equal(await b.disconnected(2), true);
  });

  test('a change still in flight when stop() runs does not register the instance again', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const live = w.instance(FAST);
    const gate = holdingReplies(w.client());
    const paused = w.instance({ ...FAST, redis: gate.redis });
    await paused.connected(1);
    const offline: number[][] = [];
    live.start((ids) => offline.push(ids));
    await waitFor('the sweep', () => offline.length > 0);
    gate.holdNext();
    // Its command finds the instance swept; the answer arrives only after stop().
    const late = paused.disconnected(1);
    await sleep(0);
    await paused.stop();
    gate.release();
    assert.equal(await late, false, 'reported by the sweep already');
    assert.equal(await w.admin.exists(w.instanceKey(paused.id)), 0);
    assert.equal(await w.admin.zscore(`${w.prefix}presence:instances`, paused.id), null);
    assert.deepEqual(offline, [[1]]);
  });

  test('100 connections and disconnections in parallel on two instances leave every count at 0', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const [a, b] = [w.instance(), w.instance()];
    const results = await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        const p = i % 2 === 0 ? a : b;
        const user = (i % 3) + 1;
        await sleep(Math.random() * 10);
        const first = await p.connected(user);
        await sleep(Math.random() * 10);
        const last = await p.disconnected(user);
        return { user, first, last };
      }),
    );
    for (const user of [1, 2, 3]) {
      const mine = results.filter((r) => r.user === user);
      const firsts = mine.filter((r) => r.first).length;
      assert.ok(firsts >= 1, `user ${user} came online`);
      assert.equal(mine.filter((r) => r.last).length, firsts, `user ${user}: as many times offline as online`);
    }
    assert.deepEqual(await a.online(), []);
    assert.deepEqual(await b.online(), []);
    assert.equal(await w.admin.exists(w.countKey, w.instanceKey(a.id), w.instanceKey(b.id)), 0);
  });
});
