// Profile (docs/api.md section 4 "Profile"): the caller's own user, a name change, and their
// own security log (section 5 records about their account, personal data resolved).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { Client, auditRows, login, type Session } from './helpers/client.js';
import { allPages, type PageBody, type AuditRecordBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();

interface UserBody {
  id: number;
  email?: string;
  name: string;
  role: string;
  active: boolean;
  created_at: string;
  updated_at: string;
}

const SECURITY_ACTIONS = ['LOGIN_SUCCESS', 'LOGIN_FAILURE', 'LOGOUT', 'PASSWORD_CHANGED', 'SESSION_REVOKED', 'UPDATE_USER_EMAIL'];

/** Every audit record that names a user as actor or resource. */
const recordsNaming = (userId: number) => auditRows(h.server, '(actor_id = $1 OR (resource_type = $2 AND resource_id = $1))', [userId, 'USER']);

/** Every record of a user's security log, `limit` to a page. */
const wholeSecurityLog = (session: Session, limit = 100) => allPages<AuditRecordBody>(session, `/api/v1/profile/security-log?limit=${limit}`);

describe('GET /profile', () => {
  test('shows the caller their own user, with their email, an ETag and 304 on a matching If-None-Match', async () => {
    const me = await h.newUser({ name: 'Profile Owner' });
    const res = await me.client.get<UserBody>('/api/v1/profile', { token: me.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.id, me.id);
    assert.equal(res.body.email, me.email);
    assert.equal(res.body.name, 'Profile Owner');
    assert.equal(res.body.role, 'USER');
    assert.equal(res.body.active, true);
    assert.ok(!('password_hash' in res.body));
    assert.equal(res.headers.get('cache-control'), 'private, no-cache');
    const etag = res.headers.get('etag');
    assert.ok(etag && /^"[^"]+"$/.test(etag), `a strong ETag: ${etag}`);

    const again = await me.client.get('/api/v1/profile', { token: me.token, headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    assert.equal(again.text, '');

    // The profile and the user resource are the same representation, with the same ETag.
    const asUser = await me.client.get('/api/v1/users/' + me.id, { token: me.token });
    assert.equal(asUser.headers.get('etag'), etag);
  });

  test('requires authentication', async () => {
    const res = await new Client(h.server).get('/api/v1/profile');
    assert.equal(res.status, 401);
    assert.equal(res.body.code, 'UNAUTHENTICATED');
  });
});

describe('PUT /profile', () => {
  test('changes the caller\'s name and writes no audit record', async () => {
    const me = await h.newUser({ name: 'Old Name' });
    const before = await recordsNaming(me.id);
    const res = await me.client.put<UserBody>('/api/v1/profile', { name: 'New Name' }, { token: me.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.name, 'New Name');
    assert.equal(res.body.email, me.email);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const fetched = await me.client.get<UserBody>('/api/v1/profile', { token: me.token });
    assert.equal(fetched.body.name, 'New Name');
    const seenByAdmin = await h.admin.client.get<UserBody>(`/api/v1/users/${me.id}`, { token: h.admin.token });
    assert.equal(seenByAdmin.body.name, 'New Name');
    assert.deepEqual((await recordsNaming(me.id)).map((r) => r.id), before.map((r) => r.id));
  });

  test('rejects role and other unknown fields with 400 and changes nothing', async () => {
    const me = await h.newUser({ name: 'Steady' });
    const bodies: Array<Record<string, unknown>> = [
      { name: 'Steady', role: 'ADMIN' },
      { role: 'ADMIN' },
      { name: 'Steady', email: `other-${randomBytes(4).toString('hex')}@test.local` },
      { name: 'Steady', active: false },
      { name: 'Steady', id: 1 },
      {},
      { name: '' },
      { name: '   ' },
      { name: 'x'.repeat(101) },
      { name: 7 },
    ];
    for (const body of bodies) {
      const res = await me.client.put('/api/v1/profile', body, { token: me.token });
      assert.equal(res.status, 400, `${JSON.stringify(body)} → ${res.status} ${res.text}`);
      assert.equal(res.body.code, 'VALIDATION_FAILED');
    }
    const after = await me.client.get<UserBody>('/api/v1/profile', { token: me.token });
    assert.equal(after.body.role, 'USER');
    assert.equal(after.body.email, me.email);
    assert.equal(after.body.name, 'Steady');
    assert.equal(after.body.active, true);
  });

  test('answers 412 to a stale If-Match and keeps the name; the current ETag succeeds; the same name keeps the ETag', async () => {
    const me = await h.newUser({ name: 'First' });
    const v1 = (await me.client.get('/api/v1/profile', { token: me.token })).headers.get('etag')!;
    const second = await me.client.put('/api/v1/profile', { name: 'Second' }, { token: me.token, headers: { 'if-match': v1 } });
    assert.equal(second.status, 200);
    const v2 = second.headers.get('etag')!;
    assert.notEqual(v2, v1);

    const stale = await me.client.put('/api/v1/profile', { name: 'Lost' }, { token: me.token, headers: { 'if-match': v1 } });
    assert.equal(stale.status, 412);
    assert.equal(stale.body.code, 'PRECONDITION_FAILED');
    assert.equal((await me.client.get<UserBody>('/api/v1/profile', { token: me.token })).body.name, 'Second');

    const same = await me.client.put('/api/v1/profile', { name: 'Second' }, { token: me.token, headers: { 'if-match': v2 } });
    assert.equal(same.status, 200);
    assert.equal(same.headers.get('etag'), v2);

    const third = await me.client.put<UserBody>('/api/v1/profile', { name: 'Third' }, { token: me.token, headers: { 'if-match': v2 } });
    assert.equal(third.status, 200);
    assert.equal(third.body.name, 'Third');
  });
});

describe('GET /profile/security-log', () => {
  test("shows only the caller's own security records, newest first, with their email in LOGIN_FAILURE", async () => {
    const me = await h.newUser(); // LOGIN_SUCCESS (session 1)
    const other = await h.newUser();
    const stranger = new Client(h.server);

    // Someone types my email with a wrong password: a LOGIN_FAILURE about my account.
    const typedEmail = me.email.toUpperCase();
    const failed = await stranger.post('/api/v1/auth/login', { email: typedEmail, password: 'not-the-password' });
    assert.equal(failed.status, 401);

    // A second session, refreshed, then its spent refresh token replayed: SESSION_REVOKED.
    const second = await login(h.server, me.email, me.password); // LOGIN_SUCCESS
    const rotated = await second.client.post('/api/v1/auth/refresh', { refresh_token: second.refreshToken });
    assert.equal(rotated.status, 200);
    const replay = await second.client.post('/api/v1/auth/refresh', { refresh_token: second.refreshToken });
    assert.equal(replay.status, 401);

    // A third session that logs out: LOGOUT.
    const third = await login(h.server, me.email, me.password); // LOGIN_SUCCESS
    assert.equal((await third.client.post('/api/v1/auth/logout', undefined, { token: third.token })).status, 204);

    // Session 1 changes the password (PASSWORD_CHANGED) and then the email (UPDATE_USER_EMAIL).
    const newPassword = 'a-brand-new-password';
    const pw = await me.client.put('/api/v1/auth/password', { current_password: me.password, new_password: newPassword }, { token: me.token });
    assert.equal(pw.status, 204, pw.text);
    const newEmail = `moved-${randomBytes(4).toString('hex')}@test.local`;
    const moved = await me.client.put(`/api/v1/users/${me.id}`, { email: newEmail, current_password: newPassword }, { token: me.token });
    assert.equal(moved.status, 200, moved.text);

    // Noise that is not mine, or not a security record: another user's activity, an unknown
    // email, and an ADMIN's rename of me.
    await stranger.post('/api/v1/auth/login', { email: other.email, password: 'not-the-password' });
    await stranger.post('/api/v1/auth/login', { email: `nobody-${randomBytes(4).toString('hex')}@test.local`, password: 'not-the-password' });
    await other.client.post('/api/v1/auth/logout', undefined, { token: other.token });
    await h.admin.client.put(`/api/v1/users/${me.id}`, { name: 'Renamed By Admin' }, { token: h.admin.token });

    const log = await wholeSecurityLog(me);
    assert.deepEqual(log.map((r) => r.action), [
      'UPDATE_USER_EMAIL',
      'PASSWORD_CHANGED',
      'LOGOUT',
      'LOGIN_SUCCESS',
      'SESSION_REVOKED',
      'LOGIN_SUCCESS',
      'LOGIN_FAILURE',
      'LOGIN_SUCCESS',
    ]);
    const ids = log.map((r) => r.id);
    assert.deepEqual(ids, [...ids].sort((a, b) => b - a), 'newest first');
    for (const record of log) {
      assert.equal(record.resource_type, 'USER');
      assert.equal(record.resource_id, me.id);
      assert.ok(SECURITY_ACTIONS.includes(record.action));
    }

    const failure = log.find((r) => r.action === 'LOGIN_FAILURE')!;
    assert.equal(failure.result, 'FAILURE');
    assert.equal(failure.metadata.email, me.email);
    assert.equal(failure.metadata.reason, 'bad_password');
    assert.equal(failure.ip, stranger.ip);
    assert.ok(!JSON.stringify(log).includes('not-the-password'), 'a typed password is never shown');

    const change = log.find((r) => r.action === 'UPDATE_USER_EMAIL')!;
    assert.deepEqual(change.metadata, { oldEmail: me.email, newEmail });
    const revoked = log.find((r) => r.action === 'SESSION_REVOKED')!;
    assert.equal(revoked.metadata.reason, 'refresh_reuse');

    // The log matches the table: exactly my records of these kinds, nobody else's.
    const expected = await auditRows(h.server, `resource_type = 'USER' AND resource_id = $1 AND action = ANY($2::text[])`, [me.id, SECURITY_ACTIONS]);
    assert.deepEqual(ids, expected.map((r) => r.id).reverse());

    // The other user's log (read from a new session: they logged out) holds only their own records.
    const theirs = await wholeSecurityLog(await login(h.server, other.email, other.password));
    assert.ok(theirs.length >= 2);
    for (const record of theirs) assert.equal(record.resource_id, other.id);
    assert.ok(!theirs.some((r) => ids.includes(r.id)));
    assert.ok(!JSON.stringify(theirs).includes(me.email));
  });

  test('paginates with limit, next_cursor and a Link header, without gaps or repeats', async () => {
    const me = await h.newUser(); // LOGIN_SUCCESS
    for (let i = 0; i < 4; i++) await login(h.server, me.email, me.password); // 4 more LOGIN_SUCCESS

    const whole = await wholeSecurityLog(me);
    assert.equal(whole.length, 5);

    const first = await me.client.get<PageBody<AuditRecordBody>>('/api/v1/profile/security-log?limit=2', { token: me.token });
    assert.equal(first.status, 200);
    assert.deepEqual(first.body.data.map((r) => r.id), whole.slice(0, 2).map((r) => r.id));
    assert.equal(typeof first.body.next_cursor, 'string');
    const link = first.headers.get('link');
    const m = link ? /^<([^>]+)>; rel="next"$/.exec(link) : null;
    assert.ok(m, `Link header: ${link}`);

    // A record written between page requests does not shift later pages.
    await login(h.server, me.email, me.password);

    const second = await me.client.get<PageBody<AuditRecordBody>>(m[1]!, { token: me.token });
    assert.equal(second.status, 200, second.text);
    assert.deepEqual(second.body.data.map((r) => r.id), whole.slice(2, 4).map((r) => r.id));
    const third = await me.client.get<PageBody<AuditRecordBody>>(
      `/api/v1/profile/security-log?limit=2&cursor=${second.body.next_cursor}`,
      { token: me.token },
    );
    assert.deepEqual(third.body.data.map((r) => r.id), whole.slice(4).map((r) => r.id));
    assert.equal(third.body.next_cursor, null);
    assert.equal(third.headers.get('link'), null);

    const paged = await wholeSecurityLog(me, 2);
    assert.equal(paged.length, 6);
    assert.equal(new Set(paged.map((r) => r.id)).size, 6);

    for (const query of ['limit=0', 'limit=101', 'cursor=garbage', 'action=LOGOUT']) {
      const bad = await me.client.get(`/api/v1/profile/security-log?${query}`, { token: me.token });
      assert.equal(bad.status, 400, `${query}: ${bad.text}`);
    }
  });

  test('a user with a fresh account sees only their own first login, and anonymous callers get 401', async () => {
    const me = await h.newUser();
    const log = await wholeSecurityLog(me);
    assert.deepEqual(log.map((r) => r.action), ['LOGIN_SUCCESS']);
    assert.equal(log[0]!.actor_id, me.id);
    const anonymous = await new Client(h.server).get('/api/v1/profile/security-log');
    assert.equal(anonymous.status, 401);
  });

  test("shows an ADMIN's change of the caller's email without the ADMIN's address or user agent", async () => {
    const me = await h.newUser();
    const newEmail = `by-admin-${randomBytes(4).toString('hex')}@test.local`;
    const changed = await h.admin.client.put(`/api/v1/users/${me.id}`, { email: newEmail }, { token: h.admin.token, headers: { 'user-agent': 'admin-console/1.0' } });
    assert.equal(changed.status, 200, changed.text);

    const log = await wholeSecurityLog(me);
    const emailChange = log.find((r) => r.action === 'UPDATE_USER_EMAIL');
    assert.ok(emailChange, 'the email change is in the log');
    assert.equal(emailChange.actor_id, h.admin.id);
    assert.equal(emailChange.ip, null);
    assert.equal(emailChange.user_agent, null);
    // The caller's own records keep their address.
    const ownLogin = log.find((r) => r.action === 'LOGIN_SUCCESS');
    assert.equal(ownLogin?.ip, me.client.ip);
    // The ADMIN's audit view keeps everything.
    const raw = await auditRows(h.server, `action = 'UPDATE_USER_EMAIL' AND resource_id = $1`, [me.id]);
    assert.equal(raw.length, 1);
    assert.equal(raw[0]!.ip, h.admin.client.ip);
    assert.equal(raw[0]!.user_agent, 'admin-console/1.0');
  });
});
