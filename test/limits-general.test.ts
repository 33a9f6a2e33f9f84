// The general rate limit counts every /api request, whatever it answers (docs/api.md section 7): a
// 401 for a missing, forged or revoked token, a 404, an unknown route under /api and a 405 count
// against the address; past the limit the address is refused before authentication (even with
// a valid token, which would otherwise count against its user); each refusal is counted in
// teamlog_requests_limited_total{limit="general"}. test/rate-limit.test.ts covers the counts of
// authenticated users, the headers, RATE_LIMIT_PER_MINUTE=0 and Redis being unreachable.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Client, login, type Response } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { needsRedis, startTestServer, type TestServer } from './helpers/server.js';
import { assertRateLimited, limitedCount } from './helpers/limits.js';

const LIMIT = 8;
const env = { RATE_LIMIT_PER_MINUTE: String(LIMIT) };
const h = useTestServer({ env });

let second: TestServer | undefined;
after(() => second?.close());

/** Sends `n` requests one after the other and answers their statuses. */
async function statuses(n: number, request: () => Promise<Response>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await request()).status);
  return out;
}

describe('every /api request counts against the address unless it is authenticated', () => {
  test('a revoked token: 401 up to the limit, then 429, even for a valid token from that address; another address is unaffected', async () => {
    const user = await h.newUser();
    const revoked = await login(h.server, user.email, user.password);
    assert.equal((await revoked.client.post('/api/v1/auth/logout', undefined, { token: revoked.token })).status, 204);
    const before = await limitedCount(h.server, 'general');
    const attacker = new Client(h.server);
    assert.deepEqual(await statuses(LIMIT, () => attacker.get('/api/v1/profile', { token: revoked.token })), Array(LIMIT).fill(401));
    for (let i = 0; i < 5; i++) assertRateLimited(await attacker.get('/api/v1/profile', { token: revoked.token }), LIMIT, `revoked token, past the limit #${i}`);
    // Refused before authentication: a valid token would have counted against its user and passed.
    assertRateLimited(await attacker.get('/api/v1/profile', { token: user.token }), LIMIT, 'a valid token from the spent address');
    assert.equal((await limitedCount(h.server, 'general')) - before, 6);
    assert.equal((await new Client(h.server).get('/api/v1/profile', { token: revoked.token })).status, 401, 'another address');
    assert.equal((await user.client.get('/api/v1/profile', { token: user.token })).status, 200, 'the user from their own address');
  });

  test('a forged token, and no token at all', async () => {
    for (const headers of [{ authorization: 'Bearer not.a.token' }, {} as Record<string, string>]) {
      const someone = new Client(h.server);
      assert.deepEqual(await statuses(LIMIT, () => someone.get('/api/v1/tasks', { headers })), Array(LIMIT).fill(401));
      assertRateLimited(await someone.get('/api/v1/tasks', { headers }), LIMIT, JSON.stringify(headers));
    }
  });

  test('unknown routes under /api (and /api/<rest>, its alias), with or without a token', async () => {
    const user = await h.newUser();
    const scanner = new Client(h.server);
    const paths = ['/api/v1/no-such-route', '/api/nothing-here', '/api/v1/users/1/secrets'];
    const answers = await statuses(LIMIT, () => scanner.get(paths[Math.floor(Math.random() * paths.length)]!, { token: user.token }));
    assert.deepEqual(answers, Array(LIMIT).fill(404));
    assertRateLimited(await scanner.get('/api/v1/no-such-route'), LIMIT, 'an unknown route past the limit');
    assertRateLimited(await scanner.get('/api/v1/profile', { token: user.token }), LIMIT, 'a known route from the spent address');
    // Outside /api the general limit does not apply.
    assert.equal((await scanner.get('/health/live')).status, 200);
  });

  test('a method a route does not take (405) and a public route\'s refusal count too', async () => {
    const someone = new Client(h.server);
    const half = LIMIT / 2;
    assert.deepEqual(await statuses(half, () => someone.request('PATCH', '/api/v1/profile')), Array(half).fill(405));
    assert.deepEqual(await statuses(half, () => someone.post('/api/v1/auth/refresh', { refresh_token: 'nope' })), Array(half).fill(401));
    assertRateLimited(await someone.post('/api/v1/auth/refresh', { refresh_token: 'nope' }), LIMIT, 'refresh past the limit');
  });

  test('an authenticated user\'s 404 counts against the user, not the address', async () => {
    const user = await h.newUser();
    assert.deepEqual(await statuses(LIMIT, () => user.client.get('/api/v1/tasks/999999999', { token: user.token })), Array(LIMIT).fill(404));
    assertRateLimited(await user.client.get('/api/v1/profile', { token: user.token }), LIMIT, 'the user past the limit');
    // Their address spent nothing: anonymous requests from it still pass.
    assert.equal((await user.client.get('/api/v1/version')).status, 200);
  });
});

describe('several instances', () => {
  test('with Redis, the address count is shared: past the limit, each instance answers at most one more before refusing', { skip: needsRedis }, async () => {
    second ??= await startTestServer({ database: h.server.database, env });
    const attacker = new Client(h.server);
    const onB = Object.assign(new Client(second), { ip: attacker.ip });
    let sent = 0;
    const answers = await statuses(LIMIT, () => (sent++ % 2 === 0 ? attacker : onB).get('/api/v1/profile', { token: 'forged.token.here' }));
    assert.deepEqual(answers, Array(LIMIT).fill(401));
    for (const client of [attacker, onB]) {
      const first = await client.get('/api/v1/profile', { token: 'forged.token.here' });
      assert.ok(first.status === 401 || first.status === 429, `${first.status}`);
      assertRateLimited(await client.get('/api/v1/profile', { token: 'forged.token.here' }), LIMIT, 'past the shared limit');
    }
  });
});
