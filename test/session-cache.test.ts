// The session cache of the HTTP per-request check (src/modules/sessions/sessions.cache.ts,
// docs/api.md section 3): a request served from the cache is still refused at once after a
// revocation on the same instance (each test first fills the cache with a successful GET and
// checks that the session is cached), within 100 ms on another instance, and within 100 ms of
// a change made straight in the database (migrations/0015's triggers); while the notice
// channel is down the cache serves nothing. Then the cache's own bounds.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, describe, test } from 'node:test';
import { SessionCache } from '../src/modules/sessions/sessions.cache.js';
import type { SessionRow } from '../src/domain/session-verdict.js';
import { assertProblem, Client, login, type Response, type Session } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { needsPostgres, startTestServer, type TestServer } from './helpers/server.js';
import { sleep } from './helpers/sockets.js';

const PROFILE = '/api/v1/profile';
const AUDIT_LOGS = '/api/v1/audit-logs';
/** The contract's bound for another instance (docs/api.md section 3). */
const ELSEWHERE_MS = 100;

const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0' } });

let second: TestServer | undefined;
/** Instance B: the same database (and Redis), its own cache and its own LISTEN. */
async function instanceB(): Promise<TestServer> {
  second ??= await startTestServer({ database: h.server.database, env: { RATE_LIMIT_PER_MINUTE: '0' } });
  return second;
}
after(() => second?.close());

const sessionIdOf = (s: Session): number => JSON.parse(Buffer.from(s.token.split('.')[1]!, 'base64url').toString()).sid;

/** A successful GET on `server` as `s`, after which `server` holds the session in its cache. */
async function filled(server: TestServer, s: Session, path = PROFILE): Promise<void> {
  const res = await new Client(server).get(path, { token: s.token });
  assert.equal(res.status, 200, res.text);
  assert.ok(server.deps.sessionCache.get(sessionIdOf(s)), 'the session is cached after a successful request');
}

/**
 * Asks `server` for `path` as `s` again and again until it refuses (3 s at most). Answers the
 * refusal, and when the last request it served started, in ms after `since`: the contract is that
 * no request starting later than 100 ms after the change is served.
 */
async function untilRefused(server: TestServer, s: Session, since: number, path = PROFILE): Promise<{ refusal: Response; lastServedAfter: number }> {
  const client = new Client(server);
  let lastServedAfter = -Infinity;
  for (;;) {
    const started = performance.now();
    const res = await client.get(path, { token: s.token });
    if (res.status !== 200) {
      // Refused for good: the next ones are refused too.
      assert.equal((await client.get(path, { token: s.token })).status, res.status);
      return { refusal: res, lastServedAfter };
    }
    lastServedAfter = started - since;
    if (lastServedAfter > 3000) assert.fail(`still served ${Math.round(lastServedAfter)} ms after the change`);
  }
}

describe('on the instance that makes the change, the very next request is refused', () => {
  test('a GET after logout: 401 TOKEN_REVOKED', async () => {
    const user = await h.newUser();
    await filled(h.server, user);
    assert.equal((await user.client.post('/api/v1/auth/logout', undefined, { token: user.token })).status, 204);
    assertProblem(await user.client.get(PROFILE, { token: user.token }), 401, 'TOKEN_REVOKED');
  });

  test('a GET after deactivation: 403 ACCOUNT_DEACTIVATED', async () => {
    const user = await h.newUser();
    await filled(h.server, user);
    assert.equal((await h.admin.client.put(`/api/v1/users/${user.id}/active`, { active: false }, { token: h.admin.token })).status, 200);
    assertProblem(await user.client.get(PROFILE, { token: user.token }), 403, 'ACCOUNT_DEACTIVATED');
  });

  test("an ex-ADMIN's GET /audit-logs after demotion: 403", async () => {
    const boss = await h.newUser({ role: 'ADMIN' });
    await filled(h.server, boss, AUDIT_LOGS);
    assert.equal((await h.admin.client.put(`/api/v1/users/${boss.id}/role`, { role: 'USER' }, { token: h.admin.token })).status, 200);
    assertProblem(await boss.client.get(AUDIT_LOGS, { token: boss.token }), 403, 'FORBIDDEN');
  });

  test("the user's other sessions after a password change: 401 TOKEN_REVOKED; this one still works", async () => {
    const user = await h.newUser();
    const other = await login(h.server, user.email, user.password);
    await filled(h.server, other);
    await filled(h.server, user);
    const changed = await user.client.put('/api/v1/auth/password', { current_password: user.password, new_password: 'a-new-password-1' }, { token: user.token });
    assert.equal(changed.status, 204, changed.text);
    assertProblem(await other.client.get(PROFILE, { token: other.token }), 401, 'TOKEN_REVOKED');
    assert.equal((await user.client.get(PROFILE, { token: user.token })).status, 200);
  });

  test('the session of a spent refresh token presented again: 401 TOKEN_REVOKED', async () => {
    const user = await h.newUser();
    await filled(h.server, user);
    assert.equal((await user.client.post('/api/v1/auth/refresh', { refresh_token: user.refreshToken })).status, 200);
    assertProblem(await new Client(h.server).post('/api/v1/auth/refresh', { refresh_token: user.refreshToken }), 401, 'TOKEN_REVOKED');
    assertProblem(await user.client.get(PROFILE, { token: user.token }), 401, 'TOKEN_REVOKED');
  });

  test('a deleted user: 401 TOKEN_REVOKED', async () => {
    const user = await h.newUser();
    await filled(h.server, user);
    assert.equal((await h.admin.client.delete(`/api/v1/users/${user.id}`, { token: h.admin.token })).status, 204);
    assertProblem(await user.client.get(PROFILE, { token: user.token }), 401, 'TOKEN_REVOKED');
  });

  test('a changed name is what the next request acts with', async () => {
    const user = await h.newUser();
    await filled(h.server, user);
    assert.equal((await user.client.put(PROFILE, { name: 'Renamed' }, { token: user.token })).status, 200);
    assert.equal(h.server.deps.sessionCache.get(sessionIdOf(user)), undefined, 'dropped at the commit');
    await filled(h.server, user);
    assert.equal(h.server.deps.sessionCache.get(sessionIdOf(user))?.name, 'Renamed');
  });
});

test('GET /metrics counts the cache hits and misses, and the sessions held', async () => {
  const user = await h.newUser();
  await filled(h.server, user);
  const text = (await new Client(h.server).get('/metrics')).text;
  const value = (sample: string) => Number(new RegExp(`^${sample.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);
  assert.ok(value('teamlog_session_cache_lookups_total{result="hit"}') >= 1, text);
  assert.ok(value('teamlog_session_cache_lookups_total{result="miss"}') >= 1);
  assert.ok(value('teamlog_session_cache_entries') >= 1);
});

describe('another instance refuses within 100 ms of the change', { skip: needsPostgres }, () => {
  test('a logout on A: B refuses the session with 401 TOKEN_REVOKED', async () => {
    const b = await instanceB();
    const user = await h.newUser();
    await filled(b, user);
    assert.equal((await user.client.post('/api/v1/auth/logout', undefined, { token: user.token })).status, 204);
    const answered = performance.now();
    const { refusal, lastServedAfter } = await untilRefused(b, user, answered);
    assertProblem(refusal, 401, 'TOKEN_REVOKED');
    assert.ok(lastServedAfter <= ELSEWHERE_MS, `B served a request that started ${Math.round(lastServedAfter)} ms after A's answer`);
  });

  test('a deactivation on A: B refuses the user with 403 ACCOUNT_DEACTIVATED', async () => {
    const b = await instanceB();
    const user = await h.newUser();
    await filled(b, user);
    assert.equal((await h.admin.client.put(`/api/v1/users/${user.id}/active`, { active: false }, { token: h.admin.token })).status, 200);
    const answered = performance.now();
    const { refusal, lastServedAfter } = await untilRefused(b, user, answered);
    assertProblem(refusal, 403, 'ACCOUNT_DEACTIVATED');
    assert.ok(lastServedAfter <= ELSEWHERE_MS, `B served a request that started ${Math.round(lastServedAfter)} ms after A's answer`);
  });
});

describe('a change made straight in the database reaches the caches (migrations/0015)', { skip: needsPostgres }, () => {
  test('an UPDATE of sessions.revoked_at from another connection: refused within 100 ms of its commit', async () => {
    const user = await h.newUser();
    await filled(h.server, user);
    await h.server.owner.query('UPDATE sessions SET revoked_at = now() WHERE id = $1', [sessionIdOf(user)]);
    const committed = performance.now();
    const { refusal, lastServedAfter } = await untilRefused(h.server, user, committed);
    assertProblem(refusal, 401, 'TOKEN_REVOKED');
    assert.ok(lastServedAfter <= ELSEWHERE_MS, `served a request that started ${Math.round(lastServedAfter)} ms after the commit`);
  });

  test('an UPDATE of users.role: the ex-ADMIN is refused GET /audit-logs within 100 ms', async () => {
    const boss = await h.newUser({ role: 'ADMIN' });
    await filled(h.server, boss, AUDIT_LOGS);
    await h.server.owner.query(`UPDATE users SET role = 'USER' WHERE id = $1`, [boss.id]);
    const committed = performance.now();
    const { refusal, lastServedAfter } = await untilRefused(h.server, boss, committed, AUDIT_LOGS);
    assertProblem(refusal, 403, 'FORBIDDEN');
    assert.ok(lastServedAfter <= ELSEWHERE_MS, `served a request that started ${Math.round(lastServedAfter)} ms after the commit`);
  });

  test('a refresh extending a session and a touch of users.updated_at notify nothing: the session stays cached', async () => {
    const [user, marker] = await Promise.all([h.newUser(), h.newUser()]);
    await filled(h.server, user);
    await filled(h.server, marker);
    await h.server.owner.query(`UPDATE sessions SET expires_at = expires_at + interval '1 hour' WHERE id = $1`, [sessionIdOf(user)]);
    await h.server.owner.query('UPDATE users SET updated_at = now(), version = version + 1 WHERE id = $1', [user.id]);
    // Notices arrive in commit order: once the marker's is in, any for the updates above would be too.
    await h.server.owner.query('UPDATE sessions SET revoked_at = now() WHERE id = $1', [sessionIdOf(marker)]);
    const cache = h.server.deps.sessionCache;
    for (let i = 0; cache.get(sessionIdOf(marker)) && i < 300; i++) await sleep(10);
    assert.equal(cache.get(sessionIdOf(marker)), undefined, "the marker's notice arrived");
    assert.ok(cache.get(sessionIdOf(user)), 'the session is still cached');
  });

  test('while the notice channel is down the cache serves nothing, and requests are checked in the database', async () => {
    const user = await h.newUser();
    await filled(h.server, user);
    const cache = h.server.deps.sessionCache;
    // Every LISTEN connection of this database: the dispatchers' reconnect as the cache's does.
    await h.server.owner.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'teamlog-listen'`);
    for (let i = 0; cache.serving && i < 300; i++) await sleep(2);
    assert.equal(cache.serving, false, 'the lost connection is noticed');
    assert.equal(cache.size, 0, 'what was cached may have missed a notice: it is gone');
    // A revocation while the channel is down (its notice is lost): refused all the same.
    await h.server.owner.query('UPDATE sessions SET revoked_at = now() WHERE id = $1', [sessionIdOf(user)]);
    assertProblem(await user.client.get(PROFILE, { token: user.token }), 401, 'TOKEN_REVOKED');
    // The connection comes back by itself, and the cache serves again.
    for (let i = 0; !cache.serving && i < 500; i++) await sleep(10);
    assert.equal(cache.serving, true, 'listening again');
    await filled(h.server, await h.newUser());
  });
});

describe('the cache itself', () => {
  const row = (id: number): SessionRow => ({ id, email: `u${id}@test.local`, name: `U${id}`, role: 'USER', active: true, revoked: false, expired: false });
  const clock = () => {
    const c = { t: 1_000_000, now: () => c.t };
    return c;
  };

  test('keeps at most maxEntries, evicting the oldest', () => {
    const cache = new SessionCache({ needsNotices: false, maxEntries: 2 });
    for (const sid of [1, 2, 3]) cache.put(sid, row(10 + sid), Date.now() + 60_000, cache.ticket());
    assert.equal(cache.size, 2);
    assert.equal(cache.get(1), undefined);
    assert.equal(cache.get(3)?.id, 13);
  });

  test('an entry past the TTL or past its session expiry is a miss', () => {
    const c = clock();
    const cache = new SessionCache({ needsNotices: false, ttlMs: 60_000, now: c.now });
    cache.put(1, row(1), c.t + 120_000, cache.ticket());
    cache.put(2, row(2), c.t + 30_000, cache.ticket());
    c.t += 30_000;
    assert.equal(cache.get(2), undefined, 'expired: the database answers TOKEN_EXPIRED');
    assert.equal(cache.get(1)?.id, 1);
    c.t += 30_000;
    assert.equal(cache.get(1), undefined, 'past the TTL: read again');
    assert.equal(cache.size, 0);
  });

  test('never caches a refusal', () => {
    const cache = new SessionCache({ needsNotices: false });
    cache.put(1, { ...row(1), revoked: true }, Date.now() + 60_000, cache.ticket());
    cache.put(2, { ...row(2), active: false }, Date.now() + 60_000, cache.ticket());
    cache.put(3, { ...row(3), expired: true }, Date.now() + 60_000, cache.ticket());
    assert.equal(cache.size, 0);
  });

  test("drops a session, every session of a user, or everything, by the notices' payloads", () => {
    const cache = new SessionCache({ needsNotices: false });
    const t = cache.ticket();
    cache.put(1, row(7), Date.now() + 60_000, t);
    cache.put(2, row(7), Date.now() + 60_000, t);
    cache.put(3, row(8), Date.now() + 60_000, t);
    cache.put(4, row(9), Date.now() + 60_000, t);
    cache.notice('s:4');
    assert.equal(cache.get(4), undefined);
    cache.notice('u:7');
    assert.deepEqual([cache.get(1), cache.get(2)], [undefined, undefined]);
    assert.equal(cache.get(3)?.id, 8);
    cache.notice('*');
    assert.equal(cache.size, 0);
  });

  test('a row read before a drop is not stored after it', () => {
    const cache = new SessionCache({ needsNotices: false });
    const ticket = cache.ticket();
    cache.dropSession(1); // the revocation's notice, between the read and the store
    cache.put(1, row(1), Date.now() + 60_000, ticket);
    assert.equal(cache.get(1), undefined);
  });

  test('with needsNotices, serves only while listening, and empties when listening starts or stops', () => {
    const cache = new SessionCache({ needsNotices: true });
    cache.put(1, row(1), Date.now() + 60_000, cache.ticket());
    assert.equal(cache.size, 0, 'not listening yet: nothing stored');
    cache.setListening(true);
    cache.put(1, row(1), Date.now() + 60_000, cache.ticket());
    assert.equal(cache.get(1)?.id, 1);
    cache.setListening(false);
    assert.equal(cache.get(1), undefined);
    assert.equal(cache.size, 0);
  });
});
