// Authentication and sessions (docs/api.md sections 2, 3 and the auth records of section 5):
// login, the brute-force throttle, refresh-token rotation with theft detection, logout,
// password change, and the client address recorded behind (or without) a trusted proxy.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { assertProblem, auditRows, Client, login, type Response } from './helpers/client.js';
import { apiRecord, countRows, recordsOf } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, needsPostgres, startTestServer } from './helpers/server.js';

const LOGIN = '/api/v1/auth/login';
const REFRESH = '/api/v1/auth/refresh';
const LOGOUT = '/api/v1/auth/logout';
const PASSWORD = '/api/v1/auth/password';
const PROFILE = '/api/v1/profile';

const h = useTestServer();

const requestIdOf = (res: Response) => {
  const id = res.headers.get('x-request-id');
  assert.ok(id, 'every response carries X-Request-Id');
  return id;
};
const attempt = (client: Client, email: string, password: string, headers?: Record<string, string>) =>
  client.post(LOGIN, { email, password }, { headers });
const wrongPassword = () => `wrong-${randomBytes(6).toString('hex')}`;
const unknownEmail = () => `nobody-${randomBytes(6).toString('hex')}@test.local`;

async function onlyRecordOf(res: Response) {
  const rows = await recordsOf(h.server, res);
  assert.equal(rows.length, 1, `exactly one audit record for ${requestIdOf(res)}, got ${JSON.stringify(rows)}`);
  return rows[0]!;
}



function assertNoStore(res: Response) {
  assert.equal(res.headers.get('cache-control'), 'no-store', `Cache-Control of ${res.status} ${res.text}`);
}

function assertRetryAfter(res: Response) {
  const value = res.headers.get('retry-after') ?? '';
  assert.match(value, /^\d+$/, `Retry-After is a whole number of seconds, got "${value}"`);
  const seconds = Number(value);
  assert.ok(seconds >= 1 && seconds <= 900, `Retry-After ${seconds} is within the 15-minute window`);
}

const countedFailures = (column: 'email' | 'ip', value: string) => countRows(h.server, `login_failures WHERE ${column} = $1`, [value]);

/** How many rows of audit_log and audit_personal_data contain `needle` anywhere in their text. */
async function rowsContaining(needle: string): Promise<number> {
  const rows = await h.server.owner.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM audit_log t WHERE strpos(t::text, $1) > 0)
          + (SELECT count(*) FROM audit_personal_data p WHERE strpos(p::text, $1) > 0) AS n`,
    [needle],
  );
  return Number(rows[0]!.n);
}

describe('login', () => {
  test('logs in with email and password, answers no-store, and records LOGIN_SUCCESS with the address, user agent and request id', async () => {
    const user = await h.newUser();
    const client = new Client(h.server);
    const res = await attempt(client, user.email, user.password, { 'user-agent': 'auth-test-agent/1.0' });
    assert.equal(res.status, 200, res.text);
    assertNoStore(res);
    assert.equal(res.body.token_type, 'Bearer');
    assert.equal(typeof res.body.access_token, 'string');
    assert.ok(res.body.access_token.length > 20);
    assert.equal(typeof res.body.refresh_token, 'string');
    assert.ok(res.body.refresh_token.length > 20);
    assert.equal(res.body.expires_in, h.server.config.accessTokenTtl);
    assert.ok(res.body.expires_in > 0);
    assert.equal(res.body.user.id, user.id);
    assert.equal(res.body.user.email, user.email);
    assert.equal(res.body.user.role, 'USER');
    assert.equal(res.body.user.active, true);
    assert.equal('password_hash' in res.body.user, false);

    const me = await client.get(PROFILE, { token: res.body.access_token });
    assert.equal(me.status, 200);
    assert.equal(me.body.id, user.id);

    const record = await onlyRecordOf(res);
    assert.equal(record.action, 'LOGIN_SUCCESS');
    assert.equal(record.result, 'SUCCESS');
    assert.equal(record.actor_id, user.id);
    assert.equal(record.resource_type, 'USER');
    assert.equal(record.resource_id, user.id);
    assert.equal(record.ip, client.ip);
    assert.equal(record.user_agent, 'auth-test-agent/1.0');
    assert.equal(record.request_id, res.headers.get('x-request-id'));
  });

  test('answers an unknown email and a wrong password with the same 401 INVALID_CREDENTIALS and records why each failed', async () => {
    const user = await h.newUser();
    const client = new Client(h.server);
    const ghost = unknownEmail();
    const unknown = await attempt(client, ghost, 'some-password-1');
    const wrong = await attempt(client, user.email, wrongPassword());

    for (const res of [unknown, wrong]) {
      assertProblem(res, 401, 'INVALID_CREDENTIALS');
      assertNoStore(res);
    }
    const comparable = (body: Record<string, unknown>) => {
      const { request_id: _r, instance: _i, ...rest } = body;
      return rest;
    };
    assert.deepEqual(comparable(unknown.body), comparable(wrong.body));
    assert.equal(unknown.headers.get('www-authenticate'), wrong.headers.get('www-authenticate'));

    const unknownRecord = await onlyRecordOf(unknown);
    assert.equal(unknownRecord.action, 'LOGIN_FAILURE');
    assert.equal(unknownRecord.result, 'FAILURE');
    assert.equal(unknownRecord.actor_id, null);
    assert.equal(unknownRecord.ip, client.ip);
    assert.deepEqual((await apiRecord(h.admin, unknownRecord.id)).metadata, { email: ghost, reason: 'unknown_email' });

    const wrongRecord = await onlyRecordOf(wrong);
    assert.equal(wrongRecord.action, 'LOGIN_FAILURE');
    assert.equal(wrongRecord.result, 'FAILURE');
    assert.equal(wrongRecord.actor_id, user.id);
    assert.equal(wrongRecord.resource_type, 'USER');
    assert.equal(wrongRecord.resource_id, user.id);
    assert.deepEqual((await apiRecord(h.admin, wrongRecord.id)).metadata, { email: user.email, reason: 'bad_password' });
  });

  test('never writes a typed password into the audit log or its personal data', async () => {
    const user = await h.newUser();
    const client = new Client(h.server);
    const typedWrong = `Typed-Secret-${randomBytes(8).toString('hex')}`;
    const typedForGhost = `Ghost-Secret-${randomBytes(8).toString('hex')}`;
    assert.equal((await attempt(client, user.email, typedWrong)).status, 401);
    assert.equal((await attempt(client, unknownEmail(), typedForGhost)).status, 401);
    const ok = await attempt(client, user.email, user.password);
    assert.equal(ok.status, 200);
    // The records exist (so the search below looks where they are) ...
    assert.equal((await recordsOf(h.server, ok)).length, 1);
    // ... and none of them, nor any personal-data row, holds a typed password.
    assert.equal(await rowsContaining(typedWrong), 0);
    assert.equal(await rowsContaining(typedForGhost), 0);
    assert.equal(await rowsContaining(user.password), 0);
    // The search itself works: the typed email is findable in the personal-data table.
    assert.ok((await rowsContaining(user.email)) > 0);
  });

  test('compares emails case-insensitively at login', async () => {
    const user = await h.newUser();
    const res = await attempt(new Client(h.server), user.email.toUpperCase(), user.password);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.user.id, user.id);
    assert.equal(res.body.user.email, user.email);
  });

  test('refuses a deactivated user with 403 ACCOUNT_DEACTIVATED only after the password verified', async () => {
    const user = await h.newUser();
    const off = await h.admin.client.put(`/api/v1/users/${user.id}/active`, { active: false }, { token: h.admin.token });
    assert.equal(off.status, 200, off.text);
    const client = new Client(h.server);

    const right = await attempt(client, user.email, user.password);
    assertProblem(right, 403, 'ACCOUNT_DEACTIVATED');
    assertNoStore(right);
    assert.equal(right.body.access_token, undefined);
    const rightRecord = await onlyRecordOf(right);
    assert.equal(rightRecord.action, 'LOGIN_FAILURE');
    assert.equal(rightRecord.result, 'FAILURE');
    assert.equal(rightRecord.actor_id, user.id);
    assert.deepEqual((await apiRecord(h.admin, rightRecord.id)).metadata, { email: user.email, reason: 'deactivated' });

    const wrong = await attempt(client, user.email, wrongPassword());
    assertProblem(wrong, 401, 'INVALID_CREDENTIALS');
    const wrongRecord = await onlyRecordOf(wrong);
    assert.deepEqual((await apiRecord(h.admin, wrongRecord.id)).metadata, { email: user.email, reason: 'bad_password' });
  });
});

describe('brute-force throttle', () => {
  test('locks an email after 5 counted failures: the 6th attempt, even with the right password and from elsewhere, gets 429 and is recorded as throttled', async () => {
    const user = await h.newUser();
    const attacker = new Client(h.server);
    for (let i = 0; i < 5; i++) assertProblem(await attempt(attacker, user.email, wrongPassword()), 401, 'INVALID_CREDENTIALS');

    const sixth = await attempt(new Client(h.server), user.email, user.password);
    assertProblem(sixth, 429, 'RATE_LIMITED');
    assertRetryAfter(sixth);
    assertNoStore(sixth);
    assert.equal(sixth.body.access_token, undefined);
    const record = await onlyRecordOf(sixth);
    assert.equal(record.action, 'LOGIN_FAILURE');
    assert.equal(record.result, 'FAILURE');
    assert.equal(record.actor_id, user.id);
    assert.deepEqual((await apiRecord(h.admin, record.id)).metadata, { email: user.email, reason: 'throttled' });

    // The lock is on that email: the same address may still log in as someone else.
    const other = await h.newUser();
    assert.equal((await attempt(attacker, other.email, other.password)).status, 200);
  });

  test('does not count throttled attempts, so hammering a locked email cannot extend the lock', async () => {
    const user = await h.newUser();
    const attacker = new Client(h.server);
    for (let i = 0; i < 5; i++) assert.equal((await attempt(attacker, user.email, wrongPassword())).status, 401);
    assert.equal(await countedFailures('email', user.email), 5);
    for (let i = 0; i < 4; i++) {
      const res = await attempt(attacker, user.email, i % 2 ? user.password : wrongPassword());
      assertProblem(res, 429, 'RATE_LIMITED');
      assertRetryAfter(res);
    }
    assert.equal(await countedFailures('email', user.email), 5);
    const throttled = await auditRows(h.server, `action = 'LOGIN_FAILURE' AND actor_id = $1`, [user.id]);
    assert.equal(throttled.length, 9, 'every attempt, throttled or not, is recorded');
  });

  test('locks an address after 20 failures across different emails while another address still logs in', async () => {
    const attacker = new Client(h.server);
    for (let i = 0; i < 20; i++) assertProblem(await attempt(attacker, unknownEmail(), wrongPassword()), 401, 'INVALID_CREDENTIALS');
    assert.equal(await countedFailures('ip', attacker.ip), 20);

    const user = await h.newUser();
    const locked = await attempt(attacker, user.email, user.password);
    assertProblem(locked, 429, 'RATE_LIMITED');
    assertRetryAfter(locked);
    const record = await onlyRecordOf(locked);
    assert.equal(record.action, 'LOGIN_FAILURE');
    assert.equal(record.ip, attacker.ip);
    assert.deepEqual((await apiRecord(h.admin, record.id)).metadata, { email: user.email, reason: 'throttled' });
    assert.equal(await countedFailures('ip', attacker.ip), 20);

    const elsewhere = await attempt(new Client(h.server), user.email, user.password);
    assert.equal(elsewhere.status, 200, elsewhere.text);
  });

  test('counts a wrong current_password on PUT /auth/password toward the email throttle', async () => {
    const user = await h.newUser();
    const bad = await user.client.put(PASSWORD, { current_password: wrongPassword(), new_password: 'another-password-1' }, { token: user.token });
    assertProblem(bad, 403, 'INVALID_CREDENTIALS');
    assert.equal(await countedFailures('email', user.email), 1);

    const guesser = new Client(h.server);
    for (let i = 0; i < 4; i++) assert.equal((await attempt(guesser, user.email, wrongPassword())).status, 401);
    const locked = await attempt(new Client(h.server), user.email, user.password);
    assertProblem(locked, 429, 'RATE_LIMITED');
    assertRetryAfter(locked);
  });

  test('lets at most 5 of 30 parallel wrong-password logins for one email count; the rest get 429', { skip: needsPostgres }, async () => {
    const user = await h.newUser();
    const results = await Promise.all(Array.from({ length: 30 }, () => attempt(new Client(h.server), user.email, wrongPassword())));
    const statuses = results.map((r) => r.status);
    const unauthorized = statuses.filter((s) => s === 401).length;
    const limited = statuses.filter((s) => s === 429).length;
    assert.equal(unauthorized + limited, 30, `only 401 and 429 answers, got ${statuses.join(',')}`);
    assert.ok(unauthorized >= 1 && unauthorized <= 5, `${unauthorized} counted failures`);
    assert.equal(await countedFailures('email', user.email), unauthorized);
    const recorded = await auditRows(h.server, `action = 'LOGIN_FAILURE' AND actor_id = $1`, [user.id]);
    assert.equal(recorded.length, 30);
    const locked = await attempt(new Client(h.server), user.email, user.password);
    assertProblem(locked, 429, 'RATE_LIMITED');
  });
});

describe('refresh tokens', () => {
  test('rotates: a refresh returns a new working pair and spends the presented refresh token', async () => {
    const user = await h.newUser();
    const res = await user.client.post(REFRESH, { refresh_token: user.refreshToken });
    assert.equal(res.status, 200, res.text);
    assertNoStore(res);
    assert.equal(res.body.token_type, 'Bearer');
    assert.equal(res.body.expires_in, h.server.config.accessTokenTtl);
    assert.notEqual(res.body.refresh_token, user.refreshToken);
    assert.notEqual(res.body.access_token, user.token);
    const me = await user.client.get(PROFILE, { token: res.body.access_token });
    assert.equal(me.status, 200);
    assert.equal(me.body.id, user.id);
    const next = await user.client.post(REFRESH, { refresh_token: res.body.refresh_token });
    assert.equal(next.status, 200, 'the new refresh token works once');
    const spent = await user.client.post(REFRESH, { refresh_token: user.refreshToken });
    assertProblem(spent, 401, 'TOKEN_REVOKED');
  });

  test('treats a spent refresh token presented again as theft: revokes the whole session and records one SESSION_REVOKED', async () => {
    const user = await h.newUser();
    const other = await login(h.server, user.email, user.password);
    const rotated = await user.client.post(REFRESH, { refresh_token: user.refreshToken });
    assert.equal(rotated.status, 200);
    const { access_token: newestAccess, refresh_token: newestRefresh } = rotated.body;

    const thief = new Client(h.server);
    const reuse = await thief.post(REFRESH, { refresh_token: user.refreshToken });
    assertProblem(reuse, 401, 'TOKEN_REVOKED');
    assertNoStore(reuse);

    // The whole session ends at once: its newest access and refresh tokens stop working.
    assertProblem(await user.client.get(PROFILE, { token: newestAccess }), 401, 'TOKEN_REVOKED');
    assertProblem(await user.client.post(REFRESH, { refresh_token: newestRefresh }), 401, 'TOKEN_REVOKED');
    assertProblem(await thief.post(REFRESH, { refresh_token: user.refreshToken }), 401, 'TOKEN_REVOKED');
    // Another session of the same user is untouched.
    assert.equal((await other.client.get(PROFILE, { token: other.token })).status, 200);

    const records = await auditRows(h.server, `action = 'SESSION_REVOKED' AND resource_id = $1`, [user.id]);
    assert.equal(records.length, 1, 'one SESSION_REVOKED, however often the spent token comes back');
    const record = records[0]!;
    assert.equal(record.request_id, reuse.headers.get('x-request-id'));
    assert.equal(record.actor_id, user.id);
    assert.equal(record.resource_type, 'USER');
    assert.equal(record.result, 'SUCCESS');
    assert.equal(record.metadata.reason, 'refresh_reuse');
  });

  test('answers a garbage refresh token with 401 and records nothing', async () => {
    const client = new Client(h.server);
    for (const token of [`tlr_${randomBytes(32).toString('base64url')}`, 'garbage']) {
      const res = await client.post(REFRESH, { refresh_token: token });
      assert.equal(res.status, 401, res.text);
      assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assertNoStore(res);
      assert.equal((await recordsOf(h.server, res)).length, 0);
    }
    // A malformed token is refused like an unknown one (docs/api.md 3), not as a validation error:
    // it is a credential, and the only true thing to say about it is that it is not valid.
    for (const token of ['not a token!', 'tlr_\u0000', 'x'.repeat(1024)]) {
      const malformed = await client.post(REFRESH, { refresh_token: token });
      assertProblem(malformed, 401, 'UNAUTHENTICATED');
      assert.equal(malformed.body.detail, 'The refresh token is not valid');
      assert.equal((await recordsOf(h.server, malformed)).length, 0);
    }
    // Only what no token can be is a validation error, and its message says what is wrong.
    const empty = await client.post(REFRESH, { refresh_token: '' });
    assertProblem(empty, 400, 'VALIDATION_FAILED');
    assert.equal(empty.body.detail, 'refresh_token must not be empty');
    const huge = await client.post(REFRESH, { refresh_token: 'x'.repeat(1025) });
    assertProblem(huge, 400, 'VALIDATION_FAILED');
    assert.equal(huge.body.detail, 'refresh_token must have at most 1024 characters');
  });
});

describe('logout', () => {
  test("ends this session's access and refresh tokens at once, keeps the user's other sessions, and records LOGOUT", async () => {
    const user = await h.newUser();
    const other = await login(h.server, user.email, user.password);

    const res = await user.client.post(LOGOUT, undefined, { token: user.token });
    assert.equal(res.status, 204, res.text);
    assert.equal(res.text, '');
    assertNoStore(res);

    assertProblem(await user.client.get(PROFILE, { token: user.token }), 401, 'TOKEN_REVOKED');
    assertProblem(await user.client.post(LOGOUT, undefined, { token: user.token }), 401, 'TOKEN_REVOKED');
    const refresh = await user.client.post(REFRESH, { refresh_token: user.refreshToken });
    assert.equal(refresh.status, 401, refresh.text);

    assert.equal((await other.client.get(PROFILE, { token: other.token })).status, 200);
    assert.equal((await other.client.post(REFRESH, { refresh_token: other.refreshToken })).status, 200);

    const record = await onlyRecordOf(res);
    assert.equal(record.action, 'LOGOUT');
    assert.equal(record.result, 'SUCCESS');
    assert.equal(record.actor_id, user.id);
    assert.equal(record.resource_type, 'USER');
    assert.equal(record.resource_id, user.id);
    assert.equal(record.ip, user.client.ip);
  });

  test('refuses a logout without a token with 401 and records nothing', async () => {
    const res = await new Client(h.server).post(LOGOUT);
    assertProblem(res, 401, 'UNAUTHENTICATED');
    assert.equal((await recordsOf(h.server, res)).length, 0);
  });
});

describe('password change', () => {
  test('changes the password: other sessions are revoked at once, this one keeps working, and only the new password logs in', async () => {
    const user = await h.newUser();
    const other = await login(h.server, user.email, user.password);
    const newPassword = `new-password-${randomBytes(4).toString('hex')}`;

    const res = await user.client.put(PASSWORD, { current_password: user.password, new_password: newPassword }, { token: user.token });
    assert.equal(res.status, 204, res.text);
    assertNoStore(res);

    assertProblem(await other.client.get(PROFILE, { token: other.token }), 401, 'TOKEN_REVOKED');
    assert.equal((await other.client.post(REFRESH, { refresh_token: other.refreshToken })).status, 401);
    assert.equal((await user.client.get(PROFILE, { token: user.token })).status, 200);
    assert.equal((await user.client.post(REFRESH, { refresh_token: user.refreshToken })).status, 200);

    assertProblem(await attempt(new Client(h.server), user.email, user.password), 401, 'INVALID_CREDENTIALS');
    const fresh = await attempt(new Client(h.server), user.email, newPassword);
    assert.equal(fresh.status, 200, fresh.text);

    const record = await onlyRecordOf(res);
    assert.equal(record.action, 'PASSWORD_CHANGED');
    assert.equal(record.result, 'SUCCESS');
    assert.equal(record.actor_id, user.id);
    assert.equal(record.resource_type, 'USER');
    assert.equal(record.resource_id, user.id);
    assert.equal(await rowsContaining(newPassword), 0);
    assert.equal(await rowsContaining(user.password), 0);
  });

  test('refuses a wrong current_password with 403 INVALID_CREDENTIALS, records a DENIED PASSWORD_CHANGED and changes nothing', async () => {
    const user = await h.newUser();
    const other = await login(h.server, user.email, user.password);
    const typed = `Typed-Current-${randomBytes(6).toString('hex')}`;
    const res = await user.client.put(PASSWORD, { current_password: typed, new_password: 'never-applied-password' }, { token: user.token });
    assertProblem(res, 403, 'INVALID_CREDENTIALS');
    assertNoStore(res);

    const record = await onlyRecordOf(res);
    assert.equal(record.action, 'PASSWORD_CHANGED');
    assert.equal(record.result, 'DENIED');
    assert.equal(record.actor_id, user.id);
    assert.equal(record.resource_type, 'USER');
    assert.equal(record.resource_id, user.id);
    assert.equal(await rowsContaining(typed), 0);
    assert.equal(await rowsContaining('never-applied-password'), 0);

    assert.equal((await other.client.get(PROFILE, { token: other.token })).status, 200);
    assert.equal((await attempt(new Client(h.server), user.email, user.password)).status, 200);
    assert.equal((await attempt(new Client(h.server), user.email, 'never-applied-password')).status, 401);
  });

  test('rejects a new_password shorter than 10 characters with 400 and records nothing', async () => {
    const user = await h.newUser();
    const res = await user.client.put(PASSWORD, { current_password: user.password, new_password: 'short-pw1' }, { token: user.token });
    assertProblem(res, 400, 'VALIDATION_FAILED');
    assert.ok(res.body.errors.some((e: { field: string }) => e.field === '/new_password'), res.text);
    assert.equal((await recordsOf(h.server, res)).length, 0);
    assert.equal((await attempt(new Client(h.server), user.email, user.password)).status, 200);
    assert.equal((await attempt(new Client(h.server), user.email, 'short-pw1')).status, 401);
  });
});

describe('client address', () => {
  test('records the X-Forwarded-For address behind a trusted proxy, and the socket address when TRUST_PROXY is empty', async () => {
    const viaProxy = new Client(h.server);
    const trusted = await attempt(viaProxy, ADMIN_EMAIL, ADMIN_PASSWORD);
    assert.equal(trusted.status, 200);
    assert.equal((await onlyRecordOf(trusted)).ip, viaProxy.ip);

    const direct = await startTestServer({ env: { TRUST_PROXY: '' } });
    try {
      const client = new Client(direct);
      const res = await attempt(client, ADMIN_EMAIL, ADMIN_PASSWORD);
      assert.equal(res.status, 200, res.text);
      const rows = await auditRows(direct, 'request_id = $1', [requestIdOf(res)]);
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.action, 'LOGIN_SUCCESS');
      assert.equal(rows[0]!.ip, '127.0.0.1');
      assert.notEqual(rows[0]!.ip, client.ip);
    } finally {
      await direct.close();
    }
  });
});
