// Users (docs/api.md section 4 "Users"), creation and updates: POST /users and PUT /users/:id, and
// the audit records (and DENIED refusals) that each writes (section 5). Reading:
// users-read.test.ts; roles, the active flag and deletion: users-admin.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Client, auditRows, login } from './helpers/client.js';
import { uniqueWord, userRow } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { isPersonalRef, uniqueEmail, userChecks, type UserBody } from './helpers/users.js';

const h = useTestServer();

const { recordsOn, recordsNaming, auditApi } = userChecks(h);

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
    assert.equal((await userRow(h.server, id))!.email, typed.toLowerCase());

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
    // docs/api.md 5.3: a refused creation names the kind that would have been created, with no id.
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
    assert.equal((await userRow(h.server, me.id))!.name, 'After');
    assert.equal((await recordsNaming(me.id)).length, before);
  });

  test("refuses a USER changing someone else's name with 403 and changes nothing", async () => {
    const me = await h.newUser();
    const other = await h.newUser({ name: 'Untouched' });
    const res = await me.client.put(`/api/v1/users/${other.id}`, { name: 'Hijacked' }, { token: me.token });
    assert.equal(res.status, 403);
    assert.equal(res.body.code, 'FORBIDDEN');
    assert.equal((await userRow(h.server, other.id))!.name, 'Untouched');
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
    assert.equal((await userRow(h.server, other.id))!.email, other.email);
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
    assert.equal((await userRow(h.server, me.id))!.email, me.email);
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
    assert.equal((await userRow(h.server, me.id))!.email, typed.toLowerCase());

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
    assert.equal((await userRow(h.server, user.id))!.email, user.email);
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
    assert.equal((await userRow(h.server, user.id))!.name, 'Version 2');

    const staleEmail = await h.admin.client.put(`/api/v1/users/${user.id}`, { email: uniqueEmail() }, { token: h.admin.token, headers: { 'if-match': v1 } });
    assert.equal(staleEmail.status, 412);
    assert.equal((await userRow(h.server, user.id))!.email, user.email);
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
    const row = (await userRow(h.server, me.id))!;
    assert.equal(row.role, 'USER');
    assert.equal(row.name, 'Plain User');
    assert.equal(row.active, true);
  });

  test('answers 404 for an unknown user', async () => {
    const res = await h.admin.client.put('/api/v1/users/987654321', { name: 'Nobody' }, { token: h.admin.token });
    assert.equal(res.status, 404);
  });
});
