// HTTP conventions of docs/api.md sections 1 and 2: the unversioned alias, API-Version and
// X-Request-Id on every response, problem+json for every error, Cache-Control, ETag/304,
// If-Match/412 and cursor pagination.
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, test } from 'node:test';
import { Client, assertProblem, auditRows, type Response } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD } from './helpers/server.js';

const h = useTestServer();

const PROBLEM_FIELDS = ['type', 'title', 'status', 'detail', 'code', 'instance', 'request_id'] as const;

/** Asserts an RFC 9457 problem document with the given status and code, and returns its body. */
/** The shared problem check, plus every member of the document, its cache policy and instance. */
function assertProblemBody(res: Response, status: number, code: string, instance?: string) {
  assertProblem(res, status, code);
  for (const field of PROBLEM_FIELDS) assert.ok(field in res.body, `problem body lacks ${field}: ${res.text}`);
  assert.equal(typeof res.body.type, 'string');
  assert.equal(typeof res.body.title, 'string');
  assert.equal(res.headers.get('cache-control'), 'no-store');
  if (instance !== undefined) assert.equal(res.body.instance, instance);
  return res.body;
}

function assertStandardHeaders(res: Response, label: string) {
  assert.equal(res.headers.get('api-version'), '1', `${label}: API-Version`);
  const id = res.headers.get('x-request-id');
  assert.ok(id && id.length > 0, `${label}: X-Request-Id`);
}

/** Sends raw bytes over a socket (for requests fetch refuses to send) and returns the raw response. */
function rawRequest(request: string): Promise<string> {
  const { hostname, port } = new URL(h.server.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(request));
    let out = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (out += chunk));
    socket.on('close', () => resolve(out));
    socket.on('error', (err) => (out ? resolve(out) : reject(err)));
  });
}

describe('the unversioned alias', () => {
  test('serves GET and DELETE /api/users/:id as /api/v1/users/:id', async () => {
    const victim = await h.newUser();
    const got = await h.admin.client.get(`/api/users/${victim.id}`, { token: h.admin.token });
    assert.equal(got.status, 200);
    assert.equal(got.body.id, victim.id);
    assert.equal(got.body.email, victim.email);

    const deleted = await h.admin.client.delete(`/api/users/${victim.id}`, { token: h.admin.token });
    assert.equal(deleted.status, 204);
    assert.equal((await h.admin.client.get(`/api/v1/users/${victim.id}`, { token: h.admin.token })).status, 404);
    const records = await auditRows(h.server, `action = 'DELETE_USER' AND resource_id = $1`, [victim.id]);
    assert.equal(records.length, 1);
  });

  test('reports problems under the canonical path and leaves /api/v1 itself alone', async () => {
    const res = await h.admin.client.get('/api/no-such-thing', { token: h.admin.token });
    assertProblemBody(res, 404, 'NOT_FOUND', '/api/v1/no-such-thing');
    const root = await h.admin.client.get('/api/v1', { token: h.admin.token });
    assertProblemBody(root, 404, 'NOT_FOUND', '/api/v1');
  });
});

describe('API-Version and X-Request-Id', () => {
  test('are on every kind of response: success, 201, 204, 304, errors, 404, 405, 413, 415, health, OpenAPI', async () => {
    const c = h.admin.client;
    const victim = await h.newUser();
    const list = await c.get('/api/v1/users', { token: h.admin.token });
    const responses: Array<[string, Response]> = [
      ['GET 200', list],
      ['304', await c.get('/api/v1/users', { token: h.admin.token, headers: { 'if-none-match': list.headers.get('etag')! } })],
      ['POST 201', await c.post('/api/v1/posts', { content: 'headers' }, { token: h.admin.token })],
      ['DELETE 204', await c.delete(`/api/v1/users/${victim.id}`, { token: h.admin.token })],
      ['401', await c.get('/api/v1/users')],
      ['400', await c.get('/api/v1/users?limit=0', { token: h.admin.token })],
      ['404', await c.get('/api/v1/nothing-here')],
      ['404 outside /api', await c.get('/nothing-here')],
      ['405', await c.request('PATCH', '/api/v1/users', { token: h.admin.token })],
      ['413', await c.request('POST', '/api/v1/posts', { token: h.admin.token, rawBody: `{"content":"${'x'.repeat(1024 * 1024)}"}`, headers: { 'content-type': 'application/json' } })],
      ['415', await c.request('POST', '/api/v1/posts', { token: h.admin.token, rawBody: 'hello', headers: { 'content-type': 'text/plain' } })],
      ['health live', await c.get('/health/live')],
      ['health ready', await c.get('/health/ready')],
      ['openapi', await c.get('/api/v1/openapi.json')],
    ];
    assert.equal(responses[1]![1].status, 304);
    for (const [label, res] of responses) assertStandardHeaders(res, label);
  });

  test('echoes a sane incoming X-Request-Id and uses it as request_id in problem bodies and audit records', async () => {
    const c = new Client(h.server);
    const id = `req-${Date.now()}.abc:1@x_Y`;
    const missing = await c.get('/api/v1/nowhere', { headers: { 'x-request-id': id } });
    assert.equal(missing.headers.get('x-request-id'), id);
    assertProblemBody(missing, 404, 'NOT_FOUND');
    assert.equal(missing.body.request_id, id);

    const longest = 'a'.repeat(128);
    assert.equal((await c.get('/health/live', { headers: { 'x-request-id': longest } })).headers.get('x-request-id'), longest);

    const loginId = `login-${Date.now()}`;
    const res = await c.post('/api/v1/auth/login', { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, { headers: { 'x-request-id': loginId } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-request-id'), loginId);
    const records = await auditRows(h.server, `action = 'LOGIN_SUCCESS' AND request_id = $1`, [loginId]);
    assert.equal(records.length, 1);
  });

  test('replaces an insane X-Request-Id (too long, spaces, a tab, odd characters) with a generated one', async () => {
    const c = new Client(h.server);
    const insane = ['a'.repeat(129), 'has spaces', 'tab\there', 'semi;colon', 'quote"d', '<script>', 'é-accent'];
    const seen = new Set<string>();
    for (const given of insane) {
      const res = await c.get('/api/v1/nowhere', { headers: { 'x-request-id': given } });
      const id = res.headers.get('x-request-id')!;
      assert.notEqual(id, given);
      assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, `generated id for ${JSON.stringify(given)}`);
      assert.equal(res.body.request_id, id);
      seen.add(id);
    }
    assert.equal(seen.size, insane.length, 'each request gets its own generated id');
  });

  test('refuses a request id carrying control characters at the HTTP parser with a 400, never a 500, and keeps serving', async () => {
    const raw = await rawRequest(`GET /api/v1/users HTTP/1.1\r\nHost: x\r\nX-Request-Id: ab\x01cd\r\nConnection: close\r\n\r\n`);
    assert.match(raw, /^HTTP\/1\.1 400 /);
    const after = await new Client(h.server).get('/health/live');
    assert.equal(after.status, 200);
  });

  test(
    'answers a request the HTTP parser refuses with problem+json, API-Version and a request id',
    async () => {
      const raw = await rawRequest(`GET /api/v1/users HTTP/1.1\r\nHost: x\r\nX-Request-Id: ab\x01cd\r\nConnection: close\r\n\r\n`);
      const [head = '', body = ''] = raw.split('\r\n\r\n');
      assert.match(head, /^HTTP\/1\.1 400 /);
      assert.match(head, /\r\ncontent-type: application\/problem\+json/i);
      assert.match(head, /\r\napi-version: 1\r\n/i);
      const id = /\r\nx-request-id: ([^\r]+)/i.exec(head)?.[1];
      assert.ok(id);
      const problem = JSON.parse(body);
      assert.equal(problem.status, 400);
      assert.equal(problem.code, 'VALIDATION_FAILED');
      assert.equal(problem.request_id, id);
    },
  );
});

describe('problem+json for every error', () => {
  test('an unknown route is 404 NOT_FOUND', async () => {
    const res = await new Client(h.server).get('/api/v1/unknown/route?x=1');
    const body = assertProblemBody(res, 404, 'NOT_FOUND', '/api/v1/unknown/route');
    assert.equal(body.title, 'Not found');
    assert.equal(body.type, '/problems/not-found');
  });

  test('a wrong method on a known path is 405 METHOD_NOT_ALLOWED with an Allow header', async () => {
    const res = await h.admin.client.request('PATCH', `/api/v1/users/${h.admin.id}`, { token: h.admin.token, body: { name: 'x' } });
    assertProblemBody(res, 405, 'METHOD_NOT_ALLOWED', `/api/v1/users/${h.admin.id}`);
    const allow = (res.headers.get('allow') ?? '').split(',').map((m) => m.trim());
    for (const m of ['GET', 'PUT', 'DELETE']) assert.ok(allow.includes(m), `Allow lists ${m}: ${allow.join(', ')}`);
    assert.ok(!allow.includes('PATCH'));

    const onCollection = await h.admin.client.request('DELETE', '/api/v1/posts', { token: h.admin.token });
    assertProblemBody(onCollection, 405, 'METHOD_NOT_ALLOWED');
    assert.deepEqual((onCollection.headers.get('allow') ?? '').split(', ').filter((m) => m !== 'HEAD').sort(), ['GET', 'POST']);
  });

  test('Accept: text/html on an /api route is 406 NOT_ACCEPTABLE, before authentication', async () => {
    const res = await new Client(h.server).get('/api/v1/users', { headers: { accept: 'text/html' } });
    assertProblemBody(res, 406, 'NOT_ACCEPTABLE', '/api/v1/users');
    const json = await h.admin.client.get('/api/v1/users', { token: h.admin.token, headers: { accept: 'text/html, application/json;q=0.5' } });
    assert.equal(json.status, 200);
    const refused = await h.admin.client.get('/api/v1/users', { token: h.admin.token, headers: { accept: 'application/json;q=0, text/html' } });
    assertProblemBody(refused, 406, 'NOT_ACCEPTABLE');
  });

  test('a text/plain body on a POST is 415 UNSUPPORTED_MEDIA_TYPE and creates nothing', async () => {
    const before = await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM posts');
    const res = await h.admin.client.request('POST', '/api/v1/posts', {
      token: h.admin.token,
      rawBody: JSON.stringify({ content: 'looks like JSON' }),
      headers: { 'content-type': 'text/plain' },
    });
    assertProblemBody(res, 415, 'UNSUPPORTED_MEDIA_TYPE', '/api/v1/posts');
    const form = await h.admin.client.request('POST', '/api/v1/posts', {
      token: h.admin.token,
      rawBody: 'content=hi',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assertProblemBody(form, 415, 'UNSUPPORTED_MEDIA_TYPE');
    const after = await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM posts');
    assert.equal(after[0]!.n, before[0]!.n);
  });

  test('a body over 1 MiB is 413 PAYLOAD_TOO_LARGE', async () => {
    const res = await h.admin.client.request('POST', '/api/v1/posts', {
      token: h.admin.token,
      rawBody: JSON.stringify({ content: 'x'.repeat(1024 * 1024) }),
      headers: { 'content-type': 'application/json' },
    });
    assertProblemBody(res, 413, 'PAYLOAD_TOO_LARGE', '/api/v1/posts');
  });

  test('malformed JSON is 400 MALFORMED_JSON', async () => {
    for (const raw of ['{"content": "x"', "{'content': 'x'}", '{"content": "x",}', 'nul']) {
      const res = await h.admin.client.request('POST', '/api/v1/posts', { token: h.admin.token, rawBody: raw, headers: { 'content-type': 'application/json' } });
      const body = assertProblemBody(res, 400, 'MALFORMED_JSON', '/api/v1/posts');
      assert.equal(body.type, '/problems/malformed-json');
    }
  });

  test('validation errors are 400 VALIDATION_FAILED with errors[] of {field, message}', async () => {
    const res = await h.admin.client.post('/api/v1/users', { email: 'valid@x.test', name: 'n'.repeat(101), password: 'password-1234' }, { token: h.admin.token });
    const body = assertProblemBody(res, 400, 'VALIDATION_FAILED', '/api/v1/users');
    assert.equal(body.type, '/problems/validation');
    assert.ok(Array.isArray(body.errors) && body.errors.length >= 1);
    assert.deepEqual({ field: body.errors[0].field, message: body.errors[0].message }, { field: '/name', message: 'must have at most 100 characters' });
    assert.match(body.detail, /name must have at most 100 characters/);

    const unknown = await h.admin.client.post('/api/v1/posts', { content: 'x', author_id: 1 }, { token: h.admin.token });
    const u = assertProblemBody(unknown, 400, 'VALIDATION_FAILED');
    assert.equal(u.errors[0].field, '/author_id');
    assert.equal(u.errors[0].message, 'is not allowed');

    const missing = await h.admin.client.post('/api/v1/posts', {}, { token: h.admin.token });
    const m = assertProblemBody(missing, 400, 'VALIDATION_FAILED');
    assert.deepEqual({ field: m.errors[0].field, message: m.errors[0].message }, { field: '/content', message: 'is required' });

    const query = await h.admin.client.get('/api/v1/users?limit=abc', { token: h.admin.token });
    const q = assertProblemBody(query, 400, 'VALIDATION_FAILED');
    assert.equal(q.errors[0].field, '/limit');
    assert.equal(typeof q.errors[0].message, 'string');
  });

  test('unknown query parameters are 400 even on routes that declare none', async () => {
    const res = await h.admin.client.get('/api/v1/profile?verbose=1', { token: h.admin.token });
    const body = assertProblemBody(res, 400, 'VALIDATION_FAILED');
    assert.equal(body.errors[0].field, '/verbose');
    const listed = await h.admin.client.get('/api/v1/users?sort=name', { token: h.admin.token });
    assert.equal(assertProblemBody(listed, 400, 'VALIDATION_FAILED').errors[0].field, '/sort');
  });

  test('a body on a route that takes none is 400 and the route does nothing', async () => {
    const victim = await h.newUser();
    const res = await h.admin.client.request('DELETE', `/api/v1/users/${victim.id}`, { token: h.admin.token, body: { reason: 'spam' } });
    const body = assertProblemBody(res, 400, 'VALIDATION_FAILED');
    assert.equal(body.errors[0].field, '/reason');
    assert.equal((await h.admin.client.get(`/api/v1/users/${victim.id}`, { token: h.admin.token })).status, 200);
    // An empty object or no body at all is fine.
    assert.equal((await h.admin.client.request('DELETE', `/api/v1/users/${victim.id}`, { token: h.admin.token, body: {} })).status, 204);
  });

  test(
    'a malformed percent-encoding in the path is 400 problem+json with API-Version and X-Request-Id',
    async () => {
      const res = await h.admin.client.get('/api/v1/users/%zz', { token: h.admin.token, headers: { 'x-request-id': 'bad-url-1' } });
      assertProblemBody(res, 400, 'VALIDATION_FAILED');
      assertStandardHeaders(res, 'bad url');
      assert.equal(res.body.request_id, 'bad-url-1');
      const long = await h.admin.client.get(`/api/v1/users/${'9'.repeat(150)}`, { token: h.admin.token });
      assertProblemBody(long, 400, 'VALIDATION_FAILED');
    },
  );
});

describe('Cache-Control', () => {
  test('authenticated GETs are private, no-cache', async () => {
    for (const path of ['/api/v1/users', `/api/v1/users/${h.admin.id}`, '/api/v1/profile', '/api/v1/posts', '/api/users']) {
      const res = await h.admin.client.get(path, { token: h.admin.token });
      assert.equal(res.status, 200, path);
      assert.equal(res.headers.get('cache-control'), 'private, no-cache', path);
    }
  });

  test('mutations and /auth/* are no-store', async () => {
    const c = h.admin.client;
    const created = await c.post('/api/v1/posts', { content: 'cache' }, { token: h.admin.token });
    assert.equal(created.status, 201);
    const liked = await c.put(`/api/v1/posts/${created.body.id}/like`, undefined, { token: h.admin.token });
    assert.equal(liked.status, 200);
    const deleted = await c.delete(`/api/v1/posts/${created.body.id}`, { token: h.admin.token });
    assert.equal(deleted.status, 204);
    const login = await new Client(h.server).post('/api/v1/auth/login', { email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
    assert.equal(login.status, 200);
    const refresh = await new Client(h.server).post('/api/v1/auth/refresh', { refresh_token: login.body.refresh_token });
    assert.equal(refresh.status, 200);
    for (const [label, res] of [['POST', created], ['PUT', liked], ['DELETE', deleted], ['login', login], ['refresh', refresh]] as const) {
      assert.equal(res.headers.get('cache-control'), 'no-store', label);
    }
  });

  test('errors are no-store, and the OpenAPI document is public, max-age=300', async () => {
    const c = new Client(h.server);
    for (const res of [await c.get('/api/v1/users'), await c.get('/api/v1/nope'), await c.get(`/api/v1/users/abc`, { token: h.admin.token })]) {
      assert.ok(res.status >= 400);
      assert.equal(res.headers.get('cache-control'), 'no-store');
    }
    const doc = await c.get('/api/v1/openapi.json');
    assert.equal(doc.status, 200);
    assert.equal(doc.headers.get('cache-control'), 'public, max-age=300');
    assert.equal(doc.body.openapi, '3.1.0');
    assert.equal((await c.get('/api/openapi.json')).headers.get('cache-control'), 'public, max-age=300');
  });
});

describe('ETag and If-None-Match', () => {
  test('an authenticated GET carries an ETag and a matching If-None-Match gets 304 with an empty body', async () => {
    const user = await h.newUser();
    const first = await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token });
    const etag = first.headers.get('etag');
    assert.ok(etag, 'ETag present');
    assert.match(etag, /^"[^"]+"$/, 'a strong ETag');
    const again = await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token, headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    assert.equal(again.text, '');
    assert.equal(again.headers.get('etag'), etag);
    const other = await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token, headers: { 'if-none-match': '"something-else"' } });
    assert.equal(other.status, 200);
    assert.equal(other.body.id, user.id);
  });

  test("a list's ETag changes when the list changes", async () => {
    const first = await h.admin.client.get('/api/v1/posts', { token: h.admin.token });
    const etag = first.headers.get('etag');
    assert.ok(etag);
    const unchanged = await h.admin.client.get('/api/v1/posts', { token: h.admin.token, headers: { 'if-none-match': etag } });
    assert.equal(unchanged.status, 304);
    assert.equal(unchanged.text, '');

    const post = await h.admin.client.post('/api/v1/posts', { content: 'a new post changes the feed' }, { token: h.admin.token });
    assert.equal(post.status, 201);
    const changed = await h.admin.client.get('/api/v1/posts', { token: h.admin.token, headers: { 'if-none-match': etag } });
    assert.equal(changed.status, 200);
    assert.notEqual(changed.headers.get('etag'), etag);
    assert.equal(changed.body.data[0].id, post.body.id);
  });

  test("a single user's ETag changes when the user changes", async () => {
    const user = await h.newUser();
    const before = (await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token })).headers.get('etag');
    const put = await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Renamed for ETag' }, { token: h.admin.token });
    assert.equal(put.status, 200);
    const after = await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token, headers: { 'if-none-match': before! } });
    assert.equal(after.status, 200);
    assert.notEqual(after.headers.get('etag'), before);
    assert.equal(after.body.name, 'Renamed for ETag');
    assert.equal(put.headers.get('etag'), after.headers.get('etag'), "the PUT's ETag is the new version's");
  });
});

describe('If-Match on PUT /api/v1/users/:id', () => {
  const userRow = async (id: number) =>
    (await h.server.owner.query<{ name: string; version: number }>('SELECT name, version FROM users WHERE id = $1', [id]))[0]!;

  test('a stale If-Match is 412 PRECONDITION_FAILED and changes nothing', async () => {
    const user = await h.newUser();
    const stale = (await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token })).headers.get('etag')!;
    assert.equal((await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'First writer' }, { token: h.admin.token })).status, 200);
    const before = await userRow(user.id);
    const auditBefore = (await auditRows(h.server, 'resource_id = $1', [user.id])).length;

    const res = await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Lost update', email: `lost-${user.email}` }, { token: h.admin.token, headers: { 'if-match': stale } });
    assertProblemBody(res, 412, 'PRECONDITION_FAILED', `/api/v1/users/${user.id}`);
    assert.deepEqual(await userRow(user.id), before);
    assert.equal((await auditRows(h.server, 'resource_id = $1', [user.id])).length, auditBefore);
    const weak = await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Weak' }, { token: h.admin.token, headers: { 'if-match': `W/${stale}` } });
    assert.equal(weak.status, 412);
  });

  test('If-Match: * is allowed', async () => {
    const user = await h.newUser();
    const res = await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Star' }, { token: h.admin.token, headers: { 'if-match': '*' } });
    assert.equal(res.status, 200);
    assert.equal((await userRow(user.id)).name, 'Star');
  });

  test('the current ETag is accepted and the response carries the next one', async () => {
    const user = await h.newUser();
    const current = (await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token })).headers.get('etag')!;
    const res = await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Current' }, { token: h.admin.token, headers: { 'if-match': current } });
    assert.equal(res.status, 200);
    assert.equal(res.body.name, 'Current');
    const next = res.headers.get('etag')!;
    assert.notEqual(next, current);
    const again = await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Again' }, { token: h.admin.token, headers: { 'if-match': next } });
    assert.equal(again.status, 200);
    const stale = await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Stale' }, { token: h.admin.token, headers: { 'if-match': current } });
    assert.equal(stale.status, 412);
    assert.equal((await userRow(user.id)).name, 'Again');
  });
});

describe('cursor pagination on GET /api/v1/users', () => {
  h.before(async () => {
    // Enough users for several pages; made in SQL because only the list is under test.
    await h.server.owner.query(
      `INSERT INTO users (email, name, password_hash)
       SELECT 'page-' || g || '@test.local', 'Page ' || g, 'not-a-hash' FROM generate_series(1, 45) AS g`,
    );
  });

  test('limit must be within 1..100', async () => {
    for (const limit of ['0', '101', '-1', '1.5', 'ten']) {
      const res = await h.admin.client.get(`/api/v1/users?limit=${limit}`, { token: h.admin.token });
      assert.equal(assertProblemBody(res, 400, 'VALIDATION_FAILED').errors[0].field, '/limit', `limit=${limit}`);
    }
    assert.equal((await h.admin.client.get('/api/v1/users?limit=1', { token: h.admin.token })).body.data.length, 1);
    assert.equal((await h.admin.client.get('/api/v1/users?limit=100', { token: h.admin.token })).status, 200);
  });

  test('the default page size is 20, newest first, with a next_cursor and a Link header', async () => {
    const res = await h.admin.client.get('/api/v1/users', { token: h.admin.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.data.length, 20);
    const ids = res.body.data.map((u: { id: number }) => u.id);
    assert.deepEqual(ids, [...ids].sort((a, b) => b - a));
    assert.equal(typeof res.body.next_cursor, 'string');
    const link = res.headers.get('link');
    assert.ok(link, 'Link header');
    assert.match(link, /^<\/api\/v1\/users\?[^>]*cursor=[^>]+>; rel="next"$/);
  });

  test('following the pages visits every user once; the last page has next_cursor null and no Link header', async () => {
    const total = (await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM users'))[0]!.n;
    const seen: number[] = [];
    let path: string | null = '/api/v1/users?limit=7';
    let last: Response | undefined;
    while (path) {
      last = await h.admin.client.get(path, { token: h.admin.token });
      assert.equal(last.status, 200);
      seen.push(...last.body.data.map((u: { id: number }) => u.id));
      const link = last.headers.get('link');
      if (last.body.next_cursor === null) {
        assert.equal(link, null, 'no Link header on the last page');
        path = null;
      } else {
        const next = /^<([^>]+)>; rel="next"$/.exec(link ?? '');
        assert.ok(next, `Link header while next_cursor is set: ${link}`);
        assert.ok(next[1]!.includes(`cursor=${encodeURIComponent(last.body.next_cursor)}`) || next[1]!.includes(`cursor=${last.body.next_cursor}`));
        assert.ok(next[1]!.includes('limit=7'), 'the Link keeps the page size');
        path = next[1]!;
      }
      assert.ok(seen.length <= total, 'pagination terminates');
    }
    assert.equal(seen.length, total);
    assert.equal(new Set(seen).size, total);
    assert.deepEqual(seen, [...seen].sort((a, b) => b - a));
    assert.equal(last!.body.next_cursor, null);
  });

  test('a cursor the API did not issue is 400', async () => {
    const res = await h.admin.client.get('/api/v1/users?cursor=bm90LWEtY3Vyc29y', { token: h.admin.token });
    assertProblemBody(res, 400, 'VALIDATION_FAILED');
  });
});
