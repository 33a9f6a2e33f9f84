// The socket limit in presence's counts (src/realtime/presence.ts): connected() with a `max`
// takes a slot or answers 'full', atomically across instances; /admin sockets count towards the
// limit but are not presence; a refused slot leaves every count as it was.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createPresence, type Presence } from '../src/realtime/presence.js';
import { redisWorld } from './helpers/presence-world.js';
import { needsRedis } from './helpers/server.js';

const MAX = 20;

async function limitHolds(instances: Presence[]): Promise<void> {
  const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => instances[i % instances.length]!.connected(7, { max: MAX, admin: i % 3 === 0 })));
  assert.equal(answers.filter((a) => a === 'full').length, 10, JSON.stringify(answers));
  assert.deepEqual(await instances[0]!.online(), [7], '/admin sockets are not presence, / ones are');
  // Full: one more of either namespace is refused, on any instance; one given back frees a slot.
  for (const p of instances) {
    assert.equal(await p.connected(7, { max: MAX }), 'full');
    assert.equal(await p.connected(7, { max: MAX, admin: true }), 'full');
  }
  const admitted = answers.map((a, i) => ({ a, i })).filter(({ a }) => a !== 'full');
  const { i } = admitted.find(({ i }) => i % 3 !== 0)!;
  await instances[i % instances.length]!.disconnected(7);
  assert.notEqual(await instances[0]!.connected(7, { max: MAX }), 'full');
  assert.equal(await instances[instances.length - 1]!.connected(7, { max: MAX }), 'full');
  // Another user has slots of their own.
  assert.equal(await instances[0]!.connected(8, { max: MAX }), true);
}

describe('the socket limit in presence', () => {
  test('in one process: 30 at once, exactly 20 admitted', async () => {
    await limitHolds([createPresence({ keyPrefix: 'unused:', instanceId: 'one' })]);
  });

  test('across two instances through Redis: 30 at once, exactly 20 admitted, and the sums stay exact', { skip: needsRedis }, async (t) => {
    const w = redisWorld(t);
    const [a, b] = [w.instance(), w.instance()];
    await limitHolds([a, b]);
    // 20 slots of 7 (admin ones as a:7) and 1 of 8, whatever was refused on the way.
    const sums = await w.admin.hgetall(w.countKey);
    assert.equal(Number(sums['7'] ?? 0) + Number(sums['a:7'] ?? 0), MAX, JSON.stringify(sums));
    assert.equal(sums['8'], '1');
  });
});
