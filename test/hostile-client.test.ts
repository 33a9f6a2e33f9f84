// What a hostile client found (issue: "correct by construction", item 5), each tried again
// here against a real server: deep JSON, untrue validation messages, a burst of logins, a
// unique value raced, a timing oracle, a log anyone could fill, a throttled password change,
// parallel logouts, a trailing slash and a compressed body.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import { MAX_JSON_DEPTH } from '../src/http/json-body.js';
import { MAX_PER_ADDRESS, MAX_PER_EMAIL } from '../src/modules/auth/auth.throttle.js';
import { assertProblem, auditRows, Client, type Response } from './helpers/client.js';
import { createProject, createTask } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { spawnServer } from './helpers/process.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, migratedDataDir, needsPostgres } from './helpers/server.js';

const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0' } });

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;


describe('deep JSON is a 400 at the parser, on every route', () => {
  test('thousands of levels with an Idempotency-Key: 400, not a stack overflow (500)', async () => {
    const { admin } = h;
    for (const depth of [MAX_JSON_DEPTH + 1, 5000, 100_000]) {
      const res = await admin.client.request('POST', '/api/v1/tasks', {
        token: admin.token,
        rawBody: `{"project_id":1,"title":"x","description":${nested(depth)}}`,
        headers: { 'content-type': 'application/json', 'idempotency-key': `deep-${depth}` },
      });
      assertProblem(res, 400, 'VALIDATION_FAILED');
      assert.equal(res.body.detail, `The body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`);
    }
  });

  test('routes without a body, PUTs and public routes answer the same way', async () => {
    const { admin } = h;
    const body = `{"a":${nested(10_000)}}`;
    for (const [method, url, token] of [
      ['POST', '/api/v1/auth/logout', admin.token],
      ['PUT', '/api/v1/profile', admin.token],
      ['POST', '/api/v1/auth/login', undefined],
    ] as const) {
      const res = await admin.client.request(method, url, { token, rawBody: body, headers: { 'content-type': 'application/json' } });
      assertProblem(res, 400, 'VALIDATION_FAILED');
    }
  });

  test('nesting up to the bound, and brackets inside strings, pass the parser to the route\'s own validation', async () => {
    const { admin } = h;
    const project = await createProject(admin);
    const deepest = await admin.client.request('POST', '/api/v1/tasks', {
      token: admin.token,
      rawBody: `{"project_id":${project.id},"title":"x","extra":${nested(MAX_JSON_DEPTH - 1)}}`,
      headers: { 'content-type': 'application/json' },
    });
    assertProblem(deepest, 400, 'VALIDATION_FAILED');
    assert.equal(deepest.body.detail, 'extra is not allowed', 'judged by the schema, not by the depth bound');
    const title = `[${'['.repeat(200)} {"quoted \\" bracket": ${']'.repeat(200)}`;
    const created = await admin.client.post('/api/v1/tasks', { project_id: project.id, title: title.slice(0, 200) }, { token: admin.token });
    assert.equal(created.status, 201, created.text);
  });
});

describe('validation messages say what is actually wrong', () => {
  test('each kind of bad value gets a message that is true of it', async () => {
    const { admin } = h;
    const project = await createProject(admin);
    const task = await createTask(admin, project.id);
    const cases: Array<[Promise<Response>, string]> = [
      [admin.client.post('/api/v1/tasks', { project_id: project.id, title: '   ' }, { token: admin.token }), 'title must not be blank'],
      [admin.client.post('/api/v1/tasks', { project_id: project.id, title: 'a\u0000b' }, { token: admin.token }), 'title must not contain NUL characters'],
      [admin.client.post('/api/v1/tasks', { project_id: project.id, title: 'ok', description: 'a\u0000b' }, { token: admin.token }), 'description must not contain NUL characters'],
      [admin.client.post('/api/v1/users', { email: 'not-an-email', name: 'N', password: 'a-long-password' }, { token: admin.token }), 'email must be an email address'],
      [admin.client.get('/api/v1/tasks?cursor=***', { token: admin.token }), 'query parameter cursor is not a cursor this API issued'],
      [admin.client.get('/api/v1/messages?room=lobby', { token: admin.token }), 'query parameter room must be "general" or "project:<id>"'],
      [admin.client.put(`/api/v1/tasks/${task.id}/status`, { status: 'NOPE' }, { token: admin.token }), 'status must be one of TODO, IN_PROGRESS, IN_REVIEW, DONE, CANCELED'],
      [admin.client.put(`/api/v1/tasks/${task.id}`, {}, { token: admin.token }), 'value must have at least one field'],
      [admin.client.get('/api/v1/tasks?limit=0', { token: admin.token }), 'query parameter limit must be at least 1'],
      [admin.client.get('/api/v1/tasks?limit=101', { token: admin.token }), 'query parameter limit must be at most 100'],
      [admin.client.post('/api/v1/tasks', { project_id: 'one', title: 'x' }, { token: admin.token }), 'project_id must be an integer'],
      [admin.client.put(`/api/v1/users/${admin.id}/active`, { active: 'yes' }, { token: admin.token }), 'active must be a boolean (true or false)'],
      [admin.client.get('/api/v1/audit-logs?from=yesterday', { token: admin.token }), 'query parameter from must be a date-time (ISO 8601, e.g. 2026-11-21T09:30:00Z)'],
    ];
    for (const [pending, detail] of cases) {
      const res = await pending;
      assertProblem(res, 400, 'VALIDATION_FAILED');
      assert.equal(res.body.detail, detail);
    }
  });
});

describe('the login throttle counts failures only', () => {
  test(`a burst of correct logins from one address (more than ${MAX_PER_ADDRESS}, all in flight at once) is never refused`, async () => {
    const users = await Promise.all(Array.from({ length: 5 }, () => h.newUser()));
    const office = new Client(h.server);
    const burst = Array.from({ length: MAX_PER_ADDRESS + 10 }, (_, i) => users[i % users.length]!);
    const answers = await Promise.all(burst.map((u) => office.post('/api/v1/auth/login', { email: u.email, password: u.password })));
    assert.deepEqual([...new Set(answers.map((r) => r.status))], [200], answers.find((r) => r.status !== 200)?.text);
  });

  test(`a burst of wrong guesses at one email tests at most ${MAX_PER_EMAIL}; the rest are throttled, recorded and not counted`, async () => {
    const { server } = h;
    const victim = await h.newUser();
    const guesses = await Promise.all(
      Array.from({ length: 30 }, (_, i) => new Client(server).post('/api/v1/auth/login', { email: victim.email, password: `wrong-guess-${i}` })),
    );
    const statuses = guesses.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 401).length, MAX_PER_EMAIL, JSON.stringify(statuses));
    assert.equal(statuses.filter((s) => s === 429).length, 30 - MAX_PER_EMAIL);
    const counted = await server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM login_failures WHERE email = $1', [victim.email]);
    assert.equal(counted[0]!.n, MAX_PER_EMAIL);
    const records = await auditRows(server, `action = 'LOGIN_FAILURE' AND resource_id = $1`, [victim.id]);
    assert.equal(records.filter((r) => r.metadata.reason === 'bad_password').length, MAX_PER_EMAIL);
    assert.equal(records.filter((r) => r.metadata.reason === 'throttled').length, 30 - MAX_PER_EMAIL);
    // The right password now is throttled too: the lock holds until the window passes.
    const right = await new Client(server).post('/api/v1/auth/login', { email: victim.email, password: victim.password });
    assertProblem(right, 429, 'RATE_LIMITED');
  });
});

describe('a unique value raced by two requests', () => {
  test('two concurrent changes to the same email: one 200, one 409 EMAIL_TAKEN, never a 500', async () => {
    const { admin } = h;
    for (let round = 0; round < 10; round++) {
      const [a, b] = await Promise.all([h.newUser(), h.newUser()]);
      const email = `contested-${round}-${a.id}@test.local`;
      const answers = await Promise.all([a, b].map((u) => admin.client.put(`/api/v1/users/${u.id}`, { email }, { token: admin.token })));
      assert.deepEqual(answers.map((r) => r.status).sort(), [200, 409], answers.map((r) => r.text).join(' | '));
      assert.equal(answers.find((r) => r.status === 409)!.body.code, 'EMAIL_TAKEN');
    }
  });

  test('deterministic: the email taken by a transaction still open is EMAIL_TAKEN once it commits', { skip: needsPostgres }, async () => {
    const { server, admin } = h;
    const [a, b] = await Promise.all([h.newUser(), h.newUser()]);
    const email = `held-${a.id}@test.local`;
    let pending: Promise<Response> | undefined;
    await server.owner.transaction(async (tx) => {
      await tx.query('UPDATE users SET email = $1 WHERE id = $2', [email, a.id]);
      pending = admin.client.put(`/api/v1/users/${b.id}`, { email }, { token: admin.token });
      // The request's own check cannot see the uncommitted email; its UPDATE queues on the index entry.
      for (let i = 0; ; i++) {
        const waiting = await server.owner.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
        if (waiting[0]!.n > 0) break;
        assert.ok(i < 400, 'the request never queued behind the uncommitted email');
        await new Promise((r) => setTimeout(r, 25));
      }
    });
    assertProblem(await pending!, 409, 'EMAIL_TAKEN');
  });
});

describe('PUT /users/{other} by a non-ADMIN is refused on who asks, not on what is stored', () => {
  test('a right guess and a wrong guess of the other user\'s email answer alike and are both recorded', async () => {
    const [mallory, victim] = await Promise.all([h.newUser(), h.newUser()]);
    const right = await mallory.client.put(`/api/v1/users/${victim.id}`, { email: victim.email }, { token: mallory.token });
    const wrong = await mallory.client.put(`/api/v1/users/${victim.id}`, { email: `guess-${victim.id}@test.local` }, { token: mallory.token });
    for (const res of [right, wrong]) {
      assertProblem(res, 403, 'FORBIDDEN');
      const records = await auditRows(h.server, 'request_id = $1', [res.headers.get('x-request-id')]);
      assert.deepEqual(records.map((r) => [r.action, r.result, r.resource_id, r.actor_id]), [['UPDATE_USER_EMAIL', 'DENIED', victim.id, mallory.id]]);
    }
    assert.equal(right.body.detail, wrong.body.detail);
    // Asking for no email change is refused without a record (the name is not audited).
    const name = await mallory.client.put(`/api/v1/users/${victim.id}`, { name: 'Renamed' }, { token: mallory.token });
    assertProblem(name, 403, 'FORBIDDEN');
    assert.equal((await auditRows(h.server, 'request_id = $1', [name.headers.get('x-request-id')])).length, 0);
  });
});

describe('password changes and logouts', () => {
  test('a throttled PUT /auth/password is recorded (DENIED, reason throttled) and changes nothing', async () => {
    const user = await h.newUser();
    const hashOf = async () => (await h.server.owner.query<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [user.id]))[0]!.password_hash;
    const before = await hashOf();
    for (let i = 0; i < MAX_PER_EMAIL; i++) {
      const res = await user.client.put('/api/v1/auth/password', { current_password: `wrong-${i}-password`, new_password: 'another-password-1' }, { token: user.token });
      assertProblem(res, 403, 'INVALID_CREDENTIALS');
    }
    const throttled = await user.client.put('/api/v1/auth/password', { current_password: user.password, new_password: 'another-password-1' }, { token: user.token });
    assertProblem(throttled, 429, 'RATE_LIMITED');
    assert.ok(Number(throttled.headers.get('retry-after')) > 0);
    const records = await auditRows(h.server, 'request_id = $1', [throttled.headers.get('x-request-id')]);
    assert.deepEqual(records.map((r) => [r.action, r.result, r.metadata.reason]), [['PASSWORD_CHANGED', 'DENIED', 'throttled']]);
    assert.equal(await hashOf(), before);
  });

  test('two logouts of one session at once: one 204 and one LOGOUT record; the other finds the session revoked', async () => {
    const user = await h.newUser();
    const answers = await Promise.all([0, 1].map(() => user.client.post('/api/v1/auth/logout', undefined, { token: user.token })));
    assert.deepEqual(answers.map((r) => r.status).sort(), [204, 401], answers.map((r) => r.text).join(' | '));
    assert.equal(answers.find((r) => r.status === 401)!.body.code, 'TOKEN_REVOKED');
    const records = await auditRows(h.server, `action = 'LOGOUT' AND resource_id = $1`, [user.id]);
    assert.equal(records.length, 1);
  });
});

describe('routes and bodies a client may get wrong', () => {
  test('a trailing slash is 404 with a hint, not "405 PUT is not allowed here; use PUT"', async () => {
    const { admin } = h;
    const user = await h.newUser();
    const res = await admin.client.put(`/api/v1/users/${user.id}/role/`, { role: 'USER' }, { token: admin.token });
    assertProblem(res, 404, 'NOT_FOUND');
    assert.equal(res.body.detail, `No route PUT /api/v1/users/${user.id}/role/ (routes have no trailing slash: PUT /api/v1/users/${user.id}/role)`);
    const other = await admin.client.delete(`/api/v1/users/${user.id}/role`, { token: admin.token });
    assertProblem(other, 405, 'METHOD_NOT_ALLOWED');
  });

  test('a body sent with Content-Encoding gzip (or any coding) is 415, and nothing is created', async () => {
    const { admin, server } = h;
    const name = `Compressed ${Date.now()}`;
    for (const coding of ['gzip', 'br', 'deflate, gzip']) {
      const res = await admin.client.request('POST', '/api/v1/projects', {
        token: admin.token,
        rawBody: JSON.stringify({ name }),
        headers: { 'content-type': 'application/json', 'content-encoding': coding },
      });
      assertProblem(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
      assert.equal(res.headers.get('accept-encoding'), 'identity');
    }
    assert.equal((await server.owner.query('SELECT 1 FROM projects WHERE name = $1', [name])).length, 0);
    const identity = await admin.client.request('POST', '/api/v1/projects', {
      token: admin.token,
      rawBody: JSON.stringify({ name }),
      headers: { 'content-type': 'application/json', 'content-encoding': 'identity' },
    });
    assert.equal(identity.status, 201, identity.text);
  });
});

describe('a client cannot fill the log', () => {
  test('thousands of bad requests write no warning, no stack, and at most the access lines at info', async () => {
    const dataDir = await migratedDataDir('teamlog-log-');
    const proc = await spawnServer({ DATA_DIR: dataDir, ADMIN_EMAIL, ADMIN_PASSWORD, RATE_LIMIT_PER_MINUTE: '0' });
    try {
      await proc.waitReady();
      const url = proc.url;
      // The readiness probes' own access lines are written as their responses finish: let them land first.
      await new Promise((r) => setTimeout(r, 500));
      const mark = proc.output().length;
      const bad: Array<[string, RequestInit]> = [
        ['/api/v1/auth/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' }],
        ['/api/v1/auth/login', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' }],
        ['/api/v1/auth/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(1024 * 1024 + 1) }],
        ['/api/v1/auth/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"email":1}' }],
        ['/api/v1/users/abc', { method: 'GET' }],
      ];
      const rounds = 200;
      for (let i = 0; i < rounds; i++) {
        // The oversized body may be cut off by the server's early 413 (EPIPE here): that is fine.
        await Promise.all(bad.map(([p, init]) => fetch(url + p, init).then((r) => r.arrayBuffer(), () => undefined)));
      }
      await new Promise((r) => setTimeout(r, 500));
      const lines = proc.output().slice(mark).split('\n').filter(Boolean);
      const levels = lines.map((l) => (JSON.parse(l) as { level: number }).level);
      assert.equal(levels.filter((l) => l >= 40).length, 0, `warnings or errors for client mistakes: ${lines.find((l) => JSON.parse(l).level >= 40)}`);
      assert.ok(!lines.some((l) => l.includes('"stack"')), 'a stack trace in the log');
      assert.ok(lines.length <= 2 * rounds * bad.length, `${lines.length} lines for ${rounds * bad.length} bad requests`);
      assert.ok(lines.every((l) => l.length < 600), `a line of ${Math.max(...lines.map((l) => l.length))} bytes`);
    } finally {
      await proc.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
