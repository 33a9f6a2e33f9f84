// Users (docs/api.md section 4 "Users"), what an ADMIN does to an account: PUT /users/:id/role,
// PUT /users/:id/active, DELETE /users/:id, the last-ADMIN guard (also under concurrency), and
// the audit records (and DENIED refusals) that each writes (section 5). Reading:
// users-read.test.ts; creation and updates: users-write.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Client, auditRows, login } from './helpers/client.js';
import { userRow } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { uniqueEmail, userChecks, type UserBody } from './helpers/users.js';
import { ADMIN_EMAIL, needsPostgres } from './helpers/server.js';

const h = useTestServer();

const { recordsOn, recordsNaming, auditApi, activeAdminIds, leaveOnlyFirstAdmin, waitForLockWaiters } = userChecks(h);

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
    assert.equal((await userRow(h.server, other.id))!.role, 'USER');
    assert.equal((await userRow(h.server, me.id))!.role, 'USER');
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
    assert.equal((await userRow(h.server, user.id))!.role, 'USER');
  });

  test('honours If-Match: a stale ETag gets 412 and the role stays', async () => {
    const user = await h.newUser();
    const v1 = (await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token })).headers.get('etag')!;
    await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Renamed' }, { token: h.admin.token });
    const stale = await h.admin.client.put(`/api/v1/users/${user.id}/role`, { role: 'ADMIN' }, { token: h.admin.token, headers: { 'if-match': v1 } });
    assert.equal(stale.status, 412);
    assert.equal((await userRow(h.server, user.id))!.role, 'USER');
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
    assert.equal((await userRow(h.server, h.admin.id))!.role, 'ADMIN');
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
    assert.equal((await userRow(h.server, other.id))!.active, true);
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
    assert.equal((await userRow(h.server, user.id))!.active, true);
  });

  test('refuses to deactivate the last active ADMIN with 409 LAST_ADMIN and writes no record', async () => {
    await leaveOnlyFirstAdmin();
    const res = await h.admin.client.put(`/api/v1/users/${h.admin.id}/active`, { active: false }, { token: h.admin.token });
    assert.equal(res.status, 409);
    assert.equal(res.body.code, 'LAST_ADMIN');
    assert.equal((await userRow(h.server, h.admin.id))!.active, true);
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

    assert.equal(await userRow(h.server, user.id), undefined);
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
    assert.ok(await userRow(h.server, other.id));
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
    assert.ok(await userRow(h.server, h.admin.id));
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

    // Authorization is decided inside the transaction, on the locked rows (docs/api.md 3): the two
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
