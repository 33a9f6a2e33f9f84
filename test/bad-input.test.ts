// Bad input, table-driven over every route the app has (read from app.printRoutes(), with the
// parameters and bodies each route declares read from its OpenAPI description): wrong types,
// unknown fields, 100 kB strings, bad path ids, NUL bytes, huge and empty bodies, arrays and
// strings instead of objects, unknown query parameters. docs/api.md section 2: never a 500, always
// a 4xx problem+json with a code, and nothing in the database changes.
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import type { FastifySchema } from 'fastify';
import { createValidatorCompiler } from '../src/http/validation.js';
import { Client, type Response, type Session } from './helpers/client.js';
import { addMember, createProject, createTask } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { pathOfRoute, servedRoutes, type Route } from './helpers/routes.js';
import { ADMIN_PASSWORD, type TestServer } from './helpers/server.js';

// The general rate limit would only get in the way of a thousand refused requests.
const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0' } });
let victim: Session;
const ids = { project: 0, task: 0, post: 0, notification: 0, audit: 0 };

h.before(async () => {
  victim = await h.newUser();
  const as = (s: Session) => ({ token: s.token });
  ids.project = (await createProject(h.admin, { name: 'Fixture project' })).id;
  await addMember(h.admin, ids.project, victim.id);
  ids.task = (await createTask(h.admin, ids.project, { title: 'Fixture task' })).id;
  const post = await victim.client.post('/api/v1/posts', { content: 'Fixture post' }, as(victim));
  assert.equal(post.status, 201, post.text);
  ids.post = post.body.id;
  assert.equal((await h.admin.client.put(`/api/v1/posts/${ids.post}/like`, undefined, as(h.admin))).status, 200);
  assert.equal((await h.admin.client.post('/api/v1/messages', { text: 'Fixture message' }, as(h.admin))).status, 201);
  // The victim assigns the task to the ADMIN, who is notified (and has an unread notification).
  assert.equal((await victim.client.put(`/api/v1/tasks/${ids.task}/assignee`, { assignee_id: h.admin.id }, as(victim))).status, 200);
  let notification = await h.server.owner.query<{ id: number }>('SELECT id FROM notifications WHERE user_id = $1 ORDER BY id DESC LIMIT 1', [h.admin.id]);
  if (notification.length === 0) {
    notification = await h.server.owner.query<{ id: number }>(
      `INSERT INTO notifications (user_id, kind, payload) VALUES ($1, 'task_assigned', '{}') RETURNING id`,
      [h.admin.id],
    );
  }
  ids.notification = notification[0]!.id;
  ids.audit = (await h.server.owner.query<{ id: number }>('SELECT max(id)::int AS id FROM audit_log'))[0]!.id;
  // The proof routes answer once the fixture's records are sealed and covered by a checkpoint.
  for (let i = 0; i < 400; i++) {
    const [c] = await h.server.owner.query<{ covered: boolean }>('SELECT COALESCE((SELECT max(tree_size) FROM audit_checkpoints), 0) >= (SELECT count(*) FROM audit_log) AS covered');
    if (c!.covered) break;
    await new Promise((r) => setTimeout(r, 50));
  }
});

/** The query a well-formed request of a route needs (its required parameters). */
const BASELINE_QUERY: Record<string, string> = { '/api/v1/audit-logs/proofs/consistency': 'from=1&to=1' };

// ── the routes ───────────────────────────────────────────────────────────────────────────

/** Every route of the app. */
const routesOf = (app: TestServer['app']): Route[] => servedRoutes(app);

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  [k: string]: unknown;
}

interface Operation {
  parameters?: Array<{ in: string; name: string; schema: JsonSchema }>;
  requestBody?: { content?: Record<string, { schema: JsonSchema }> };
}

function operationOf(route: Route): Operation {
  const spec = h.server.app.swagger() as { paths: Record<string, Record<string, Operation>> };
  return spec.paths[pathOfRoute(route.url)]?.[route.method.toLowerCase()] ?? {};
}

const compile = createValidatorCompiler();
const validatorFor = (schema: JsonSchema, httpPart: 'body' | 'querystring') =>
  compile({ schema: schema as FastifySchema, httpPart, method: 'GET', url: '/' }) as (value: unknown) => boolean;

/** A valid id for each path parameter, so that only the input under test is wrong. */
function validParam(route: Route, name: string): number {
  if (name === 'userId') return victim.id;
  const resource = /\/([a-z-]+)\/:id/.exec(route.url)?.[1];
  switch (resource) {
    case 'users': return victim.id;
    case 'projects': return ids.project;
    case 'tasks': return ids.task;
    case 'posts': return ids.post;
    case 'notifications': return ids.notification;
    case 'audit-logs': return ids.audit;
    default: return 1;
  }
}

/** Tile paths tlog-tiles never writes: a bad level, index or width, padding, junk. */
const BAD_TILE_PATHS = ['abc', '0', '0/x000', '0/x001/2', '0/0001', '0/000.p/0', '0/000.p/256', '0/000.p/05', '64/000', '-1/000', '0/000.p', 'entries/x000', 'data/000', '0/%00', `0/${'x999/'.repeat(7)}999`];

/** A valid body for each route that takes one: each case breaks exactly one thing in it. */
function validBody(route: Route): Record<string, unknown> {
  const bodies: Record<string, Record<string, unknown>> = {
    'POST /api/v1/auth/login': { email: victim.email, password: victim.password },
    'POST /api/v1/auth/refresh': { refresh_token: victim.refreshToken },
    'PUT /api/v1/auth/password': { current_password: ADMIN_PASSWORD, new_password: 'another-password-1' },
    'POST /api/v1/users': { email: 'fresh-user@test.local', name: 'Fresh', password: 'password-1234' },
    'PUT /api/v1/users/:id': { name: 'Renamed' },
    'PUT /api/v1/users/:id/role': { role: 'ADMIN' },
    'PUT /api/v1/users/:id/active': { active: false },
    'PUT /api/v1/profile': { name: 'Renamed admin' },
    'POST /api/v1/projects': { name: 'Another project' },
    'PUT /api/v1/projects/:id': { name: 'Renamed project', description: 'changed' },
    'PUT /api/v1/projects/:id/members/:userId': { role: 'OWNER' },
    'POST /api/v1/tasks': { project_id: ids.project, title: 'Another task' },
    'PUT /api/v1/tasks/:id': { title: 'Renamed task' },
    'PUT /api/v1/tasks/:id/assignee': { assignee_id: victim.id },
    'PUT /api/v1/tasks/:id/status': { status: 'IN_PROGRESS' },
    'POST /api/v1/posts': { content: 'Another post' },
    'POST /api/v1/messages': { text: 'Another message' },
  };
  return bodies[`${route.method} ${route.url}`] ?? {};
}

// ── the cases ────────────────────────────────────────────────────────────────────────────

const BAD_IDS = ['abc', '-1', '0', '1e999', '1.5', '99999999999999999999', '9007199254740992', '%00', '1%00', '%20', '1e3', '0x10', '+5', '1.0'];
const WRONG_VALUES: unknown[] = ['not-a-valid-value', 12345, 1.5, -1, 0, true, false, null, {}, [], [1], ''];
const QUERY_VALUES = ['abc', '-1', '0', '1.5', '1e999', '1e1', '+5', '0x10', '99999999999999999999', 'maybe', '\u0000', 'a\u0000b', 'x'.repeat(8000)];
const HUNDRED_KB = 'x'.repeat(100_000);
const TWO_MIB = `{"content":"${'x'.repeat(2 * 1024 * 1024)}"}`;

interface Case {
  name: string;
  params?: Record<string, string>;
  query?: string;
  body?: string;
  contentType?: string;
  status: number;
  code?: string;
}

const takesBody = (route: Route) => ['POST', 'PUT', 'PATCH', 'DELETE'].includes(route.method);

function casesFor(route: Route): Case[] {
  const op = operationOf(route);
  const json = (value: unknown) => JSON.stringify(value);
  const paramNames = [...route.url.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]!);
  const bodySchema = op.requestBody?.content?.['application/json']?.schema;
  const base = bodySchema ? validBody(route) : undefined;
  const baseBody = base === undefined ? undefined : json(base);
  const cases: Case[] = [];

  for (const name of paramNames) {
    for (const bad of BAD_IDS) cases.push({ name: `path ${name}=${bad}`, params: { [name]: bad }, body: baseBody, status: 400, code: 'VALIDATION_FAILED' });
  }
  if (route.url.endsWith('*')) {
    for (const bad of BAD_TILE_PATHS) cases.push({ name: `tile path ${bad}`, params: { '*': bad }, status: 400, code: 'VALIDATION_FAILED' });
  }

  cases.push({ name: 'an unknown query parameter', query: 'unknown_param=1', body: baseBody, status: 400, code: 'VALIDATION_FAILED' });
  cases.push({ name: 'an unknown query parameter holding %00', query: 'unknown_param=%00', body: baseBody, status: 400, code: 'VALIDATION_FAILED' });
  const queryParams = (op.parameters ?? []).filter((p) => p.in === 'query');
  if (queryParams.length > 0) {
    const querySchema: JsonSchema = { type: 'object', properties: Object.fromEntries(queryParams.map((p) => [p.name, p.schema])), additionalProperties: false };
    const validQuery = validatorFor(querySchema, 'querystring');
    for (const p of queryParams) {
      for (const value of QUERY_VALUES) {
        if (validQuery({ [p.name]: value })) continue;
        const shown = value.length > 20 ? `${value.length} characters` : JSON.stringify(value);
        cases.push({ name: `query ${p.name}=${shown}`, query: `${p.name}=${encodeURIComponent(value)}`, body: baseBody, status: 400, code: 'VALIDATION_FAILED' });
      }
    }
  }

  if (!takesBody(route)) return cases;
  if (bodySchema && base) {
    cases.push({ name: 'an unknown body field', body: json({ ...base, unknown_field: 1 }), status: 400, code: 'VALIDATION_FAILED' });
    cases.push({ name: 'a NUL byte in a field name', body: json({ ...base, 'a\u0000': 1 }), status: 400, code: 'VALIDATION_FAILED' });
    for (const [field, schema] of Object.entries(bodySchema.properties ?? {})) {
      const valid = validatorFor(schema, 'body');
      for (const value of WRONG_VALUES) {
        if (valid(value)) continue;
        cases.push({ name: `${field}: ${JSON.stringify(value)}`, body: json({ ...base, [field]: value }), status: 400, code: 'VALIDATION_FAILED' });
      }
      cases.push({ name: `${field}: a 100 kB string`, body: json({ ...base, [field]: HUNDRED_KB }), status: 400, code: 'VALIDATION_FAILED' });
      for (const nul of ['\u0000', 'a\u0000b', `${String(base[field] ?? 'x')}\u0000`]) {
        if (valid(nul)) continue;
        cases.push({ name: `${field}: ${JSON.stringify(nul)}`, body: json({ ...base, [field]: nul }), status: 400, code: 'VALIDATION_FAILED' });
      }
    }
    cases.push({ name: 'an empty body', body: '', status: 400 });
    cases.push({ name: 'JSON null', body: 'null', status: 400, code: 'VALIDATION_FAILED' });
    cases.push({ name: 'a JSON number', body: '42', status: 400, code: 'VALIDATION_FAILED' });
  } else {
    cases.push({ name: 'a body on a route that takes none', body: json({ unknown_field: 1 }), status: 400, code: 'VALIDATION_FAILED' });
    cases.push({ name: 'a NUL byte in a body on a route that takes none', body: json({ text: '\u0000' }), status: 400, code: 'VALIDATION_FAILED' });
  }
  cases.push({ name: 'a JSON array', body: json(base === undefined ? [1] : [base]), status: 400, code: 'VALIDATION_FAILED' });
  cases.push({ name: 'a JSON string', body: json(baseBody ?? 'text'), status: 400, code: 'VALIDATION_FAILED' });
  cases.push({ name: 'malformed JSON', body: (baseBody ?? '{"a":1}').slice(0, -1), status: 400, code: 'MALFORMED_JSON' });
  cases.push({ name: 'a 2 MiB body', body: TWO_MIB, status: 413, code: 'PAYLOAD_TOO_LARGE' });
  cases.push({ name: 'a text/plain body', body: baseBody ?? 'hello', contentType: 'text/plain', status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' });
  return cases;
}

function urlFor(route: Route, c: Case): string {
  const path = route.url
    .replace(/:([A-Za-z_]+)/g, (_, name: string) => c.params?.[name] ?? String(validParam(route, name)))
    // The tlog tiles' wildcard: the fixture's first record's partial tile.
    .replace(/\*$/, () => c.params?.['*'] ?? '0/000.p/1');
  return c.query ? `${path}?${c.query}` : path;
}

async function send(route: Route, c: Case): Promise<Response> {
  const headers: Record<string, string> = {};
  if (c.body !== undefined) headers['content-type'] = c.contentType ?? 'application/json';
  return h.admin.client.request(route.method, urlFor(route, c), { token: h.admin.token, rawBody: c.body, headers });
}

// ── the database must not move ───────────────────────────────────────────────────────────

const SNAPSHOT_TABLES: Array<[string, string]> = [
  ['users', 'id'],
  ['sessions', 'id'],
  ['refresh_tokens', 'token_hash'],
  ['login_failures', 'id'],
  ['projects', 'id'],
  ['project_members', 'project_id, user_id'],
  ['tasks', 'id'],
  ['posts', 'id'],
  ['post_likes', 'post_id, user_id'],
  ['messages', 'id'],
  ['notifications', 'id'],
  ['idempotency_keys', 'scope, method, path, key'],
];

/** Row counts and an md5 of each table's ordered contents; the audit log without login records. */
async function snapshot(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [table, order] of SNAPSHOT_TABLES) {
    // Table and column names come from the list above, never from input.
    const rows = await h.server.owner.query<{ n: number; h: string }>(
      `SELECT count(*)::int AS n, md5(coalesce(string_agg(t::text, '|' ORDER BY ${order}), '')) AS h FROM ${table} t`,
    );
    out[table] = `${rows[0]!.n} ${rows[0]!.h}`;
  }
  const audit = await h.server.owner.query<{ n: number; h: string }>(
    `SELECT count(*)::int AS n, md5(coalesce(string_agg(id::text || action, '|' ORDER BY id), '')) AS h
       FROM audit_log WHERE action NOT IN ('LOGIN_SUCCESS', 'LOGIN_FAILURE')`,
  );
  out.audit_log = `${audit[0]!.n} ${audit[0]!.h}`;
  // The outbox as requests write it, not the /admin events of login records (which the audit
  // line above leaves out too).
  const events = await h.server.owner.query<{ n: number; h: string }>(
    `SELECT count(*)::int AS n, md5(coalesce(string_agg(concat_ws(',', row_id, position, name, room, payload), '|' ORDER BY row_id, position), '')) AS h
       FROM outbox_events WHERE NOT (name = 'audit-record'
         AND (payload->>'id')::bigint IN (SELECT id FROM audit_log WHERE action IN ('LOGIN_SUCCESS', 'LOGIN_FAILURE')))`,
  );
  out.events = `${events[0]!.n} ${events[0]!.h}`;
  return out;
}

function assertRefused(res: Response, c: Case, label: string) {
  assert.ok(res.status < 500, `${label}: got ${res.status} ${res.text.slice(0, 300)}`);
  assert.equal(res.status, c.status, `${label}: ${res.text.slice(0, 300)}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/, `${label}: content-type`);
  assert.equal(typeof res.body?.code, 'string', `${label}: a code`);
  assert.ok(res.body.code.length > 0);
  if (c.code) assert.equal(res.body.code, c.code, `${label}: ${res.text.slice(0, 300)}`);
  else assert.ok(['VALIDATION_FAILED', 'MALFORMED_JSON'].includes(res.body.code), `${label}: ${res.body.code}`);
  assert.equal(res.body.status, res.status);
  assert.equal(res.headers.get('api-version'), '1', `${label}: API-Version`);
  assert.equal(res.body.request_id, res.headers.get('x-request-id'), `${label}: request id`);
}

// ── the tests ────────────────────────────────────────────────────────────────────────────

const isApi = (r: Route) => r.url.startsWith('/api/') && r.method !== 'HEAD';

test('the route list read from the app covers every module', () => {
  const routes = routesOf(h.server.app).filter(isApi).map((r) => `${r.method} ${r.url}`);
  for (const expected of [
    'POST /api/v1/auth/login', 'PUT /api/v1/auth/password', 'GET /api/v1/users', 'DELETE /api/v1/users/:id', 'PUT /api/v1/users/:id/role',
    'GET /api/v1/profile/security-log', 'PUT /api/v1/projects/:id/members/:userId', 'PUT /api/v1/tasks/:id/status', 'DELETE /api/v1/posts/:id/like',
    'POST /api/v1/messages', 'PUT /api/v1/notifications/:id/read', 'GET /api/v1/audit-logs/:id', 'GET /api/v1/openapi.json',
  ]) {
    assert.ok(routes.includes(expected), `${expected} is listed`);
  }
  assert.ok(routes.length >= 30, `${routes.length} routes`);
});

test('every /api route refuses bad input with a 4xx problem+json and changes nothing', async (t) => {
  const routes = routesOf(h.server.app).filter(isApi);
  for (const route of routes) {
    await t.test(`${route.method} ${route.url}`, async () => {
      // Should an earlier route have wrongly acted on its bad input (e.g. logged the ADMIN
      // out), that route has failed already; later routes still get a working session.
      if ((await h.admin.client.get('/api/v1/profile', { token: h.admin.token })).status !== 200) await h.reloginAdmin();
      if (route.method === 'GET') {
        // The well-formed request works, so the refusals below are the bad input's doing.
        const ok = await send(route, { name: 'baseline', status: 200, query: BASELINE_QUERY[route.url] });
        assert.equal(ok.status, 200, `baseline ${route.method} ${urlFor(route, { name: '', status: 200 })}: ${ok.text.slice(0, 200)}`);
      }
      const cases = casesFor(route);
      assert.ok(cases.length > 0);
      const before = await snapshot();
      for (const c of cases) {
        const res = await send(route, c);
        assertRefused(res, c, `${route.method} ${route.url} with ${c.name}`);
      }
      assert.deepEqual(await snapshot(), before, `${route.method} ${route.url}: the database changed`);
    });
  }
});

test('operations routes never answer 5xx to junk', async () => {
  const c = new Client(h.server);
  for (const path of ['/health/live', '/health/ready', '/metrics', '/docs', '/docs/json']) {
    for (const query of ['', '?x=%00', `?x=${'y'.repeat(8000)}`, '?%zz=1']) {
      const res = await c.get(`${path}${query}`);
      assert.ok(res.status < 500, `GET ${path}${query}: ${res.status}`);
    }
    const posted = await c.request('POST', path, { rawBody: '{"a":', headers: { 'content-type': 'application/json' } });
    assert.ok(posted.status >= 400 && posted.status < 500, `POST ${path}: ${posted.status}`);
    assert.match(posted.headers.get('content-type') ?? '', /^application\/problem\+json/);
  }
});

/** Writes raw bytes and returns whatever the server answers before it closes the connection. */
function rawExchange(chunks: string[]): Promise<string> {
  const { hostname, port } = new URL(h.server.url);
  return new Promise((resolve) => {
    let out = '';
    const socket = net.connect(Number(port), hostname, () => {
      for (const chunk of chunks) if (!socket.destroyed) socket.write(chunk);
    });
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (out += d));
    socket.on('close', () => resolve(out));
    // The server may reset the connection while a huge request is still being written.
    socket.on('error', () => {});
  });
}

test('a request with a 100 kB header is refused with 431 or 400, never a 500, and the server keeps serving', async () => {
  const raw = await rawExchange([`GET /api/v1/users HTTP/1.1\r\nHost: x\r\nX-Huge: ${'a'.repeat(100 * 1024)}\r\nConnection: close\r\n\r\n`]);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1]);
  assert.ok(status === 431 || status === 400, `status line: ${raw.slice(0, 60)}`);

  const viaHttp = await new Client(h.server).get(`/api/v1/users?q=${'a'.repeat(100 * 1024)}`, { token: h.admin.token });
  assert.ok(viaHttp.status === 431 || viaHttp.status === 414 || viaHttp.status === 400, `a 100 kB query string: ${viaHttp.status}`);

  const alive = await h.admin.client.get('/api/v1/profile', { token: h.admin.token });
  assert.equal(alive.status, 200);
});

test('a 10 MB header never gets a 5xx and the server keeps serving', async () => {
  const chunk = 'b'.repeat(1024 * 1024);
  const raw = await rawExchange(['GET /api/v1/users HTTP/1.1\r\nHost: x\r\nX-Huge: ', ...Array.from({ length: 10 }, () => chunk), '\r\n\r\n']);
  assert.doesNotMatch(raw, /^HTTP\/1\.1 5\d\d/);
  if (raw) assert.match(raw, /^HTTP\/1\.1 (431|400) /);
  const alive = await h.admin.client.get('/health/live');
  assert.equal(alive.status, 200);
});
