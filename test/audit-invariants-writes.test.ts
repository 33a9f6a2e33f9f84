// The audit log's invariants (docs/api.md section 5), attacked one by one, as written: in the same
// transaction as the change (both roll back together), one record per action with its
// request's context, and personal data kept apart so that it can be erased without touching a
// record. As stored: audit-invariants-storage.test.ts.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { Client, auditCount, auditRows, login, maxAuditId, type Response } from './helpers/client.js';
import { userRow } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';

const h = useTestServer();

const FAIL_FN = 'test_forced_failure';

h.before(async () => {
  // A trigger function the tests attach (and detach) to force a failure at a chosen step.
  await h.server.owner.exec(
    `CREATE FUNCTION ${FAIL_FN}() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN RAISE EXCEPTION 'forced failure for a test'; END $$`,
  );
});

/** Runs fn with a test-only trigger that raises, then drops the trigger whatever happens. */
let sabotageSeq = 0;
async function withSabotage(table: string, timing: string, when: string, fn: () => Promise<void>): Promise<void> {
  const name = `test_sabotage_${++sabotageSeq}`;
  await h.server.owner.exec(`CREATE TRIGGER ${name} ${timing} ON ${table} FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION ${FAIL_FN}()`);
  try {
    await fn();
  } finally {
    await h.server.owner.exec(`DROP TRIGGER ${name} ON ${table}`);
  }
}

/** A 500 that is a proper problem document and gives nothing away. */
function assertInternalProblem(res: Response): void {
  assert.equal(res.status, 500, res.text);
  assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(res.body.code, 'INTERNAL');
  assert.equal(res.body.request_id, res.headers.get('x-request-id'));
  assert.doesNotMatch(res.text, /forced failure|audit_log|test_sabotage|plpgsql|\bINSERT\b|\bDELETE FROM\b|\bUPDATE\b|\bSELECT\b/);
  assert.doesNotMatch(res.text, /stack|\.ts:\d+|\.js:\d+|\n\s+at /);
}

describe('same transaction as the change', () => {
  test('a failing DELETE_USER record rolls the deletion back: 500, the user still exists and logs in, no record', async () => {
    const user = await h.newUser();
    const before = await auditCount(h.server);
    await withSabotage('audit_log', 'BEFORE INSERT', `NEW.action = 'DELETE_USER'`, async () => {
      const res = await h.admin.client.delete(`/api/v1/users/${user.id}`, { token: h.admin.token });
      assertInternalProblem(res);
    });
    assert.equal(await auditCount(h.server), before);
    assert.equal((await auditRows(h.server, `action = 'DELETE_USER' AND resource_id = $1`, [user.id])).length, 0);
    assert.ok(await userRow(h.server, user.id), 'the user row is still there');
    const again = await login(h.server, user.email, user.password);
    assert.equal(again.id, user.id);
    const me = await user.client.get('/api/v1/profile', { token: user.token });
    assert.equal(me.status, 200, 'the old session was not deleted either');
  });

  test('a failing CREATE_USER record rolls the creation back: 500, no user row, no record, no personal data', async () => {
    const email = `rollback-${randomUUID()}@test.local`;
    const before = await auditCount(h.server);
    await withSabotage('audit_log', 'BEFORE INSERT', `NEW.action = 'CREATE_USER'`, async () => {
      const res = await h.admin.client.post('/api/v1/users', { email, name: 'Never', password: 'password-never-1' }, { token: h.admin.token });
      assertInternalProblem(res);
    });
    assert.equal(await auditCount(h.server), before);
    assert.equal((await h.server.owner.query('SELECT 1 FROM users WHERE email = $1', [email])).length, 0);
    assert.equal((await h.server.owner.query('SELECT 1 FROM audit_personal_data WHERE value = $1', [email])).length, 0);
    const res = await new Client(h.server).post('/api/v1/auth/login', { email, password: 'password-never-1' });
    assert.equal(res.status, 401);
    // Without the sabotage the same request succeeds: the failure was the audit record's.
    const ok = await h.admin.client.post('/api/v1/users', { email, name: 'Now', password: 'password-never-1' }, { token: h.admin.token });
    assert.equal(ok.status, 201, ok.text);
  });

  test('a failing CHANGE_USER_ROLE record rolls the role change back: 500, role and version unchanged, no record', async () => {
    const user = await h.newUser();
    const beforeRow = await userRow(h.server, user.id);
    const before = await auditCount(h.server);
    await withSabotage('audit_log', 'BEFORE INSERT', `NEW.action = 'CHANGE_USER_ROLE'`, async () => {
      const res = await h.admin.client.put(`/api/v1/users/${user.id}/role`, { role: 'ADMIN' }, { token: h.admin.token });
      assertInternalProblem(res);
    });
    assert.equal(await auditCount(h.server), before);
    assert.deepEqual(await userRow(h.server, user.id), beforeRow);
    const seen = await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token });
    assert.equal(seen.body.role, 'USER');
    const denied = await user.client.get('/api/v1/audit-logs', { token: user.token });
    assert.equal(denied.status, 403, 'the user did not become an ADMIN');
  });

  test('a failing deletion leaves no DELETE_USER record', async () => {
    const user = await h.newUser();
    const before = await auditCount(h.server);
    await withSabotage('users', 'BEFORE DELETE', `OLD.id = ${Number(user.id)}`, async () => {
      const res = await h.admin.client.delete(`/api/v1/users/${user.id}`, { token: h.admin.token });
      assertInternalProblem(res);
    });
    assert.equal(await auditCount(h.server), before);
    assert.equal((await auditRows(h.server, `action = 'DELETE_USER' AND resource_id = $1`, [user.id])).length, 0);
    assert.ok(await userRow(h.server, user.id));
  });

  test('a failing role change leaves no CHANGE_USER_ROLE record', async () => {
    const user = await h.newUser();
    const before = await auditCount(h.server);
    await withSabotage('users', 'BEFORE UPDATE', `OLD.id = ${Number(user.id)}`, async () => {
      const res = await h.admin.client.put(`/api/v1/users/${user.id}/role`, { role: 'ADMIN' }, { token: h.admin.token });
      assertInternalProblem(res);
    });
    assert.equal(await auditCount(h.server), before);
    assert.equal((await auditRows(h.server, `action = 'CHANGE_USER_ROLE' AND resource_id = $1`, [user.id])).length, 0);
    assert.equal((await userRow(h.server, user.id))!.role, 'USER');
  });
});

describe('one record per action', () => {
  test('each successful audited action writes exactly one record carrying its ip, user agent and request id', async () => {
    const stranger = new Client(h.server);
    const email = `once-${randomUUID()}@test.local`;
    const password = 'password-once-1';
    let userId = 0;
    let userToken = '';
    let projectId = 0;

    /** Sends one request with its own request id and user agent; expects `records` new records. */
    async function step(
      name: string,
      client: Client,
      send: (headers: Record<string, string>) => Promise<Response>,
      status: number,
      expected: { action: string; result?: string; actorId?: () => number | null; resourceId?: () => number | null } | null,
      opts: { givenRequestId?: boolean } = {},
    ): Promise<Response> {
      const requestId = `req-${randomUUID()}`;
      const userAgent = `audit-invariants/${name}`;
      const headers: Record<string, string> = { 'user-agent': userAgent };
      if (opts.givenRequestId !== false) headers['x-request-id'] = requestId;
      const countBefore = await auditCount(h.server);
      const idBefore = await maxAuditId(h.server);
      const res = await send(headers);
      assert.equal(res.status, status, `${name}: ${res.text}`);
      const rows = await auditRows(h.server, 'id > $1', [idBefore]);
      assert.equal(await auditCount(h.server), countBefore + (expected ? 1 : 0), `${name}: record count`);
      if (!expected) {
        assert.equal(rows.length, 0, `${name}: no record`);
        return res;
      }
      assert.equal(rows.length, 1, `${name}: exactly one record`);
      const row = rows[0]!;
      assert.equal(row.action, expected.action, name);
      assert.equal(row.result, expected.result ?? 'SUCCESS', name);
      if (expected.actorId) assert.equal(row.actor_id, expected.actorId(), `${name}: actor`);
      if (expected.resourceId) assert.equal(row.resource_id, expected.resourceId(), `${name}: resource`);
      assert.equal(row.ip, client.ip, `${name}: ip`);
      assert.equal(row.user_agent, userAgent, `${name}: user agent`);
      assert.equal(row.request_id, res.headers.get('x-request-id'), `${name}: request id matches X-Request-Id`);
      if (opts.givenRequestId !== false) assert.equal(row.request_id, requestId, `${name}: the caller's request id`);
      else assert.match(row.request_id, /^[0-9a-f-]{36}$/, `${name}: a generated request id`);
      return res;
    }

    const a = h.admin.client;
    const adminId = () => h.admin.id;
    const uid = () => userId;

    const created = await step('create', a, (headers) => a.post('/api/v1/users', { email, name: 'Once', password }, { token: h.admin.token, headers }), 201,
      { action: 'CREATE_USER', actorId: adminId });
    userId = created.body.id;
    await step('create-again', a, (headers) => a.post('/api/v1/users', { email, name: 'Twice', password }, { token: h.admin.token, headers }), 409, null);
    await step('create-invalid', a, (headers) => a.post('/api/v1/users', { email: 'x', name: '', password: 'short' }, { token: h.admin.token, headers }), 400, null);
    const loggedIn = await step('login', stranger, (headers) => stranger.post('/api/v1/auth/login', { email, password }, { headers }), 200,
      { action: 'LOGIN_SUCCESS', actorId: uid, resourceId: uid }, { givenRequestId: false });
    userToken = loggedIn.body.access_token;
    await step('login-failure', stranger, (headers) => stranger.post('/api/v1/auth/login', { email, password: 'wrong-password-1' }, { headers }), 401,
      { action: 'LOGIN_FAILURE', result: 'FAILURE', actorId: uid, resourceId: uid });
    await step('refused-role-change', stranger, (headers) => stranger.put(`/api/v1/users/${h.admin.id}/role`, { role: 'USER' }, { token: userToken, headers }), 403,
      { action: 'CHANGE_USER_ROLE', result: 'DENIED', actorId: uid, resourceId: adminId });
    await step('promote', a, (headers) => a.put(`/api/v1/users/${userId}/role`, { role: 'ADMIN' }, { token: h.admin.token, headers }), 200,
      { action: 'CHANGE_USER_ROLE', actorId: adminId, resourceId: uid });
    await step('promote-again', a, (headers) => a.put(`/api/v1/users/${userId}/role`, { role: 'ADMIN' }, { token: h.admin.token, headers }), 200, null);
    await step('demote', a, (headers) => a.put(`/api/v1/users/${userId}/role`, { role: 'USER' }, { token: h.admin.token, headers }), 200,
      { action: 'CHANGE_USER_ROLE', actorId: adminId, resourceId: uid }, { givenRequestId: false });
    await step('deactivate', a, (headers) => a.put(`/api/v1/users/${userId}/active`, { active: false }, { token: h.admin.token, headers }), 200,
      { action: 'DEACTIVATE_USER', actorId: adminId, resourceId: uid });
    await step('activate', a, (headers) => a.put(`/api/v1/users/${userId}/active`, { active: true }, { token: h.admin.token, headers }), 200,
      { action: 'ACTIVATE_USER', actorId: adminId, resourceId: uid });
    const newEmail = `renamed-${randomUUID()}@test.local`;
    await step('change-email', a, (headers) => a.put(`/api/v1/users/${userId}`, { email: newEmail }, { token: h.admin.token, headers }), 200,
      { action: 'UPDATE_USER_EMAIL', actorId: adminId, resourceId: uid });
    await step('same-email', a, (headers) => a.put(`/api/v1/users/${userId}`, { email: newEmail }, { token: h.admin.token, headers }), 200, null);
    const relogged = await step('login-again', stranger, (headers) => stranger.post('/api/v1/auth/login', { email: newEmail, password }, { headers }), 200,
      { action: 'LOGIN_SUCCESS', actorId: uid, resourceId: uid });
    userToken = relogged.body.access_token;
    await step('password', stranger, (headers) => stranger.put('/api/v1/auth/password', { current_password: password, new_password: 'password-once-2' }, { token: userToken, headers }), 204,
      { action: 'PASSWORD_CHANGED', actorId: uid, resourceId: uid });
    const project = await step('project', stranger, (headers) => stranger.post('/api/v1/projects', { name: 'Once' }, { token: userToken, headers }), 201,
      { action: 'CREATE_PROJECT', actorId: uid });
    projectId = project.body.id;
    await step('logout', stranger, (headers) => stranger.post('/api/v1/auth/logout', undefined, { token: userToken, headers }), 204,
      { action: 'LOGOUT', actorId: uid, resourceId: uid });
    await step('delete-project', a, (headers) => a.delete(`/api/v1/projects/${projectId}`, { token: h.admin.token, headers }), 204,
      { action: 'DELETE_PROJECT', actorId: adminId, resourceId: () => projectId });
    await step('delete', a, (headers) => a.delete(`/api/v1/users/${userId}`, { token: h.admin.token, headers }), 204,
      { action: 'DELETE_USER', actorId: adminId, resourceId: uid });
    await step('delete-again', a, (headers) => a.delete(`/api/v1/users/${userId}`, { token: h.admin.token, headers }), 404, null);
  });

  test('twenty parallel user creations produce exactly twenty CREATE_USER records', { skip: needsPostgres }, async () => {
    const before = await maxAuditId(h.server);
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        h.admin.client.post(
          '/api/v1/users',
          { email: `parallel-${i}-${randomUUID()}@test.local`, name: `Parallel ${i}`, password: 'password-parallel' },
          { token: h.admin.token, headers: { 'x-request-id': `parallel-${i}` } },
        ),
      ),
    );
    for (const res of responses) assert.equal(res.status, 201, res.text);
    const ids = responses.map((r) => r.body.id as number).sort((x, y) => x - y);
    const rows = await auditRows(h.server, 'id > $1', [before]);
    assert.equal(rows.length, 20);
    assert.ok(rows.every((r) => r.action === 'CREATE_USER' && r.actor_id === h.admin.id && r.result === 'SUCCESS'));
    assert.deepEqual(rows.map((r) => r.resource_id!).sort((x, y) => x - y), ids);
    assert.deepEqual(rows.map((r) => r.request_id).sort(), Array.from({ length: 20 }, (_, i) => `parallel-${i}`).sort());
  });
});

describe('personal data', () => {
  const isRef = (v: unknown): boolean =>
    typeof v === 'object' && v !== null && Object.keys(v).length === 1 && /^[0-9a-f]{64}$/.test(String((v as Record<string, unknown>).$personal));
  const refOf = (v: unknown): string => (v as { $personal: string }).$personal;

  test('emails are stored apart from records, shown by the API, and shown as "[redacted]" once erased, with the records untouched', async () => {
    const email = `personal-${randomUUID()}@test.local`;
    const created = await h.admin.client.post('/api/v1/users', { email, name: 'Personal', password: 'password-personal' }, { token: h.admin.token });
    assert.equal(created.status, 201, created.text);
    const userId: number = created.body.id;
    const newEmail = `personal-new-${randomUUID()}@test.local`;
    const changed = await h.admin.client.put(`/api/v1/users/${userId}`, { email: newEmail }, { token: h.admin.token });
    assert.equal(changed.status, 200, changed.text);

    const [create] = await auditRows(h.server, `action = 'CREATE_USER' AND resource_id = $1`, [userId]);
    const [update] = await auditRows(h.server, `action = 'UPDATE_USER_EMAIL' AND resource_id = $1`, [userId]);
    assert.ok(create && update);
    assert.ok(isRef(create.metadata.email), JSON.stringify(create.metadata));
    assert.equal(create.metadata.role, 'USER');
    assert.ok(isRef(update.metadata.oldEmail) && isRef(update.metadata.newEmail), JSON.stringify(update.metadata));
    // Each value written has a ref (and a row) of its own, even the same email of the same user,
    // so that an erased value never comes back with a later record (test/redaction.test.ts).
    assert.notEqual(refOf(create.metadata.email), refOf(update.metadata.oldEmail));
    // The value appears nowhere in the records themselves.
    for (const value of [email, newEmail]) {
      const leaks = await h.server.owner.query('SELECT id FROM audit_log a WHERE position($1 in a::text) > 0', [value]);
      assert.equal(leaks.length, 0, `${value} is not stored in audit_log`);
    }
    const stored = await h.server.owner.query<{ ref: string; value: string; subject_user_id: number }>(
      'SELECT ref, value, subject_user_id FROM audit_personal_data WHERE ref = ANY($1) ORDER BY value',
      [[refOf(create.metadata.email), refOf(update.metadata.oldEmail), refOf(update.metadata.newEmail)]],
    );
    assert.deepEqual(
      Object.fromEntries(stored.map((r) => [r.ref, [r.value, r.subject_user_id]])),
      {
        [refOf(create.metadata.email)]: [email, userId],
        [refOf(update.metadata.oldEmail)]: [email, userId],
        [refOf(update.metadata.newEmail)]: [newEmail, userId],
      },
    );

    const shown = await h.admin.client.get(`/api/v1/audit-logs/${create.id}`, { token: h.admin.token });
    assert.equal(shown.status, 200);
    assert.deepEqual(shown.body.metadata, { email, role: 'USER' });
    const shownUpdate = await h.admin.client.get(`/api/v1/audit-logs/${update.id}`, { token: h.admin.token });
    assert.deepEqual(shownUpdate.body.metadata, { oldEmail: email, newEmail });

    const rowsBefore = await h.server.owner.query<{ r: string }>('SELECT a::text AS r FROM audit_log a WHERE id = ANY($1) ORDER BY id', [[create.id, update.id]]);
    // Erasure, as `teamlog audit redact --user <id>` does it: the values go, the records stay.
    await h.server.owner.query('DELETE FROM audit_personal_data WHERE subject_user_id = $1', [userId]);
    const rowsAfter = await h.server.owner.query<{ r: string }>('SELECT a::text AS r FROM audit_log a WHERE id = ANY($1) ORDER BY id', [[create.id, update.id]]);
    assert.deepEqual(rowsAfter, rowsBefore);

    const redacted = await h.admin.client.get(`/api/v1/audit-logs/${create.id}`, { token: h.admin.token });
    assert.deepEqual(redacted.body.metadata, { email: '[redacted]', role: 'USER' });
    const list = await h.admin.client.get(`/api/v1/audit-logs?resource_type=USER&resource_id=${userId}&action=UPDATE_USER_EMAIL`, { token: h.admin.token });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.data.map((r: { metadata: unknown }) => r.metadata), [{ oldEmail: '[redacted]', newEmail: '[redacted]' }]);
  });

  test('a failed login keeps the typed email apart too, and never the typed password', async () => {
    const email = `nobody-${randomUUID()}@test.local`;
    const typedPassword = `typed-${randomUUID()}`;
    const client = new Client(h.server);
    const res = await client.post('/api/v1/auth/login', { email, password: typedPassword });
    assert.equal(res.status, 401);
    const rows = await auditRows(h.server, `action = 'LOGIN_FAILURE' AND ip = $1`, [client.ip]);
    assert.equal(rows.length, 1);
    const row = rows[0]!;
    assert.equal(row.actor_id, null);
    assert.equal(row.metadata.reason, 'unknown_email');
    assert.ok(isRef(row.metadata.email), JSON.stringify(row.metadata));
    const leaks = await h.server.owner.query('SELECT id FROM audit_log a WHERE position($1 in a::text) > 0 OR position($2 in a::text) > 0', [email, typedPassword]);
    assert.equal(leaks.length, 0);
    const personal = await h.server.owner.query('SELECT 1 FROM audit_personal_data WHERE value = $1', [typedPassword]);
    assert.equal(personal.length, 0, 'the password is not personal data to keep either');
    const stored = await h.server.owner.query<{ value: string; subject_user_id: number | null }>(
      'SELECT value, subject_user_id FROM audit_personal_data WHERE ref = $1',
      [refOf(row.metadata.email)],
    );
    assert.deepEqual(stored, [{ value: email, subject_user_id: null }]);
    const shown = await h.admin.client.get(`/api/v1/audit-logs/${row.id}`, { token: h.admin.token });
    assert.deepEqual(shown.body.metadata, { email, reason: 'unknown_email' });
  });
});
