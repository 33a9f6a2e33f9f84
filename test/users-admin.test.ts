// Users (API.md section 4 "Users"): listing, creation, reading, updates, role and active
// flags, deletion, the last-ADMIN guard, and the audit records (and DENIED refusals) that
// each of them writes (section 5).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Client, auditRows, login } from './helpers/client.js';
import { uniqueWord, type PageBody, type AuditRecordBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { ADMIN_EMAIL, needsPostgres } from './helpers/server.js';

const h = useTestServer();

// ── little helpers ─────────────────────────────────────────────────────────────────────

interface UserBody {
  id: number;
  email?: string;
  name: string;
  role: 'USER' | 'ADMIN';
  active: boolean;
  created_at: string;
  updated_at: string;
}

const uniqueEmail = (prefix = 'u') => `${prefix}-${uniqueWord()}@test.local`;

/** Audit records about one user of one action, read through the owner connection. */
const recordsOn = (userId: number, action: string, result?: string) =>
  result === undefined
    ? auditRows(h.server, 'resource_type = $1 AND resource_id = $2 AND action = $3', ['USER', userId, action])
    : auditRows(h.server, 'resource_type = $1 AND resource_id = $2 AND action = $3 AND result = $4', ['USER', userId, action, result]);

/** Every audit record that names a user as actor or resource. */
const recordsNaming = (userId: number) => auditRows(h.server, '(actor_id = $1 OR (resource_type = $2 AND resource_id = $1))', [userId, 'USER']);

/** The records as the API shows them to an ADMIN (personal data resolved). */
async function auditApi(query: string): Promise<AuditRecordBody[]> {
  const res = await h.admin.client.get<PageBody<AuditRecordBody>>(`/api/v1/audit-logs?${query}`, { token: h.admin.token });
  assert.equal(res.status, 200, res.text);
  return res.body.data;
}

async function userRow(id: number) {
  const rows = await h.server.owner.query<{ id: number; email: string; name: string; role: string; active: boolean; version: number }>(
    'SELECT id, email, name, role, active, version FROM users WHERE id = $1',
    [id],
  );
  return rows[0];
}

async function activeAdminIds(): Promise<number[]> {
  const rows = await h.server.owner.query<{ id: number }>(`SELECT id FROM users WHERE role = 'ADMIN' AND active ORDER BY id`);
  return rows.map((r) => Number(r.id));
}

/** Demotes every active ADMIN but the first one, so that it is the last active ADMIN. */
async function leaveOnlyFirstAdmin(): Promise<void> {
  for (const id of await activeAdminIds()) {
    if (id === h.admin.id) continue;
    const res = await h.admin.client.put(`/api/v1/users/${id}/role`, { role: 'USER' }, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
  }
  assert.deepEqual(await activeAdminIds(), [h.admin.id]);
}

/** Waits (a bounded while) until `n` backends of this database wait for a lock. */
async function waitForLockWaiters(n: number): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const rows = await h.server.owner.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (rows[0]!.n >= n) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.fail(`${n} requests never queued behind the held rows`);
}

const isPersonalRef = (v: unknown) =>
  typeof v === 'object' && v !== null && typeof (v as Record<string, unknown>).$personal === 'string';

// ── GET /users ─────────────────────────────────────────────────────────────────────────

describe('GET /users', () => {
  test('lists users to any authenticated user, newest first, and refuses anonymous callers', async () => {
    const word = uniqueWord();
    const a = await h.newUser({ name: `Ann ${word}` });
    const b = await h.newUser({ name: `Ben ${word}` });
    const c = await h.newUser({ name: `Cat ${word}` });
    const viewer = await h.newUser();

    const res = await viewer.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}`, { token: viewer.token });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.data.map((u) => u.id), [c.id, b.id, a.id]);
    assert.equal(res.body.next_cursor, null);
    assert.equal(res.headers.get('link'), null);

    const all = await viewer.client.get<PageBody<UserBody>>('/api/v1/users?limit=100', { token: viewer.token });
    const ids = all.body.data.map((u) => u.id);
    assert.deepEqual(ids, [...ids].sort((x, y) => y - x));
    assert.ok(ids.includes(h.admin.id) || all.body.next_cursor !== null);

    const anonymous = await new Client(h.server).get('/api/v1/users');
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.code, 'UNAUTHENTICATED');
  });

  test('filters by role and by active flag', async () => {
    const word = uniqueWord();
    const plain = await h.newUser({ name: `Plain ${word}` });
    const boss = await h.newUser({ name: `Boss ${word}`, role: 'ADMIN' });
    const gone = await h.newUser({ name: `Gone ${word}` });
    const off = await h.admin.client.put(`/api/v1/users/${gone.id}/active`, { active: false }, { token: h.admin.token });
    assert.equal(off.status, 200);

    const list = async (query: string) => {
      const res = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}&${query}`, { token: h.admin.token });
      assert.equal(res.status, 200, res.text);
      return res.body.data.map((u) => u.id);
    };
    assert.deepEqual(await list('role=ADMIN'), [boss.id]);
    assert.deepEqual(await list('role=USER'), [gone.id, plain.id]);
    assert.deepEqual(await list('active=false'), [gone.id]);
    assert.deepEqual(await list('active=true'), [boss.id, plain.id]);
    assert.deepEqual(await list('role=USER&active=true'), [plain.id]);

    const badRole = await h.admin.client.get(`/api/v1/users?role=ROOT`, { token: h.admin.token });
    assert.equal(badRole.status, 400);
    assert.equal(badRole.body.code, 'VALIDATION_FAILED');
    const unknownFilter = await h.admin.client.get(`/api/v1/users?colour=red`, { token: h.admin.token });
    assert.equal(unknownFilter.status, 400);

    // Leave no extra active ADMIN behind for the last-ADMIN tests.
    await h.admin.client.put(`/api/v1/users/${boss.id}/role`, { role: 'USER' }, { token: h.admin.token });
  });

  test('q matches names case-insensitively for everyone, and emails only for ADMINs', async () => {
    const word = uniqueWord();
    const mailWord = uniqueWord();
    const named = await h.newUser({ name: `Quinn ${word.toUpperCase()}` });
    const mailed = await h.newUser({ name: 'Mail Only', email: `${mailWord}@test.local` });
    const viewer = await h.newUser();

    const byName = await viewer.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}`, { token: viewer.token });
    assert.deepEqual(byName.body.data.map((u) => u.id), [named.id]);

    const userByEmail = await viewer.client.get<PageBody<UserBody>>(`/api/v1/users?q=${mailWord}`, { token: viewer.token });
    assert.equal(userByEmail.status, 200);
    assert.deepEqual(userByEmail.body.data, [], 'a USER must not find people by their email');

    const adminByEmail = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${mailWord.toUpperCase()}`, { token: h.admin.token });
    assert.deepEqual(adminByEmail.body.data.map((u) => u.id), [mailed.id]);
  });

  test('q treats % and _ literally', async () => {
    const word = uniqueWord();
    const percent = await h.newUser({ name: `100% ${word}` });
    await h.newUser({ name: `1000 ${word}` });
    const res = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${encodeURIComponent('0%')}&limit=100`, { token: h.admin.token });
    assert.equal(res.status, 200);
    assert.ok(res.body.data.length >= 1);
    assert.ok(res.body.data.every((u) => u.name.includes('0%')), 'only names containing a literal "0%" match');
    assert.ok(res.body.data.some((u) => u.id === percent.id));
    const underscore = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}_&limit=100`, { token: h.admin.token });
    assert.deepEqual(underscore.body.data, []);
  });

  test('paginates with limit, next_cursor and a Link header, stable while users are inserted between pages', async () => {
    const word = uniqueWord();
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await h.newUser({ name: `Pager ${i} ${word}` }));
    const newestFirst = made.map((u) => u.id).reverse();

    const first = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}&limit=2`, { token: h.admin.token });
    assert.equal(first.status, 200);
    assert.deepEqual(first.body.data.map((u) => u.id), newestFirst.slice(0, 2));
    assert.equal(typeof first.body.next_cursor, 'string');
    const link = first.headers.get('link');
    assert.ok(link, 'a Link header announces the next page');
    const m = /^<([^>]+)>; rel="next"$/.exec(link);
    assert.ok(m, `Link header has the rel="next" form: ${link}`);
    assert.ok(m[1]!.includes(`cursor=${first.body.next_cursor}`));

    // Users created between page requests never shift later pages.
    const late = await h.newUser({ name: `Pager late ${word}` });

    const second = await h.admin.client.get<PageBody<UserBody>>(m[1]!, { token: h.admin.token });
    assert.equal(second.status, 200, second.text);
    assert.deepEqual(second.body.data.map((u) => u.id), newestFirst.slice(2, 4));

    const third = await h.admin.client.get<PageBody<UserBody>>(
      `/api/v1/users?q=${word}&limit=2&cursor=${second.body.next_cursor}`,
      { token: h.admin.token },
    );
    assert.deepEqual(third.body.data.map((u) => u.id), newestFirst.slice(4));
    assert.equal(third.body.next_cursor, null);
    assert.equal(third.headers.get('link'), null);

    const fresh = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}&limit=2`, { token: h.admin.token });
    assert.deepEqual(fresh.body.data.map((u) => u.id), [late.id, newestFirst[0]]);
  });

  test('rejects a limit outside 1..100 and a cursor it did not issue', async () => {
    for (const query of ['limit=0', 'limit=101', 'limit=abc', 'cursor=not-a-cursor', 'cursor=%25%25']) {
      const res = await h.admin.client.get(`/api/v1/users?${query}`, { token: h.admin.token });
      assert.equal(res.status, 400, `${query}: ${res.text}`);
    }
  });

  test('shows emails only to ADMINs and to the user themself', async () => {
    const word = uniqueWord();
    const other = await h.newUser({ name: `Other ${word}` });
    const me = await h.newUser({ name: `Me ${word}` });

    const asUser = await me.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}`, { token: me.token });
    assert.deepEqual(asUser.body.data.map((u) => u.id), [me.id, other.id]);
    const [mine, theirs] = asUser.body.data;
    assert.equal(mine!.email, me.email);
    assert.ok(!('email' in theirs!), 'a USER sees no email field on another user');
    assert.ok(!asUser.text.includes(other.email));

    const asAdmin = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}`, { token: h.admin.token });
    assert.deepEqual(asAdmin.body.data.map((u) => u.email), [me.email, other.email]);
  });
});

// ── POST /users ────────────────────────────────────────────────────────────────────────

describe('POST /users', () => {
  test('an ADMIN creates a user: 201, Location, the user with a lower-cased email, and one CREATE_USER record', async () => {
    const typed = `New.Person-${uniqueWord()}@Test.LOCAL`;
    const res = await h.admin.client.post<UserBody>(
      '/api/v1/users',
      { email: typed, name: 'New Person', password: 'a-long-password-1', role: 'ADMIN' },
      { token: h.admin.token },
    );
    assert.equal(res.status, 201, res.text);
    const id = res.body.id;
    assert.ok(Number.isInteger(id) && id > 0);
    assert.equal(res.headers.get('location'), `/api/v1/users/${id}`);
    assert.equal(res.body.email, typed.toLowerCase());
    assert.equal(res.body.name, 'New Person');
    assert.equal(res.body.role, 'ADMIN');
    assert.equal(res.body.active, true);
    assert.match(res.body.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.ok(!('password' in res.body) && !('password_hash' in res.body));
    assert.equal((await userRow(id))!.email, typed.toLowerCase());

    const fetched = await h.admin.client.get<UserBody>(res.headers.get('location')!, { token: h.admin.token });
    assert.equal(fetched.status, 200);
    assert.equal(fetched.body.id, id);

    // The record, as an ADMIN reads it, shows the email and role.
    const records = await auditApi(`action=CREATE_USER&resource_id=${id}`);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.actor_id, h.admin.id);
    assert.equal(records[0]!.result, 'SUCCESS');
    assert.deepEqual(records[0]!.metadata, { email: typed.toLowerCase(), role: 'ADMIN' });

    // The stored row holds a reference to the email, never the email itself.
    const raw = await recordsOn(id, 'CREATE_USER');
    assert.equal(raw.length, 1);
    assert.equal(raw[0]!.metadata.role, 'ADMIN');
    assert.ok(isPersonalRef(raw[0]!.metadata.email), `metadata.email is a {"$personal": …} reference: ${JSON.stringify(raw[0]!.metadata)}`);
    assert.ok(!JSON.stringify(raw[0]).toLowerCase().includes(typed.toLowerCase()));

    // A created user can log in (the password was stored), with the email in any case.
    await login(h.server, typed.toUpperCase(), 'a-long-password-1');
    await h.admin.client.put(`/api/v1/users/${id}/role`, { role: 'USER' }, { token: h.admin.token });
  });

  test('defaults the role to USER', async () => {
    const res = await h.admin.client.post<UserBody>(
      '/api/v1/users',
      { email: uniqueEmail(), name: 'Default Role', password: 'a-long-password-1' },
      { token: h.admin.token },
    );
    assert.equal(res.status, 201);
    assert.equal(res.body.role, 'USER');
  });

  test('refuses a USER with 403, creates nothing, and records one DENIED CREATE_USER on USER/null', async () => {
    const user = await h.newUser();
    const email = uniqueEmail('never');
    const before = (await auditRows(h.server, `action = 'CREATE_USER'`)).length;
    const res = await user.client.post('/api/v1/users', { email, name: 'Never', password: 'a-long-password-1' }, { token: user.token });
    assert.equal(res.status, 403);
    assert.equal(res.body.code, 'FORBIDDEN');
    assert.match(res.headers.get('content-type') ?? '', /application\/problem\+json/);
    const rows = await h.server.owner.query('SELECT 1 FROM users WHERE email = $1', [email]);
    assert.equal(rows.length, 0);
    // API.md 5.3: a refused creation names the kind that would have been created, with no id.
    const records = await auditRows(h.server, `action = 'CREATE_USER' AND request_id = $1`, [res.headers.get('x-request-id')]);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.result, 'DENIED');
    assert.equal(records[0]!.actor_id, user.id);
    assert.equal(records[0]!.resource_type, 'USER');
    assert.equal(records[0]!.resource_id, null);
    assert.equal(JSON.stringify(records[0]!.metadata), '{}', 'the typed email of a refused creation is not recorded');
    assert.equal((await auditRows(h.server, `action = 'CREATE_USER'`)).length, before + 1);
  });

  test('answers 409 EMAIL_TAKEN for an email already used in any case, and writes no record', async () => {
    const existing = await h.newUser();
    const before = (await auditRows(h.server, `action = 'CREATE_USER'`)).length;
    const res = await h.admin.client.post(
      '/api/v1/users',
      { email: existing.email.toUpperCase(), name: 'Twin', password: 'a-long-password-1' },
      { token: h.admin.token },
    );
    assert.equal(res.status, 409);
    assert.equal(res.body.code, 'EMAIL_TAKEN');
    const rows = await h.server.owner.query('SELECT id FROM users WHERE email = $1', [existing.email]);
    assert.equal(rows.length, 1);
    assert.equal((await auditRows(h.server, `action = 'CREATE_USER'`)).length, before);
  });

  test('validates the body: bad email, short password, blank name, unknown fields', async () => {
    const ok = { email: uniqueEmail(), name: 'Valid', password: 'a-long-password-1' };
    const bodies: Array<Record<string, unknown>> = [
      { ...ok, email: 'not-an-email' },
      { ...ok, password: 'short' },
      { ...ok, name: '   ' },
      { ...ok, name: 'x'.repeat(101) },
      { ...ok, role: 'ROOT' },
      { ...ok, id: 5 },
      { ...ok, active: false },
      { email: ok.email, password: ok.password },
    ];
    for (const body of bodies) {
      const res = await h.admin.client.post('/api/v1/users', body, { token: h.admin.token });
      assert.equal(res.status, 400, `${JSON.stringify(body)} → ${res.status} ${res.text}`);
      assert.equal(res.body.code, 'VALIDATION_FAILED');
    }
    assert.equal((await h.server.owner.query('SELECT 1 FROM users WHERE email = $1', [ok.email])).length, 0);
  });
});

// ── GET /users/:id ─────────────────────────────────────────────────────────────────────

describe('GET /users/:id', () => {
  test('returns the user with a strong ETag, and 304 with an empty body for a matching If-None-Match', async () => {
    const user = await h.newUser({ name: 'Etag Person' });
    const res = await h.admin.client.get<UserBody>(`/api/v1/users/${user.id}`, { token: h.admin.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.name, 'Etag Person');
    const etag = res.headers.get('etag');
    assert.ok(etag && /^"[^"]+"$/.test(etag), `a strong ETag: ${etag}`);
    assert.equal(res.headers.get('cache-control'), 'private, no-cache');

    const again = await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token, headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    assert.equal(again.text, '');
    assert.equal(again.headers.get('etag'), etag);

    // A change bumps the ETag, so the old one no longer matches.
    await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Etag Person 2' }, { token: h.admin.token });
    const changed = await h.admin.client.get<UserBody>(`/api/v1/users/${user.id}`, { token: h.admin.token, headers: { 'if-none-match': etag } });
    assert.equal(changed.status, 200);
    assert.equal(changed.body.name, 'Etag Person 2');
    assert.notEqual(changed.headers.get('etag'), etag);
  });

  test('answers 404 for an unknown id and 400 for an id that is not a positive integer', async () => {
    const missing = await h.admin.client.get('/api/v1/users/987654321', { token: h.admin.token });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.code, 'NOT_FOUND');
    for (const id of ['abc', '0', '-1', '99999999999999999999']) {
      const res = await h.admin.client.get(`/api/v1/users/${id}`, { token: h.admin.token });
      assert.equal(res.status, 400, `${id}: ${res.text}`);
    }
  });

  test('shows the email to the user themself and to ADMINs, not to other users', async () => {
    const other = await h.newUser();
    const me = await h.newUser();
    const own = await me.client.get<UserBody>(`/api/v1/users/${me.id}`, { token: me.token });
    assert.equal(own.body.email, me.email);
    const theirs = await me.client.get<UserBody>(`/api/v1/users/${other.id}`, { token: me.token });
    assert.equal(theirs.status, 200);
    assert.equal(theirs.body.id, other.id);
    assert.ok(!('email' in theirs.body));
    assert.ok(!theirs.text.includes(other.email));
    const byAdmin = await h.admin.client.get<UserBody>(`/api/v1/users/${other.id}`, { token: h.admin.token });
    assert.equal(byAdmin.body.email, other.email);
    // The two representations never share an ETag.
    assert.notEqual(theirs.headers.get('etag'), byAdmin.headers.get('etag'));
  });

  test('is also served under /api without the version segment', async () => {
    const user = await h.newUser();
    const res = await h.admin.client.get<UserBody>(`/api/users/${user.id}`, { token: h.admin.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.id, user.id);
    assert.equal(res.headers.get('api-version'), '1');
  });
});

// ── PUT /users/:id ─────────────────────────────────────────────────────────────────────

describe('PUT /users/:id', () => {
  test('lets a user change their own name, without writing a record', async () => {
    const me = await h.newUser({ name: 'Before' });
    const before = (await recordsNaming(me.id)).length;
    const res = await me.client.put<UserBody>(`/api/v1/users/${me.id}`, { name: '  After  ' }, { token: me.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.name, 'After');
    assert.equal(res.body.email, me.email);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal((await userRow(me.id))!.name, 'After');
    assert.equal((await recordsNaming(me.id)).length, before);
  });

  test("refuses a USER changing someone else's name with 403 and changes nothing", async () => {
    const me = await h.newUser();
    const other = await h.newUser({ name: 'Untouched' });
    const res = await me.client.put(`/api/v1/users/${other.id}`, { name: 'Hijacked' }, { token: me.token });
    assert.equal(res.status, 403);
    assert.equal(res.body.code, 'FORBIDDEN');
    assert.equal((await userRow(other.id))!.name, 'Untouched');
  });

  test("refuses a USER changing someone else's email with 403 and one DENIED UPDATE_USER_EMAIL record", async () => {
    const me = await h.newUser();
    const other = await h.newUser();
    const res = await me.client.put(
      `/api/v1/users/${other.id}`,
      { email: uniqueEmail('stolen'), current_password: me.password },
      { token: me.token },
    );
    assert.equal(res.status, 403);
    assert.equal((await userRow(other.id))!.email, other.email);
    const denied = await recordsOn(other.id, 'UPDATE_USER_EMAIL');
    assert.equal(denied.length, 1);
    assert.equal(denied[0]!.result, 'DENIED');
    assert.equal(denied[0]!.actor_id, me.id);
    assert.equal(denied[0]!.ip, me.client.ip);
  });

  test('requires current_password for a change of your own email (400), and refuses a wrong one with 403 and a DENIED record', async () => {
    const me = await h.newUser();
    const wanted = uniqueEmail('mine');

    const missing = await me.client.put(`/api/v1/users/${me.id}`, { email: wanted }, { token: me.token });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.code, 'VALIDATION_FAILED');
    assert.equal((await recordsOn(me.id, 'UPDATE_USER_EMAIL')).length, 0);

    const wrong = await me.client.put(`/api/v1/users/${me.id}`, { email: wanted, current_password: 'not-my-password' }, { token: me.token });
    assert.equal(wrong.status, 403);
    assert.equal(wrong.body.code, 'INVALID_CREDENTIALS');
    assert.equal((await userRow(me.id))!.email, me.email);
    const records = await recordsOn(me.id, 'UPDATE_USER_EMAIL');
    assert.equal(records.length, 1);
    assert.equal(records[0]!.result, 'DENIED');
    assert.equal(records[0]!.actor_id, me.id);
    assert.ok(!JSON.stringify(records[0]).includes('not-my-password'), 'a typed password is never recorded');
  });

  test('changes your own email with the right current_password: 200, one UPDATE_USER_EMAIL {oldEmail, newEmail}', async () => {
    const me = await h.newUser();
    const typed = `Fresh-${uniqueWord()}@Test.Local`;
    const res = await me.client.put<UserBody>(`/api/v1/users/${me.id}`, { email: typed, current_password: me.password }, { token: me.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.email, typed.toLowerCase());
    assert.equal((await userRow(me.id))!.email, typed.toLowerCase());

    const raw = await recordsOn(me.id, 'UPDATE_USER_EMAIL');
    assert.equal(raw.length, 1);
    assert.equal(raw[0]!.result, 'SUCCESS');
    assert.equal(raw[0]!.actor_id, me.id);
    assert.ok(isPersonalRef(raw[0]!.metadata.oldEmail) && isPersonalRef(raw[0]!.metadata.newEmail));
    const [shown] = await auditApi(`action=UPDATE_USER_EMAIL&resource_id=${me.id}`);
    assert.deepEqual(shown!.metadata, { oldEmail: me.email, newEmail: typed.toLowerCase() });

    // The old email no longer logs in; the new one does.
    const old = await new Client(h.server).post('/api/v1/auth/login', { email: me.email, password: me.password });
    assert.equal(old.status, 401);
    await login(h.server, typed, me.password);
  });

  test('lets an ADMIN change another user\'s email without a password', async () => {
    const user = await h.newUser();
    const wanted = uniqueEmail('by-admin');
    const res = await h.admin.client.put<UserBody>(`/api/v1/users/${user.id}`, { email: wanted }, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.email, wanted);
    const records = await auditApi(`action=UPDATE_USER_EMAIL&resource_id=${user.id}`);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.actor_id, h.admin.id);
    assert.deepEqual(records[0]!.metadata, { oldEmail: user.email, newEmail: wanted });
  });

  test('answers 409 EMAIL_TAKEN for an email another user has, in any case, and writes no record', async () => {
    const user = await h.newUser();
    const holder = await h.newUser();
    const res = await h.admin.client.put(`/api/v1/users/${user.id}`, { email: holder.email.toUpperCase() }, { token: h.admin.token });
    assert.equal(res.status, 409);
    assert.equal(res.body.code, 'EMAIL_TAKEN');
    assert.equal((await userRow(user.id))!.email, user.email);
    assert.equal((await recordsOn(user.id, 'UPDATE_USER_EMAIL')).length, 0);
  });

  test('a correct current_password with a taken email does not count toward the login throttle', async () => {
    const me = await h.newUser();
    const holder = await h.newUser();
    for (let i = 0; i < 6; i++) {
      const res = await me.client.put(`/api/v1/users/${me.id}`, { email: holder.email, current_password: me.password }, { token: me.token });
      assert.equal(res.status, 409, `attempt ${i + 1}: ${res.text}`);
      assert.equal(res.body.code, 'EMAIL_TAKEN');
    }
    // Six refused changes with the right password are not six failed logins.
    const again = await new Client(h.server).post('/api/v1/auth/login', { email: me.email, password: me.password });
    assert.equal(again.status, 200, again.text);
  });

  test('a no-op (the values the user already has) is 200, writes no record and keeps the ETag', async () => {
    const user = await h.newUser({ name: 'Same Name' });
    const first = await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token });
    const etag = first.headers.get('etag');
    const before = (await recordsNaming(user.id)).length;
    const res = await h.admin.client.put<UserBody>(
      `/api/v1/users/${user.id}`,
      { name: 'Same Name', email: user.email.toUpperCase() },
      { token: h.admin.token },
    );
    assert.equal(res.status, 200);
    assert.equal(res.body.name, 'Same Name');
    assert.equal(res.headers.get('etag'), etag);
    const after = await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token });
    assert.equal(after.headers.get('etag'), etag);
    assert.equal(after.body.updated_at, first.body.updated_at);
    assert.equal((await recordsNaming(user.id)).length, before);
  });

  test('answers 412 to a stale If-Match and changes nothing; the current ETag succeeds', async () => {
    const user = await h.newUser({ name: 'Version 1' });
    const v1 = (await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token })).headers.get('etag')!;
    const changed = await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Version 2' }, { token: h.admin.token, headers: { 'if-match': v1 } });
    assert.equal(changed.status, 200);
    const v2 = changed.headers.get('etag')!;
    assert.notEqual(v2, v1);

    const stale = await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Lost Update' }, { token: h.admin.token, headers: { 'if-match': v1 } });
    assert.equal(stale.status, 412);
    assert.equal(stale.body.code, 'PRECONDITION_FAILED');
    assert.equal((await userRow(user.id))!.name, 'Version 2');

    const staleEmail = await h.admin.client.put(`/api/v1/users/${user.id}`, { email: uniqueEmail() }, { token: h.admin.token, headers: { 'if-match': v1 } });
    assert.equal(staleEmail.status, 412);
    assert.equal((await userRow(user.id))!.email, user.email);
    assert.equal((await recordsOn(user.id, 'UPDATE_USER_EMAIL')).length, 0);

    const current = await h.admin.client.put<UserBody>(`/api/v1/users/${user.id}`, { name: 'Version 3' }, { token: h.admin.token, headers: { 'if-match': v2 } });
    assert.equal(current.status, 200);
    assert.equal(current.body.name, 'Version 3');
  });

  test('rejects role, id, created_at and other unknown fields with 400 and changes nothing', async () => {
    const me = await h.newUser({ name: 'Plain User' });
    const bodies: Array<Record<string, unknown>> = [
      { role: 'ADMIN' },
      { name: 'Sneaky', role: 'ADMIN' },
      { id: 1 },
      { created_at: '2000-01-01T00:00:00.000Z' },
      { active: false },
      {},
      { name: '' },
      { name: 42 },
    ];
    for (const body of bodies) {
      const res = await me.client.put(`/api/v1/users/${me.id}`, body, { token: me.token });
      assert.equal(res.status, 400, `${JSON.stringify(body)} → ${res.status} ${res.text}`);
      assert.equal(res.body.code, 'VALIDATION_FAILED');
    }
    const row = (await userRow(me.id))!;
    assert.equal(row.role, 'USER');
    assert.equal(row.name, 'Plain User');
    assert.equal(row.active, true);
  });

  test('answers 404 for an unknown user', async () => {
    const res = await h.admin.client.put('/api/v1/users/987654321', { name: 'Nobody' }, { token: h.admin.token });
    assert.equal(res.status, 404);
  });
});

// ── PUT /users/:id/role ────────────────────────────────────────────────────────────────

describe('PUT /users/:id/role', () => {
  test('an ADMIN changes a role: 200 and one CHANGE_USER_ROLE {oldRole, newRole}; the same role again writes nothing', async () => {
    const user = await h.newUser();
    const promoted = await h.admin.client.put<UserBody>(`/api/v1/users/${user.id}/role`, { role: 'ADMIN' }, { token: h.admin.token });
    assert.equal(promoted.status, 200, promoted.text);
    assert.equal(promoted.body.role, 'ADMIN');
    let records = await recordsOn(user.id, 'CHANGE_USER_ROLE');
    assert.equal(records.length, 1);
    assert.equal(records[0]!.actor_id, h.admin.id);
    assert.equal(records[0]!.result, 'SUCCESS');
    assert.deepEqual(records[0]!.metadata, { oldRole: 'USER', newRole: 'ADMIN' });

    // Promotion is effective on the very next request, with the same token.
    const audit = await user.client.get('/api/v1/audit-logs?limit=1', { token: user.token });
    assert.equal(audit.status, 200);

    const same = await h.admin.client.put<UserBody>(`/api/v1/users/${user.id}/role`, { role: 'ADMIN' }, { token: h.admin.token });
    assert.equal(same.status, 200);
    assert.equal(same.body.role, 'ADMIN');
    assert.equal((await recordsOn(user.id, 'CHANGE_USER_ROLE')).length, 1);

    const demoted = await h.admin.client.put<UserBody>(`/api/v1/users/${user.id}/role`, { role: 'USER' }, { token: h.admin.token });
    assert.equal(demoted.status, 200);
    records = await recordsOn(user.id, 'CHANGE_USER_ROLE');
    assert.equal(records.length, 2);
    assert.deepEqual(records[1]!.metadata, { oldRole: 'ADMIN', newRole: 'USER' });
  });

  test('a demoted ADMIN loses ADMIN rights on their very next request with the same token', async () => {
    const boss = await h.newUser({ role: 'ADMIN' });
    const before = await boss.client.get('/api/v1/audit-logs?limit=1', { token: boss.token });
    assert.equal(before.status, 200);
    const res = await h.admin.client.put(`/api/v1/users/${boss.id}/role`, { role: 'USER' }, { token: h.admin.token });
    assert.equal(res.status, 200);
    const after = await boss.client.get('/api/v1/audit-logs?limit=1', { token: boss.token });
    assert.equal(after.status, 403);
    const create = await boss.client.post('/api/v1/users', { email: uniqueEmail(), name: 'X', password: 'a-long-password-1' }, { token: boss.token });
    assert.equal(create.status, 403);
    // The session itself still works for what a USER may do.
    const profile = await boss.client.get('/api/v1/profile', { token: boss.token });
    assert.equal(profile.status, 200);
    assert.equal(profile.body.role, 'USER');
  });

  test('refuses a USER with 403 and one DENIED CHANGE_USER_ROLE record on the target', async () => {
    const me = await h.newUser();
    const other = await h.newUser();
    const res = await me.client.put(`/api/v1/users/${other.id}/role`, { role: 'ADMIN' }, { token: me.token });
    assert.equal(res.status, 403);
    const selfPromotion = await me.client.put(`/api/v1/users/${me.id}/role`, { role: 'ADMIN' }, { token: me.token });
    assert.equal(selfPromotion.status, 403);
    assert.equal((await userRow(other.id))!.role, 'USER');
    assert.equal((await userRow(me.id))!.role, 'USER');
    const records = await recordsOn(other.id, 'CHANGE_USER_ROLE');
    assert.equal(records.length, 1);
    assert.equal(records[0]!.result, 'DENIED');
    assert.equal(records[0]!.actor_id, me.id);
    const own = await recordsOn(me.id, 'CHANGE_USER_ROLE');
    assert.deepEqual(own.map((r) => r.result), ['DENIED']);
  });

  test('answers 404 for an unknown user and writes no record', async () => {
    const me = await h.newUser();
    const count = async () => (await auditRows(h.server, `action = 'CHANGE_USER_ROLE' AND resource_id = 987654321`)).length;
    const byAdmin = await h.admin.client.put('/api/v1/users/987654321/role', { role: 'ADMIN' }, { token: h.admin.token });
    assert.equal(byAdmin.status, 404);
    const byUser = await me.client.put('/api/v1/users/987654321/role', { role: 'ADMIN' }, { token: me.token });
    assert.equal(byUser.status, 404);
    assert.equal(await count(), 0);
  });

  test('rejects an unknown role or extra fields with 400', async () => {
    const user = await h.newUser();
    for (const body of [{ role: 'OWNER' }, { role: 'admin' }, {}, { role: 'ADMIN', active: true }]) {
      const res = await h.admin.client.put(`/api/v1/users/${user.id}/role`, body, { token: h.admin.token });
      assert.equal(res.status, 400, JSON.stringify(body));
    }
    assert.equal((await userRow(user.id))!.role, 'USER');
  });

  test('honours If-Match: a stale ETag gets 412 and the role stays', async () => {
    const user = await h.newUser();
    const v1 = (await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token })).headers.get('etag')!;
    await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Renamed' }, { token: h.admin.token });
    const stale = await h.admin.client.put(`/api/v1/users/${user.id}/role`, { role: 'ADMIN' }, { token: h.admin.token, headers: { 'if-match': v1 } });
    assert.equal(stale.status, 412);
    assert.equal((await userRow(user.id))!.role, 'USER');
    assert.equal((await recordsOn(user.id, 'CHANGE_USER_ROLE')).length, 0);
  });

  test('refuses to demote the last active ADMIN with 409 LAST_ADMIN and writes no record', async () => {
    // An inactive ADMIN does not count as a remaining ADMIN.
    const dormant = await h.newUser({ role: 'ADMIN' });
    await h.admin.client.put(`/api/v1/users/${dormant.id}/active`, { active: false }, { token: h.admin.token });
    await leaveOnlyFirstAdmin();
    const before = (await recordsOn(h.admin.id, 'CHANGE_USER_ROLE')).length;
    const res = await h.admin.client.put(`/api/v1/users/${h.admin.id}/role`, { role: 'USER' }, { token: h.admin.token });
    assert.equal(res.status, 409);
    assert.equal(res.body.code, 'LAST_ADMIN');
    assert.equal((await userRow(h.admin.id))!.role, 'ADMIN');
    assert.equal((await recordsOn(h.admin.id, 'CHANGE_USER_ROLE')).length, before);
    const still = await h.admin.client.get('/api/v1/audit-logs?limit=1', { token: h.admin.token });
    assert.equal(still.status, 200);
  });
});

// ── PUT /users/:id/active ──────────────────────────────────────────────────────────────

describe('PUT /users/:id/active', () => {
  test('deactivation refuses the existing token at once; reactivation leaves old tokens dead but allows a fresh login', async () => {
    const user = await h.newUser();
    const off = await h.admin.client.put<UserBody>(`/api/v1/users/${user.id}/active`, { active: false }, { token: h.admin.token });
    assert.equal(off.status, 200, off.text);
    assert.equal(off.body.active, false);
    const deactivations = await recordsOn(user.id, 'DEACTIVATE_USER');
    assert.equal(deactivations.length, 1);
    assert.equal(deactivations[0]!.actor_id, h.admin.id);
    assert.equal(deactivations[0]!.result, 'SUCCESS');

    const refused = await user.client.get('/api/v1/profile', { token: user.token });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.code, 'ACCOUNT_DEACTIVATED');
    const loginRefused = await new Client(h.server).post('/api/v1/auth/login', { email: user.email, password: user.password });
    assert.equal(loginRefused.status, 403);
    assert.equal(loginRefused.body.code, 'ACCOUNT_DEACTIVATED');
    const refresh = await user.client.post('/api/v1/auth/refresh', { refresh_token: user.refreshToken });
    assert.ok(refresh.status === 401 || refresh.status === 403, `refresh after deactivation: ${refresh.status}`);

    // Setting the value it already has changes nothing.
    const again = await h.admin.client.put(`/api/v1/users/${user.id}/active`, { active: false }, { token: h.admin.token });
    assert.equal(again.status, 200);
    assert.equal((await recordsOn(user.id, 'DEACTIVATE_USER')).length, 1);

    const on = await h.admin.client.put<UserBody>(`/api/v1/users/${user.id}/active`, { active: true }, { token: h.admin.token });
    assert.equal(on.status, 200);
    assert.equal(on.body.active, true);
    const activations = await recordsOn(user.id, 'ACTIVATE_USER');
    assert.equal(activations.length, 1);
    assert.equal(activations[0]!.actor_id, h.admin.id);
    const onAgain = await h.admin.client.put(`/api/v1/users/${user.id}/active`, { active: true }, { token: h.admin.token });
    assert.equal(onAgain.status, 200);
    assert.equal((await recordsOn(user.id, 'ACTIVATE_USER')).length, 1);

    const oldToken = await user.client.get('/api/v1/profile', { token: user.token });
    assert.equal(oldToken.status, 401);
    assert.equal(oldToken.body.code, 'TOKEN_REVOKED');
    const oldRefresh = await user.client.post('/api/v1/auth/refresh', { refresh_token: user.refreshToken });
    assert.equal(oldRefresh.status, 401);
    const fresh = await login(h.server, user.email, user.password);
    const works = await fresh.client.get('/api/v1/profile', { token: fresh.token });
    assert.equal(works.status, 200);
  });

  test('refuses a USER with 403 and one DENIED DEACTIVATE_USER record', async () => {
    const me = await h.newUser();
    const other = await h.newUser();
    const res = await me.client.put(`/api/v1/users/${other.id}/active`, { active: false }, { token: me.token });
    assert.equal(res.status, 403);
    assert.equal((await userRow(other.id))!.active, true);
    const records = await recordsOn(other.id, 'DEACTIVATE_USER');
    assert.equal(records.length, 1);
    assert.equal(records[0]!.result, 'DENIED');
    assert.equal(records[0]!.actor_id, me.id);
  });

  test('rejects a non-boolean active with 400 (no coercion of "false")', async () => {
    const user = await h.newUser();
    for (const body of [{ active: 'false' }, { active: 0 }, {}]) {
      const res = await h.admin.client.put(`/api/v1/users/${user.id}/active`, body, { token: h.admin.token });
      assert.equal(res.status, 400, JSON.stringify(body));
    }
    assert.equal((await userRow(user.id))!.active, true);
  });

  test('refuses to deactivate the last active ADMIN with 409 LAST_ADMIN and writes no record', async () => {
    await leaveOnlyFirstAdmin();
    const res = await h.admin.client.put(`/api/v1/users/${h.admin.id}/active`, { active: false }, { token: h.admin.token });
    assert.equal(res.status, 409);
    assert.equal(res.body.code, 'LAST_ADMIN');
    assert.equal((await userRow(h.admin.id))!.active, true);
    assert.equal((await recordsOn(h.admin.id, 'DEACTIVATE_USER')).length, 0);
    const still = await h.admin.client.get('/api/v1/profile', { token: h.admin.token });
    assert.equal(still.status, 200);
  });

  test('answers 404 for an unknown user', async () => {
    const res = await h.admin.client.put('/api/v1/users/987654321/active', { active: false }, { token: h.admin.token });
    assert.equal(res.status, 404);
  });
});

// ── DELETE /users/:id ──────────────────────────────────────────────────────────────────

describe('DELETE /users/:id', () => {
  test('an ADMIN deletes a user: 204, one DELETE_USER {email, role}, sessions gone, every record naming them survives', async () => {
    const user = await h.newUser();
    const second = await login(h.server, user.email, user.password);
    await new Client(h.server).post('/api/v1/auth/login', { email: user.email, password: 'wrong-password-x' });
    await user.client.put(`/api/v1/users/${user.id}`, { name: 'About To Go' }, { token: user.token });
    const before = await recordsNaming(user.id);
    assert.ok(before.length >= 4, `records naming the user before deletion: ${before.length}`);

    const res = await h.admin.client.delete(`/api/v1/users/${user.id}`, { token: h.admin.token });
    assert.equal(res.status, 204);
    assert.equal(res.text, '');

    const after = await recordsNaming(user.id);
    assert.equal(after.length, before.length + 1);
    assert.deepEqual(after.slice(0, before.length).map((r) => r.id), before.map((r) => r.id));
    const [shown] = await auditApi(`action=DELETE_USER&resource_id=${user.id}`);
    assert.equal(shown!.actor_id, h.admin.id);
    assert.deepEqual(shown!.metadata, { email: user.email, role: 'USER' });
    // The email is still resolvable in older records too (deletion is not erasure).
    const [created] = await auditApi(`action=CREATE_USER&resource_id=${user.id}`);
    assert.deepEqual(created!.metadata, { email: user.email, role: 'USER' });

    assert.equal(await userRow(user.id), undefined);
    assert.equal((await h.server.owner.query('SELECT 1 FROM sessions WHERE user_id = $1', [user.id])).length, 0);
    for (const session of [user, second]) {
      const gone = await session.client.get('/api/v1/profile', { token: session.token });
      assert.equal(gone.status, 401);
    }
    const refresh = await user.client.post('/api/v1/auth/refresh', { refresh_token: user.refreshToken });
    assert.equal(refresh.status, 401);
    const lookup = await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token });
    assert.equal(lookup.status, 404);
    const twice = await h.admin.client.delete(`/api/v1/users/${user.id}`, { token: h.admin.token });
    assert.equal(twice.status, 404);
    assert.equal((await recordsOn(user.id, 'DELETE_USER')).length, 1);

    // The email is free again.
    const reuse = await h.admin.client.post('/api/v1/users', { email: user.email, name: 'Reborn', password: 'a-long-password-1' }, { token: h.admin.token });
    assert.equal(reuse.status, 201);
    assert.notEqual(reuse.body.id, user.id);
  });

  test('refuses a USER with 403 and one DENIED DELETE_USER record; the user stays', async () => {
    const me = await h.newUser();
    const other = await h.newUser();
    const res = await me.client.delete(`/api/v1/users/${other.id}`, { token: me.token });
    assert.equal(res.status, 403);
    assert.ok(await userRow(other.id));
    const records = await recordsOn(other.id, 'DELETE_USER');
    assert.equal(records.length, 1);
    assert.equal(records[0]!.result, 'DENIED');
    assert.equal(records[0]!.actor_id, me.id);
  });

  test('answers 404 for an unknown user and writes no record', async () => {
    const res = await h.admin.client.delete('/api/v1/users/987654321', { token: h.admin.token });
    assert.equal(res.status, 404);
    assert.equal((await auditRows(h.server, `action = 'DELETE_USER' AND resource_id = 987654321`)).length, 0);
  });

  test('refuses to delete the last active ADMIN with 409 LAST_ADMIN', async () => {
    await leaveOnlyFirstAdmin();
    const res = await h.admin.client.delete(`/api/v1/users/${h.admin.id}`, { token: h.admin.token });
    assert.equal(res.status, 409);
    assert.equal(res.body.code, 'LAST_ADMIN');
    assert.ok(await userRow(h.admin.id));
    assert.equal((await recordsOn(h.admin.id, 'DELETE_USER')).length, 0);
    const still = await h.admin.client.get('/api/v1/profile', { token: h.admin.token });
    assert.equal(still.status, 200);
    assert.equal(still.body.email, ADMIN_EMAIL);
  });

  test('lets an ADMIN delete another ADMIN while one active ADMIN remains', async () => {
    const other = await h.newUser({ role: 'ADMIN' });
    const res = await h.admin.client.delete(`/api/v1/users/${other.id}`, { token: h.admin.token });
    assert.equal(res.status, 204);
    const [shown] = await auditApi(`action=DELETE_USER&resource_id=${other.id}`);
    assert.deepEqual(shown!.metadata, { email: other.email, role: 'ADMIN' });
  });
});

// ── concurrency (PostgreSQL) ───────────────────────────────────────────────────────────

describe('the last-ADMIN guard under concurrency', () => {
  test('two ADMINs demoting each other at once: exactly one succeeds; the other, demoted in flight, is refused', { skip: needsPostgres }, async () => {
    await leaveOnlyFirstAdmin();
    const other = await h.newUser({ role: 'ADMIN' });
    assert.deepEqual(await activeAdminIds(), [h.admin.id, other.id].sort((a, b) => a - b));

    // Hold both rows so that both requests are authenticated and authorized (as ADMINs)
    // before either can change anything; then let them race.
    let racing: Promise<Array<{ status: number; text: string; body: { code?: string } }>> | undefined;
    await h.server.owner.transaction(async (tx) => {
      await tx.query('SELECT id FROM users WHERE id = ANY($1::bigint[]) FOR UPDATE', [[h.admin.id, other.id]]);
      racing = Promise.all([
        h.admin.client.put(`/api/v1/users/${other.id}/role`, { role: 'USER' }, { token: h.admin.token }),
        other.client.put(`/api/v1/users/${h.admin.id}/role`, { role: 'USER' }, { token: other.token }),
      ]);
      await waitForLockWaiters(2);
    });
    const outcome = await racing!;

    // Authorization is decided inside the transaction, on the locked rows (API.md 3): the two
    // requests queue on the same user rows, and the second finds its caller no longer an
    // ADMIN. (Deciding before the transaction let it pass as an ADMIN and fail on LAST_ADMIN.)
    const statuses = outcome.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 403], outcome.map((r) => r.text).join(' | '));
    const loser = outcome.find((r) => r.status === 403)!;
    assert.equal(loser.body.code, 'FORBIDDEN');
    const remaining = await activeAdminIds();
    assert.equal(remaining.length, 1);
    const changes = await auditRows(h.server, `action = 'CHANGE_USER_ROLE' AND resource_id = ANY($1::bigint[])`, [[h.admin.id, other.id]]);
    assert.deepEqual(changes.map((r) => r.result), ['SUCCESS', 'DENIED'], 'the change, then the refusal of the demoted caller');
    assert.equal(changes[1]!.actor_id, changes[0]!.resource_id, 'the refused caller is the one just demoted');

    // Restore the first ADMIN for whatever runs next.
    if (remaining[0] !== h.admin.id) {
      const restore = await other.client.put(`/api/v1/users/${h.admin.id}/role`, { role: 'ADMIN' }, { token: other.token });
      assert.equal(restore.status, 200);
    }
  });
});
