// The general rate limit (RATE_LIMIT_PER_MINUTE, docs/api.md section 7): per user, or per address
// before login; RateLimit-* headers; 429 RATE_LIMITED with Retry-After; 0 turns it off;
// shared by every instance through Redis, per instance without it; and served, not refused,
// while Redis is unreachable. The login throttle is apart (auth and hostile-client tests).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Client, type Response, type Session } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { needsRedis, startTestServer, type TestServer } from './helpers/server.js';
import { assertRateLimited } from './helpers/limits.js';

const LIMIT = 12;
const env = { RATE_LIMIT_PER_MINUTE: String(LIMIT) };
const h = useTestServer({ env });

/** GET /profile as `s`, on `server` (another instance accepts the same token). */
const profile = (s: Session, server: TestServer = h.server) =>
  (server === s.client.server ? s.client : new Client(server)).get('/api/v1/profile', { token: s.token });

async function spend(n: number, request: () => Promise<Response>): Promise<Response[]> {
  const answers: Response[] = [];
  for (let i = 0; i < n; i++) answers.push(await request());
  return answers;
}

describe('the general rate limit', () => {
  test('counts per user: RateLimit headers count down, then 429 RATE_LIMITED with Retry-After; another user is unaffected', async () => {
    const [alice, bob] = await Promise.all([h.newUser(), h.newUser()]);
    const answers = await spend(LIMIT, () => profile(alice));
    answers.forEach((res, i) => {
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers.get('ratelimit-limit'), String(LIMIT));
      assert.equal(res.headers.get('ratelimit-remaining'), String(LIMIT - i - 1));
      assert.ok(Number(res.headers.get('ratelimit-reset')) > 0);
    });
    assertRateLimited(await profile(alice), LIMIT);
    // Every route shares the one counter; another user has their own.
    assertRateLimited(await alice.client.get('/api/v1/tasks', { token: alice.token }), LIMIT);
    assert.equal((await profile(bob)).status, 200);
  });

  test('counts per address before login, bad requests included', async () => {
    const stranger = new Client(h.server);
    const answers = await spend(LIMIT, () => stranger.post('/api/v1/auth/login', { email: 'nobody' }));
    assert.deepEqual([...new Set(answers.map((r) => r.status))], [400]);
    const user = await h.newUser();
    assertRateLimited(await stranger.post('/api/v1/auth/login', { email: user.email, password: user.password }), LIMIT);
    assert.equal((await new Client(h.server).post('/api/v1/auth/login', { email: user.email, password: user.password })).status, 200, 'another address');
  });

  test('health, readiness and metrics are not limited', async () => {
    const probe = new Client(h.server);
    for (const path of ['/health/live', '/health/ready', '/metrics']) {
      const answers = await spend(LIMIT + 3, () => probe.get(path));
      assert.deepEqual([...new Set(answers.map((r) => r.status))], [200], path);
      assert.equal(answers[0]!.headers.get('ratelimit-limit'), null);
    }
  });

  test('RATE_LIMIT_PER_MINUTE=0 turns it off: no 429, no RateLimit headers', async () => {
    const unlimited = await startTestServer({ database: h.server.database, env: { RATE_LIMIT_PER_MINUTE: '0' } });
    try {
      const someone = await h.newUser();
      const answers = await spend(LIMIT * 2, () => profile(someone, unlimited));
      assert.deepEqual([...new Set(answers.map((r) => r.status))], [200]);
      assert.equal(answers[0]!.headers.get('ratelimit-limit'), null);
    } finally {
      await unlimited.close();
    }
  });
});

describe('several instances', () => {
  test('with Redis, instances share the counters: the limit holds across both', { skip: needsRedis }, async () => {
    const second = await startTestServer({ database: h.server.database, env });
    try {
      const user = await h.newUser();
      let sent = 0;
      const answers = await spend(LIMIT, () => profile(user, sent++ % 2 === 0 ? h.server : second));
      assert.deepEqual([...new Set(answers.map((r) => r.status))], [200]);
      assertRateLimited(await profile(user, h.server), LIMIT);
      assertRateLimited(await profile(user, second), LIMIT);
    } finally {
      await second.close();
    }
  });

  test('without Redis, each instance counts on its own (as documented)', async () => {
    const local = { ...env, REDIS_URL: '' };
    const [a, b] = [await startTestServer({ database: h.server.database, env: local }), await startTestServer({ database: h.server.database, env: local })];
    try {
      const user = await h.newUser();
      assert.deepEqual([...new Set((await spend(LIMIT, () => profile(user, a))).map((r) => r.status))], [200]);
      assertRateLimited(await profile(user, a), LIMIT);
      assert.equal((await profile(user, b)).status, 200, 'the other instance has its own count');
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test('Redis unreachable: requests are served rather than refused', async () => {
    const cut = await startTestServer({ database: h.server.database, env: { ...env, REDIS_URL: 'redis://127.0.0.1:1' } });
    try {
      const user = await h.newUser();
      const answers = await spend(LIMIT * 2, () => profile(user, cut));
      assert.deepEqual([...new Set(answers.map((r) => r.status))], [200]);
    } finally {
      await cut.close();
    }
  });
});
