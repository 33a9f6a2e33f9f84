// @teamlog/client's sessions (issue 25) against a real server whose access tokens live 3 s:
// refreshed before they expire, and on a 401 TOKEN_EXPIRED with every caller waiting on one
// refresh; the rotated refresh token handed to the store (and a session resumed from it); a
// session revoked elsewhere signs the client out and tells the application; logout.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createClient, localStorageStore, memoryStore, type AuthEvents, type StoredSession, type TokenStore } from '../client/src/index.js';
import { randomIp } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { sleep } from './helpers/sockets.js';

const TTL_S = 3;
const h = useTestServer({ env: { ACCESS_TOKEN_TTL: String(TTL_S) } });
/** A new user: the harness's ADMIN logs in again first, since their token of a moment ago has expired. */
async function newUser() {
  await h.reloginAdmin();
  return h.newUser();
}

/** The real fetch, counting what went out and what came back, by path. */
function counting() {
  const calls: Array<{ path: string; status: number; code?: string }> = [];
  const fetchCounted: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const path = new URL(String(input)).pathname.replace('/api/v1', '');
    let code: string | undefined;
    if (res.status >= 400) code = ((await res.clone().json()) as { code?: string }).code;
    calls.push({ path, status: res.status, code });
    return res;
  };
  return { calls, fetch: fetchCounted };
}

/** A Storage as browsers have it (Node 20 has none). */
class MemoryStorage implements Pick<Storage, 'getItem' | 'setItem' | 'removeItem'> {
  private readonly items = new Map<string, string>();
  getItem = (k: string) => this.items.get(k) ?? null;
  setItem = (k: string, v: string) => void this.items.set(k, v);
  removeItem = (k: string) => void this.items.delete(k);
}

test('an access token the service says has expired (401 TOKEN_EXPIRED) is refreshed once for every caller waiting, and each call goes through', async () => {
  const me = await newUser();
  const net = counting();
  // A client whose clock runs 10 s behind the service's: it believes its token good after the
  // service has let it expire, so it learns of the expiry from 401 TOKEN_EXPIRED.
  const teamlog = createClient({ baseUrl: h.server.url, fetch: net.fetch, autoRefresh: false, refreshMarginMs: -10_000, headers: { 'x-forwarded-for': randomIp() } });
  await teamlog.login(me.email, me.password);
  await sleep(TTL_S * 1000 + 300);
  const profiles = await Promise.all(Array.from({ length: 5 }, () => teamlog.profile.get()));
  assert.deepEqual(profiles.map((p) => p.id), Array(5).fill(me.id));
  assert.equal(net.calls.filter((c) => c.path === '/auth/refresh').length, 1, 'one refresh for five callers');
  assert.equal(net.calls.filter((c) => c.code === 'TOKEN_EXPIRED').length, 5, 'each caller met the expiry once, then went through');
  assert.equal(net.calls.filter((c) => c.path === '/profile' && c.status === 200).length, 5);
  teamlog.close();
});

test('a token the client knows has expired is refreshed before the calls, once for all of them', async () => {
  const me = await newUser();
  const net = counting();
  const teamlog = createClient({ baseUrl: h.server.url, fetch: net.fetch, autoRefresh: false, headers: { 'x-forwarded-for': randomIp() } });
  await teamlog.login(me.email, me.password);
  await sleep(TTL_S * 1000 + 300);
  await Promise.all(Array.from({ length: 5 }, () => teamlog.tasks.list().page()));
  assert.equal(net.calls.filter((c) => c.path === '/auth/refresh').length, 1);
  assert.equal(net.calls.filter((c) => c.status === 401).length, 0);
  teamlog.close();
});

test('with autoRefresh, tokens are renewed before they expire: no request meets an expired token', async () => {
  const me = await newUser();
  const net = counting();
  const tokens: number[] = [];
  const teamlog = createClient({ baseUrl: h.server.url, fetch: net.fetch, headers: { 'x-forwarded-for': randomIp() } });
  teamlog.on('token', ({ expiresAt }) => void tokens.push(expiresAt));
  await teamlog.login(me.email, me.password);
  for (let i = 0; i < 8; i++) {
    assert.equal((await teamlog.profile.get()).id, me.id);
    await sleep(1000);
  }
  assert.equal(net.calls.filter((c) => c.status === 401).length, 0);
  assert.ok(tokens.length >= 3, `${tokens.length} tokens in 8 s of 3-s tokens`);
  teamlog.close();
});

test('each rotated refresh token goes to the store; a new client resumes the session from it (localStorage)', async () => {
  const me = await newUser();
  const storage = new MemoryStorage();
  const store = localStorageStore('teamlog.test', storage as unknown as Storage);
  const seen: Array<StoredSession | null> = [];
  const recording: TokenStore = { get: () => store.get(), set: (s) => (seen.push(s), store.set(s)) };
  const first = createClient({ baseUrl: h.server.url, store: recording, autoRefresh: false, headers: { 'x-forwarded-for': randomIp() } });
  await first.login(me.email, me.password);
  await sleep(TTL_S * 1000 + 200);
  await first.profile.get();
  assert.equal(seen.length, 2, 'login, then one refresh');
  assert.notEqual(seen[0]!.refresh_token, seen[1]!.refresh_token, 'rotated');
  assert.equal(JSON.parse(storage.getItem('teamlog.test')!).refresh_token, seen[1]!.refresh_token);
  first.close();

  // A reload: a new client with the same storage is signed in, with no login.
  const second = createClient({ baseUrl: h.server.url, store, headers: { 'x-forwarded-for': randomIp() } });
  assert.equal(await second.isSignedIn(), true);
  await sleep(TTL_S * 1000 + 200);
  assert.equal((await second.profile.get()).id, me.id);
  second.close();
});

test('a session revoked elsewhere (a password change) signs the client out and tells the application', async () => {
  const me = await newUser();
  const store = memoryStore();
  const teamlog = createClient({ baseUrl: h.server.url, store, headers: { 'x-forwarded-for': randomIp() } });
  const told: Array<AuthEvents['signed-out']> = [];
  teamlog.on('signed-out', (e) => void told.push(e));
  await teamlog.login(me.email, me.password);
  const res = await me.client.put('/api/v1/auth/password', { current_password: me.password, new_password: 'another-password-1' }, { token: me.token });
  assert.equal(res.status, 204);
  const err = await teamlog.profile.get().catch((e: unknown) => e);
  assert.equal((err as { code?: string }).code, 'TOKEN_REVOKED');
  assert.deepEqual(told.map((e) => e.reason), ['revoked']);
  assert.equal(await store.get(), null);
  assert.equal(await teamlog.isSignedIn(), false);
  const after = await teamlog.profile.get().catch((e: unknown) => e);
  assert.equal((after as { code?: string }).code, 'UNAUTHENTICATED', 'signed out: nothing is sent with a dead token');
  teamlog.close();
});

test('a refresh token presented twice (stolen) revokes the session: the client that held it is signed out', async () => {
  const me = await newUser();
  const store = memoryStore();
  const teamlog = createClient({ baseUrl: h.server.url, store, autoRefresh: false, headers: { 'x-forwarded-for': randomIp() } });
  const told: string[] = [];
  teamlog.on('signed-out', (e) => void told.push(e.reason));
  await teamlog.login(me.email, me.password);
  const stolen = (await store.get())!.refresh_token;
  const thief = await me.client.post('/api/v1/auth/refresh', { refresh_token: stolen });
  assert.equal(thief.status, 200);
  await sleep(TTL_S * 1000 + 200);
  const err = await teamlog.profile.get().catch((e: unknown) => e);
  assert.equal((err as { code?: string }).code, 'TOKEN_REVOKED');
  assert.deepEqual(told, ['revoked']);
  teamlog.close();
});

test('logout ends the session on the service and here', async () => {
  const me = await newUser();
  const teamlog = createClient({ baseUrl: h.server.url, headers: { 'x-forwarded-for': randomIp() } });
  const told: string[] = [];
  teamlog.on('signed-out', (e) => void told.push(e.reason));
  await teamlog.login(me.email, me.password);
  const token = await teamlog.accessToken();
  await teamlog.logout();
  assert.deepEqual(told, ['logout']);
  assert.equal((await me.client.get('/api/v1/profile', { token })).status, 401);
  assert.equal(await teamlog.isSignedIn(), false);
});

test('a subscribed socket outlives its 3-s access tokens: the client sends reauth before each expires, and is never dropped', async () => {
  const me = await newUser();
  const teamlog = createClient({ baseUrl: h.server.url, headers: { 'x-forwarded-for': randomIp() } });
  const drops: string[] = [];
  const ids: number[] = [];
  teamlog.realtime.on('disconnected', ({ reason }) => void drops.push(reason));
  teamlog.realtime.on('new-message', (m) => void ids.push(m.id));
  await teamlog.login(me.email, me.password);
  await teamlog.realtime.ready();
  await sleep(3 * TTL_S * 1000);
  const sent = await teamlog.messages.create({ text: 'still here' });
  for (let i = 0; i < 100 && !ids.includes(sent.id); i++) await sleep(50);
  assert.deepEqual(ids, [sent.id]);
  assert.deepEqual(drops, [], 'the socket stayed');
  teamlog.close();
});
