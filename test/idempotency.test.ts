// Idempotency-Key on POST (docs/api.md section 1), exercised on POST /api/v1/users as an ADMIN.
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { canonicalJson } from '../src/http/idempotency.js';
import { Client, auditRows, type Response, type Session } from './helpers/client.js';
import { countRows } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';

const h = useTestServer();

let n = 0;
function newUserBody() {
  n++;
  return { email: `idem-${n}-${randomUUID().slice(0, 8)}@test.local`, name: `Idem ${n}`, password: 'password-1234' };
}

const post = (as: Session, body: unknown, key?: string, path = '/api/v1/users') =>
  as.client.post(path, body, { token: as.token, headers: key === undefined ? {} : { 'idempotency-key': key } });

const usersWithEmail = (email: string) => countRows(h.server, 'users WHERE email = $1', [email]);

async function createUserRecordsFor(userId: number) {
  return auditRows(h.server, `action = 'CREATE_USER' AND resource_id = $1`, [userId]);
}

function assertSameResponse(replay: Response, first: Response) {
  assert.equal(replay.status, first.status);
  assert.equal(replay.text, first.text);
  assert.equal(replay.headers.get('location'), first.headers.get('location'));
  assert.equal(replay.headers.get('content-type'), first.headers.get('content-type'));
}

test('a retry with the same key and body replays the first response and creates nothing new', async () => {
  const body = newUserBody();
  const key = randomUUID();
  const first = await post(h.admin, body, key);
  assert.equal(first.status, 201);
  assert.equal(first.headers.get('idempotent-replayed'), null, 'the first response is not a replay');
  assert.equal(first.headers.get('location'), `/api/v1/users/${first.body.id}`);

  const retry = await post(h.admin, body, key);
  assertSameResponse(retry, first);
  assert.equal(retry.body.id, first.body.id);
  assert.equal(retry.headers.get('idempotent-replayed'), 'true');
  assert.equal(retry.headers.get('etag'), first.headers.get('etag'));
  assert.notEqual(retry.headers.get('x-request-id'), first.headers.get('x-request-id'), 'a replay is still its own request');

  const third = await post(h.admin, body, key, '/api/users');
  assertSameResponse(third, first);
  assert.equal(third.headers.get('idempotent-replayed'), 'true', 'the unversioned alias is the same path');

  assert.equal(await usersWithEmail(body.email), 1);
  assert.equal((await createUserRecordsFor(first.body.id)).length, 1);
  assert.equal((await auditRows(h.server, `action = 'CREATE_USER' AND request_id = $1`, [retry.headers.get('x-request-id')])).length, 0);
});

test('the same key with another body is 409 IDEMPOTENCY_KEY_REUSED and creates nothing', async () => {
  const key = randomUUID();
  const first = await post(h.admin, newUserBody(), key);
  assert.equal(first.status, 201);
  const other = newUserBody();
  const res = await post(h.admin, other, key);
  assert.equal(res.status, 409);
  assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(res.body.code, 'IDEMPOTENCY_KEY_REUSED');
  assert.equal(res.headers.get('idempotent-replayed'), null);
  assert.equal(await usersWithEmail(other.email), 0);
});

test('the same fields in another order are the same body: the retry is replayed', async () => {
  const body = newUserBody();
  const key = randomUUID();
  const first = await post(h.admin, body, key);
  assert.equal(first.status, 201);
  const reordered = Object.fromEntries(Object.entries(body).reverse());
  assert.notEqual(JSON.stringify(reordered), JSON.stringify(body));
  const retry = await post(h.admin, reordered, key);
  assert.equal(retry.status, 201);
  assert.equal(retry.headers.get('idempotent-replayed'), 'true');
  assert.equal(await usersWithEmail(body.email), 1);
});

test('a claim whose request never finished (the process died) is taken over after 5 minutes', async () => {
  const body = newUserBody();
  const key = randomUUID();
  // A claim as a crashed instance leaves it: no response stored.
  await h.server.owner.query(
    `INSERT INTO idempotency_keys (scope, method, path, key, request_hash, created_at)
     VALUES ($1, 'POST', '/api/v1/users', $2, $3, now() - interval '1 minute')`,
    [`user:${h.admin.id}`, key, createHash('sha256').update(canonicalJson(body)).digest('hex')],
  );
  const stuck = await post(h.admin, body, key);
  assert.equal(stuck.status, 409, 'a recent claim is still treated as running');
  assert.equal(stuck.headers.get('retry-after'), '1');
  await h.server.owner.query(`UPDATE idempotency_keys SET created_at = now() - interval '6 minutes' WHERE key = $1`, [key]);
  const taken = await post(h.admin, body, key);
  assert.equal(taken.status, 201, taken.text);
  assert.equal(await usersWithEmail(body.email), 1);
  const again = await post(h.admin, body, key);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
});

test('the key is scoped per caller: another ADMIN using the same key creates their own user', async () => {
  const second = await h.newUser({ role: 'ADMIN' });
  const key = randomUUID();
  const mine = newUserBody();
  const theirs = newUserBody();
  const a = await post(h.admin, mine, key);
  const b = await post(second, theirs, key);
  assert.equal(a.status, 201);
  assert.equal(b.status, 201);
  assert.equal(b.headers.get('idempotent-replayed'), null);
  assert.notEqual(a.body.id, b.body.id);
  assert.equal(await usersWithEmail(mine.email), 1);
  assert.equal(await usersWithEmail(theirs.email), 1);
  const records = await createUserRecordsFor(b.body.id);
  assert.equal(records.length, 1);
  assert.equal(records[0]!.actor_id, second.id);

  const rows = await h.server.owner.query<{ scope: string }>('SELECT scope FROM idempotency_keys WHERE key = $1 ORDER BY scope', [key]);
  assert.deepEqual(rows.map((r) => r.scope).sort(), [`user:${h.admin.id}`, `user:${second.id}`].sort());
});

test("another caller sending the same key and body runs the request instead of getting the first caller's response", async () => {
  const second = await h.newUser({ role: 'ADMIN' });
  const key = randomUUID();
  const body = newUserBody();
  const first = await post(h.admin, body, key);
  assert.equal(first.status, 201);
  const theirs = await post(second, body, key);
  assert.equal(theirs.status, 409);
  assert.equal(theirs.body.code, 'EMAIL_TAKEN');
  assert.equal(theirs.headers.get('idempotent-replayed'), null);
  assert.equal(await usersWithEmail(body.email), 1);
});

test('a first response of 409 EMAIL_TAKEN is replayed as the same 409', async () => {
  const taken = newUserBody();
  assert.equal((await post(h.admin, taken)).status, 201);
  const key = randomUUID();
  const first = await post(h.admin, { ...taken, name: 'Someone else' }, key);
  assert.equal(first.status, 409);
  assert.equal(first.body.code, 'EMAIL_TAKEN');
  const retry = await post(h.admin, { ...taken, name: 'Someone else' }, key);
  assertSameResponse(retry, first);
  assert.equal(retry.body.code, 'EMAIL_TAKEN');
  assert.equal(retry.headers.get('idempotent-replayed'), 'true');
  assert.equal(await usersWithEmail(taken.email), 1);
});

test('the key and the first response are kept in the idempotency_keys table', async () => {
  const key = `kept-${randomUUID()}`;
  const res = await post(h.admin, newUserBody(), key);
  assert.equal(res.status, 201);
  const rows = await h.server.owner.query<{ scope: string; method: string; path: string; status_code: number; response_body: string; response_headers: Record<string, string> }>(
    'SELECT scope, method, path, status_code, response_body, response_headers FROM idempotency_keys WHERE key = $1',
    [key],
  );
  assert.equal(rows.length, 1);
  const row = rows[0]!;
  assert.equal(row.scope, `user:${h.admin.id}`);
  assert.equal(row.method, 'POST');
  assert.equal(row.path, '/api/v1/users');
  assert.equal(row.status_code, 201);
  assert.equal(row.response_body, res.text);
  assert.equal(row.response_headers.location, res.headers.get('location'));
});

test('a key of more than 255 characters is 400 and nothing is created; 255 is accepted', async () => {
  const body = newUserBody();
  const res = await post(h.admin, body, 'k'.repeat(256));
  assert.equal(res.status, 400);
  assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(res.body.code, 'VALIDATION_FAILED');
  assert.equal(await usersWithEmail(body.email), 0);
  assert.equal((await h.server.owner.query<{ n: number }>(`SELECT count(*)::int AS n FROM idempotency_keys WHERE length(key) > 255`))[0]!.n, 0);

  const longest = `${randomUUID()}`.padEnd(255, 'k');
  const ok = await post(h.admin, body, longest);
  assert.equal(ok.status, 201);
  const replay = await post(h.admin, body, longest);
  assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  assert.equal(await usersWithEmail(body.email), 1);
});

test('an empty key or one with control characters is 400', async () => {
  const body = newUserBody();
  for (const key of ['', 'has space', 'tab\tkey']) {
    const res = await post(h.admin, body, key);
    assert.equal(res.status, 400, `key ${JSON.stringify(key)}`);
    assert.equal(res.body.code, 'VALIDATION_FAILED');
  }
  assert.equal(await usersWithEmail(body.email), 0);
});

test('/auth/* ignores the header: two logins with the same key give two different token pairs', async () => {
  const user = await h.newUser();
  const key = randomUUID();
  const c = new Client(h.server);
  const login = () => c.post('/api/v1/auth/login', { email: user.email, password: user.password }, { headers: { 'idempotency-key': key } });
  const sessionsBefore = (await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM sessions WHERE user_id = $1', [user.id]))[0]!.n;
  const a = await login();
  const b = await login();
  assert.equal(a.status, 200);
  assert.equal(b.status, 200);
  assert.equal(b.headers.get('idempotent-replayed'), null);
  assert.notEqual(a.body.access_token, b.body.access_token);
  assert.notEqual(a.body.refresh_token, b.body.refresh_token);
  const sessionsAfter = (await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM sessions WHERE user_id = $1', [user.id]))[0]!.n;
  assert.equal(sessionsAfter, sessionsBefore + 2);
  assert.equal((await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM idempotency_keys WHERE key = $1', [key]))[0]!.n, 0);
  // Both refresh tokens work, each once: nothing was replayed.
  const ra = await c.post('/api/v1/auth/refresh', { refresh_token: a.body.refresh_token }, { headers: { 'idempotency-key': key } });
  const rb = await c.post('/api/v1/auth/refresh', { refresh_token: b.body.refresh_token }, { headers: { 'idempotency-key': key } });
  assert.equal(ra.status, 200);
  assert.equal(rb.status, 200);
  assert.notEqual(ra.body.access_token, rb.body.access_token);
});

test('a POST without a key is not deduplicated', async () => {
  const body = newUserBody();
  const a = await post(h.admin, body);
  const b = await post(h.admin, body);
  assert.equal(a.status, 201);
  assert.equal(b.status, 409);
  assert.equal(b.body.code, 'EMAIL_TAKEN');
  assert.equal(b.headers.get('idempotent-replayed'), null);
});

test('two concurrent identical requests with one key create one user: one 201, the other the same 201 or 409 with Retry-After: 1', { skip: needsPostgres }, async () => {
  for (let round = 0; round < 5; round++) {
    const body = newUserBody();
    const key = randomUUID();
    const responses = await Promise.all([post(h.admin, body, key), post(h.admin, body, key), post(h.admin, body, key)]);
    const created = responses.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
    assert.equal(created.length, 1, `round ${round}: exactly one original 201 (${responses.map((r) => r.status).join(', ')})`);
    const original = created[0]!;
    for (const res of responses) {
      if (res === original) continue;
      if (res.status === 201) {
        assert.equal(res.headers.get('idempotent-replayed'), 'true');
        assertSameResponse(res, original);
      } else {
        assert.equal(res.status, 409, `round ${round}: ${res.text}`);
        assert.equal(res.headers.get('retry-after'), '1');
        assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
        assert.notEqual(res.body.code, 'IDEMPOTENCY_KEY_REUSED');
        assert.notEqual(res.body.code, 'EMAIL_TAKEN');
      }
    }
    assert.equal(await usersWithEmail(body.email), 1);
    assert.equal((await createUserRecordsFor(original.body.id)).length, 1);
  }
});
