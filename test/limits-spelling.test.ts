// Limits hold whatever the spelling (issue 41, item 4), each tried with the hostile request that
// found the hole: a path that is not in its canonical form (`/%61pi/v1/…`, `/api/v1/./…`) is
// authenticated and counted as the route it reaches, and one the router does not match
// (`//api/v1`, `/API/v1`, a trailing `%2F`) is refused and counted like any unknown /api route;
// 100 bad logins through `/%61pi/v1/auth/login` meet the same limit as through `/api/v1`; a
// Socket.IO handshake counts against its address and its user like a request, and an address
// over the limit has its handshakes refused before their session is looked up; HEAD on the
// audit export (and verification) answers headers only: no export, no record, no scan slot.
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import { Client, auditRows, login, randomIp, type Response, type Session } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { assertRateLimited, limitedCount } from './helpers/limits.js';
import { connect, sleep, type ClientSocket } from './helpers/sockets.js';
import { createClient } from '../client/src/index.js';

const LIMIT = 30;
/** Session lookups of socket handshakes (TestHooks.onHandshakeSessionLookup). */
let lookups = 0;
/** While set, an audit scan that took its slot waits for it (TestHooks.whileScanHolds). */
let scansHeld: Promise<void> | undefined;
const h = useTestServer({
  env: { RATE_LIMIT_PER_MINUTE: String(LIMIT), MAX_CONCURRENT_AUDIT_SCANS: '1' },
  hooks: { onHandshakeSessionLookup: () => void lookups++, whileScanHolds: async () => scansHeld },
});

/** A request whose target goes out byte for byte as written: fetch would resolve its dot segments. */
function asSpelled(client: Client, method: string, target: string, opts: { token?: string; body?: unknown } = {}): Promise<Response> {
  const { hostname, port } = new URL(client.server.url);
  const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  const headers: Record<string, string> = { 'x-forwarded-for': client.ip };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const req = http.request({ host: hostname, port, method, path: target, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const answered = new Headers();
        for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) answered.set(name, Array.isArray(value) ? value.join(', ') : value);
        const parsed: unknown = text && /\bjson\b/.test(answered.get('content-type') ?? '') ? JSON.parse(text) : undefined;
        resolve({ status: res.statusCode ?? 0, headers: answered, body: parsed, text });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Paths that are not in their canonical form but name GET /api/v1/profile once canonical. */
const PROFILE_SPELLINGS = ['/%61pi/v1/profile', '/%61%70%69/v1/%70rofile', '/%61pi/%76%31/profile', '/api/v1/./profile', '/api/v1/tasks/../profile', '/%2e/api/v1/profile', '/api/v1/%2E%2E/v1/profile'];

/** Spellings the router matches to no route: refused as unknown /api routes. */
const UNKNOWN_SPELLINGS = ['//api/v1/profile', '/API/v1/profile', '/Api/V1/auth/login', '/api/v1/profile%2F', '/api%2Fv1/profile', '/%2Fapi/v1/profile'];

/** Sends `n` requests one after the other and answers them. */
async function inTurn(n: number, request: (i: number) => Promise<Response>): Promise<Response[]> {
  const out: Response[] = [];
  for (let i = 0; i < n; i++) out.push(await request(i));
  return out;
}

/** A handshake's connect_error: the contract's message, and its data. */
type HandshakeRefusal = Error & { data?: { code?: string; retry_after?: number } };

/** A handshake that settles either way: the socket, or its connect_error. */
const tryHandshake = (session: Session, headers: Record<string, string>): Promise<{ socket?: ClientSocket; error?: HandshakeRefusal }> =>
  connect(session, { headers }).then(
    (socket) => ({ socket }),
    (error: HandshakeRefusal) => ({ error }),
  );

/** A session whose token the service no longer accepts (logged out). */
async function revokedSession(): Promise<Session> {
  const user = await h.newUser();
  const revoked = await login(h.server, user.email, user.password);
  assert.equal((await revoked.client.post('/api/v1/auth/logout', undefined, { token: revoked.token })).status, 204);
  return revoked;
}

describe('a path counts as the route it reaches, whatever its spelling', () => {
  test('percent-encoded and dot-segment spellings of /api/v1/profile are authenticated and counted on the user\'s one counter', async () => {
    const user = await h.newUser();
    const answers = await inTurn(LIMIT, (i) => asSpelled(user.client, 'GET', PROFILE_SPELLINGS[i % PROFILE_SPELLINGS.length]!, { token: user.token }));
    answers.forEach((res, i) => {
      const spelled = PROFILE_SPELLINGS[i % PROFILE_SPELLINGS.length];
      assert.equal(res.status, 200, `${spelled}: ${res.text}`);
      assert.equal(res.body.id, user.id, spelled);
      assert.equal(res.headers.get('ratelimit-remaining'), String(LIMIT - i - 1), spelled);
    });
    assertRateLimited(await user.client.get('/api/v1/profile', { token: user.token }), LIMIT, 'the canonical path, once the spellings spent the minute');
    for (const spelled of PROFILE_SPELLINGS) assertRateLimited(await asSpelled(user.client, 'GET', spelled, { token: user.token }), LIMIT, spelled);
  });

  test('without a token, an encoded spelling of an /api route is 401 and counts against the address', async () => {
    const stranger = new Client(h.server);
    const answers = await inTurn(LIMIT, (i) => asSpelled(stranger, 'GET', PROFILE_SPELLINGS[i % PROFILE_SPELLINGS.length]!));
    assert.deepEqual([...new Set(answers.map((r) => r.status))], [401]);
    assertRateLimited(await stranger.get('/api/v1/profile'), LIMIT, 'the canonical path from the spent address');
    assertRateLimited(await asSpelled(stranger, 'GET', '/%61pi/v1/version'), LIMIT, 'a public route, spelled');
  });

  test('spellings the router does not match are 404 and count against the address, a valid token or not', async () => {
    const user = await h.newUser();
    const scanner = new Client(h.server);
    const answers = await inTurn(LIMIT, (i) => asSpelled(scanner, 'GET', UNKNOWN_SPELLINGS[i % UNKNOWN_SPELLINGS.length]!, i % 2 === 0 ? { token: user.token } : {}));
    answers.forEach((res, i) => assert.equal(res.status, 404, `${UNKNOWN_SPELLINGS[i % UNKNOWN_SPELLINGS.length]}: ${res.text}`));
    assertRateLimited(await asSpelled(scanner, 'GET', '//api/v1/profile'), LIMIT, 'an unknown spelling past the limit');
    assertRateLimited(await scanner.get('/api/v1/profile', { token: user.token }), LIMIT, 'the canonical path from the spent address');
    // The user spent nothing: their 404s counted against the address.
    assert.equal((await user.client.get('/api/v1/profile', { token: user.token })).status, 200);
  });

  test('100 bad logins through /%61pi/v1/auth/login meet the same limit as through /api/v1/auth/login: no more LOGIN_FAILURE records', async () => {
    const failures: Record<string, number> = {};
    for (const path of ['/api/v1/auth/login', '/%61pi/v1/auth/login']) {
      const attacker = new Client(h.server);
      const email = `nobody-${attacker.ip}@test.local`;
      const answers = await inTurn(100, () => asSpelled(attacker, 'POST', path, { body: { email, password: 'wrong-password-1' } }));
      assert.deepEqual([...new Set(answers.slice(0, 5).map((r) => r.status))], [401], `${path}: the first attempts are checked`);
      answers.slice(LIMIT).forEach((res, i) => assertRateLimited(res, LIMIT, `${path}, attempt ${LIMIT + i + 1}`));
      failures[path] = (await auditRows(h.server, `action = 'LOGIN_FAILURE' AND ip = $1`, [attacker.ip])).length;
    }
    assert.ok(failures['/api/v1/auth/login']! <= LIMIT, JSON.stringify(failures));
    assert.equal(failures['/%61pi/v1/auth/login'], failures['/api/v1/auth/login'], JSON.stringify(failures));
  });
});

describe('a Socket.IO handshake counts like a request', () => {
  test('an address answered 429 over HTTP has its handshakes refused without a session lookup: 100 with a revoked token, and a valid one', async () => {
    const revoked = await revokedSession();
    const valid = await h.newUser();
    const attacker = new Client(h.server);
    const statuses = (await inTurn(LIMIT, () => attacker.get('/api/v1/profile', { token: revoked.token }))).map((r) => r.status);
    assert.deepEqual([...new Set(statuses)], [401]);
    assertRateLimited(await attacker.get('/api/v1/profile', { token: revoked.token }), LIMIT, 'over HTTP');

    const fromAttacker = { 'x-forwarded-for': attacker.ip };
    const [lookupsBefore, limitedBefore] = [lookups, await limitedCount(h.server, 'general')];
    for (let i = 0; i < 100; i++) {
      const { socket, error } = await tryHandshake(revoked, fromAttacker);
      socket?.close();
      assert.equal(error?.message, 'rate_limited', `handshake ${i + 1}`);
      const { code, retry_after: retryAfter = 0 } = error?.data ?? {};
      assert.equal(code, 'RATE_LIMITED');
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `retry_after ${retryAfter}`);
    }
    const { socket, error } = await tryHandshake(valid, fromAttacker);
    socket?.close();
    assert.equal(error?.message, 'rate_limited', 'a valid token from the spent address');
    assert.equal(lookups - lookupsBefore, 0, 'no session was looked up');
    assert.equal((await limitedCount(h.server, 'general')) - limitedBefore, 101);
    // From its own address the valid user connects.
    const own = await connect(valid, { headers: { 'x-forwarded-for': valid.client.ip } });
    own.close();
  });

  test('handshakes with a refused token count against the address: past the limit, refused before the lookup, and over HTTP too', async () => {
    const revoked = await revokedSession();
    const attacker = new Client(h.server);
    const fromAttacker = { 'x-forwarded-for': attacker.ip };
    const lookupsBefore = lookups;
    for (let i = 0; i < LIMIT; i++) {
      const { error } = await tryHandshake(revoked, fromAttacker);
      assert.equal(error?.message, 'unauthorized', `handshake ${i + 1}`);
    }
    assert.equal(lookups - lookupsBefore, LIMIT);
    const past = await tryHandshake(revoked, fromAttacker);
    assert.equal(past.error?.message, 'rate_limited');
    assert.equal(lookups - lookupsBefore, LIMIT, 'the one past the limit was not looked up');
    assertRateLimited(await attacker.get('/api/v1/version'), LIMIT, 'HTTP from the address the handshakes spent');
  });

  test('a handshake counts against its user: handshakes spend the user\'s minute for HTTP, and HTTP spends it for handshakes', async () => {
    const user = await h.newUser();
    const own = { 'x-forwarded-for': user.client.ip };
    for (let i = 0; i < LIMIT; i++) {
      const { socket, error } = await tryHandshake(user, own);
      assert.ok(socket, `handshake ${i + 1}: ${error?.message}`);
      socket.close();
    }
    assertRateLimited(await user.client.get('/api/v1/profile', { token: user.token }), LIMIT, 'HTTP after the handshakes');
    const past = await tryHandshake(user, own);
    assert.equal(past.error?.message, 'rate_limited');
    // Another address of the same user: the count is the user's.
    assert.equal((await tryHandshake(user, { 'x-forwarded-for': new Client(h.server).ip })).error?.message, 'rate_limited');

    const other = await h.newUser();
    await inTurn(LIMIT - 1, () => other.client.get('/api/v1/profile', { token: other.token }));
    const last = await tryHandshake(other, { 'x-forwarded-for': other.client.ip });
    assert.ok(last.socket, `the last request of the minute may be a handshake: ${last.error?.message}`);
    last.socket.close();
    assert.equal((await tryHandshake(other, { 'x-forwarded-for': other.client.ip })).error?.message, 'rate_limited');
  });
});

describe('a socket\'s reauth counts like a request', () => {
  test('each reauth spends its user\'s minute: past it, RATE_LIMITED with retry_after, and HTTP is refused too', async () => {
    const user = await h.newUser();
    const own = { 'x-forwarded-for': user.client.ip };
    const { socket, error } = await tryHandshake(user, own);
    assert.ok(socket, `the handshake: ${error?.message}`);
    try {
      // The handshake was the minute's first request; a reauth with a valid token is each of the others.
      for (let i = 1; i < LIMIT; i++) {
        const ack = (await socket.timeout(5000).emitWithAck('reauth', { token: user.token })) as { ok: boolean; error?: { code: string } };
        assert.equal(ack.ok, true, `reauth ${i}: ${JSON.stringify(ack)}`);
      }
      const past = (await socket.timeout(5000).emitWithAck('reauth', { token: user.token })) as { ok: boolean; error?: { code: string }; retry_after?: number };
      assert.equal(past.ok, false);
      assert.equal(past.error?.code, 'RATE_LIMITED');
      assert.ok(past.retry_after! >= 1 && past.retry_after! <= 60, `retry_after ${past.retry_after}`);
      assert.ok(socket.connected, 'a refused reauth leaves the socket connected');
      assertRateLimited(await user.client.get('/api/v1/profile', { token: user.token }), LIMIT, 'HTTP after the reauths');
    } finally {
      socket.close();
    }
  });

  test('the client library, refused a handshake with retry_after, does not try again before it', async () => {
    const user = await h.newUser();
    const teamlog = createClient({ baseUrl: h.server.url, headers: { 'x-forwarded-for': randomIp() } });
    try {
      await teamlog.login(user.email, user.password);
      await inTurn(LIMIT, () => user.client.get('/api/v1/profile', { token: user.token })); // the user's minute is spent
      const before = await limitedCount(h.server, 'general');
      teamlog.realtime.on('new-message', () => {}); // connects
      for (const until = Date.now() + 5000; (await limitedCount(h.server, 'general')) === before; await sleep(25)) {
        assert.ok(Date.now() < until, 'the client made its handshake');
      }
      // retry_after is most of a minute here; the client's own backoff would have tried 3 or 4 times by now.
      await sleep(1500);
      assert.equal((await limitedCount(h.server, 'general')) - before, 1, 'one handshake, refused, and none since');
    } finally {
      teamlog.close();
    }
  });
});

describe('HEAD on the audit export and verification answers headers only', () => {
  test('no export, no EXPORT_AUDIT_LOG record and no scan slot, spelled or not; a bad query is still 400', async () => {
    const admin = await h.newUser({ role: 'ADMIN' });
    const exports = async () => (await auditRows(h.server, `action = 'EXPORT_AUDIT_LOG' AND actor_id = $1`, [admin.id])).length;
    // The one slot (MAX_CONCURRENT_AUDIT_SCANS=1) held by an export that waits.
    let letGo!: () => void;
    scansHeld = new Promise((resolve) => (letGo = resolve));
    const held = admin.client.get('/api/v1/audit-logs/export', { token: admin.token });
    try {
      for (const until = Date.now() + 5000; ; await new Promise((r) => setTimeout(r, 10))) {
        const running = (await h.server.app.metrics.auditScansRunning.get()).values.find((v) => v.labels.kind === 'export')?.value ?? 0;
        if (running === 1) break;
        assert.ok(Date.now() < until, 'the held export took its slot');
      }
      assertScanRefused(await admin.client.get('/api/v1/audit-logs/verify', { token: admin.token }));

      for (const [path, type] of [
        ['/api/v1/audit-logs/export', /^application\/x-ndjson/],
        ['/api/v1/audit-logs/export?format=csv', /^text\/csv/],
        ['/%61pi/v1/audit-logs/export', /^application\/x-ndjson/],
      ] as const) {
        const res = await asSpelled(admin.client, 'HEAD', path, { token: admin.token });
        assert.equal(res.status, 200, `HEAD ${path}: ${res.status}`);
        assert.match(res.headers.get('content-type') ?? '', type, path);
        assert.match(res.headers.get('content-disposition') ?? '', /^attachment; filename="audit-log\./, path);
        assert.equal(res.text, '');
      }
      const verify = await admin.client.request('HEAD', '/api/v1/audit-logs/verify', { token: admin.token });
      assert.equal(verify.status, 200, 'HEAD verify takes no slot either');
      assert.match(verify.headers.get('content-type') ?? '', /^application\/json/);
      const bad = await admin.client.request('HEAD', `/api/v1/audit-logs/export?q=${encodeURIComponent('nonsense:1')}`, { token: admin.token });
      assert.equal(bad.status, 400, 'a query GET refuses, HEAD refuses too');
      const user = await h.newUser();
      assert.equal((await user.client.request('HEAD', '/api/v1/audit-logs/export', { token: user.token })).status, 403, 'ADMINs only, HEAD too');
    } finally {
      letGo();
      scansHeld = undefined;
    }
    const exported = await held;
    assert.equal(exported.status, 200);
    assert.equal(await exports(), 1, 'the one GET wrote its record; the HEADs wrote none');
  });
});

/** The scan limit's refusal: 429 RATE_LIMITED (not the general limit's, whose headers it lacks). */
function assertScanRefused(res: Response): void {
  assert.equal(res.status, 429, res.text);
  assert.equal(res.body.code, 'RATE_LIMITED');
}
