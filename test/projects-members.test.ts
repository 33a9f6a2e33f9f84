// Project members (docs/api.md section 4 "Projects"): the roster and its rules (LAST_OWNER,
// self-removal, unassignment), the audit records each change writes (section 5), and that a
// failing audit insert takes the whole change down with it. Projects themselves:
// projects-lifecycle.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Session } from './helpers/client.js';
import {
  addMember, countRows, createProject, createTask, putMember, recordsOf, uniqueWord, type MemberBody, type PageBody, type ProjectBody, type TaskBody,
} from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { projectChecks } from './helpers/projects.js';
import { needsPostgres } from './helpers/server.js';

const h = useTestServer();

const { projectRecords, projectRow, memberRoleOf, getProject, withFailingAudit } = projectChecks(h);

describe('project members', () => {
  test('adds a member with 201, one ADD_PROJECT_MEMBER record and a project_member_added notification', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    const res = await putMember(alice, p.id, bob.id, 'MEMBER');
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.user_id, bob.id);
    assert.equal(res.body.role, 'MEMBER');
    assert.match(res.body.added_at, /Z$/);
    assert.equal(res.headers.get('location'), `/api/v1/projects/${p.id}/members/${bob.id}`);
    // The Location can be read back.
    const located = await bob.client.get(res.headers.get('location')!, { token: bob.token });
    assert.equal(located.status, 200, located.text);
    assert.deepEqual(located.body, res.body);
    assert.equal(await memberRoleOf(p.id, bob.id), 'MEMBER');
    assert.equal((await getProject(alice, p.id)).body.member_count, 2);

    const records = await recordsOf(h.server, res);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.action, 'ADD_PROJECT_MEMBER');
    assert.equal(records[0]!.result, 'SUCCESS');
    assert.equal(records[0]!.actor_id, alice.id);
    assert.equal(records[0]!.resource_type, 'PROJECT');
    assert.equal(records[0]!.resource_id, p.id);
    assert.deepEqual(records[0]!.metadata, { userId: bob.id, role: 'MEMBER' });

    const notes = await bob.client.get<PageBody<{ kind: string; payload: Record<string, unknown>; read_at: string | null }>>('/api/v1/notifications', { token: bob.token });
    assert.equal(notes.status, 200, notes.text);
    const added = notes.body.data.filter((n) => n.kind === 'project_member_added');
    assert.equal(added.length, 1);
    assert.deepEqual(added[0]!.payload, { project_id: p.id, project_name: p.name, role: 'MEMBER', actor_id: alice.id });
    assert.equal(added[0]!.read_at, null);
    // The notification has its real-time event beside it.
    assert.equal(await countRows(h.server, `outbox_events WHERE room = $1 AND name = 'new-notification'`, [`user:${bob.id}`]), 1);
    // The actor is not notified of their own action.
    assert.equal(await countRows(h.server, 'notifications WHERE user_id = $1', [alice.id]), 0);
  });

  test('adds an OWNER with the role in the record and the notification', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    const res = await putMember(alice, p.id, bob.id, 'OWNER');
    assert.equal(res.status, 201, res.text);
    assert.deepEqual((await recordsOf(h.server, res))[0]!.metadata, { userId: bob.id, role: 'OWNER' });
    const rows = await h.server.owner.query<{ payload: Record<string, unknown> }>(`SELECT payload FROM notifications WHERE user_id = $1 AND kind = 'project_member_added'`, [bob.id]);
    assert.deepEqual(rows.map((r) => r.payload.role), ['OWNER']);
  });

  test('does not notify an ADMIN who adds themself', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice);
    const res = await putMember(h.admin, p.id, h.admin.id, 'MEMBER');
    assert.equal(res.status, 201, res.text);
    const notes = await h.server.owner.query<{ payload: { project_id: number } }>(`SELECT payload FROM notifications WHERE user_id = $1 AND kind = 'project_member_added'`, [h.admin.id]);
    assert.ok(!notes.some((n) => n.payload.project_id === p.id));
  });

  test('changes a role with 200 and one CHANGE_PROJECT_MEMBER_ROLE record with old and new role', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    const notesBefore = await countRows(h.server, 'notifications WHERE user_id = $1', [bob.id]);
    const res = await putMember(alice, p.id, bob.id, 'OWNER');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.role, 'OWNER');
    assert.equal(res.headers.get('location'), null);
    assert.equal(await memberRoleOf(p.id, bob.id), 'OWNER');
    const records = await recordsOf(h.server, res);
    assert.deepEqual(records.map((r) => [r.action, r.result, r.actor_id, r.resource_type, r.resource_id]), [['CHANGE_PROJECT_MEMBER_ROLE', 'SUCCESS', alice.id, 'PROJECT', p.id]]);
    assert.deepEqual(records[0]!.metadata, { userId: bob.id, oldRole: 'MEMBER', newRole: 'OWNER' });
    assert.equal(await countRows(h.server, 'notifications WHERE user_id = $1', [bob.id]), notesBefore);

    // And back down, now that there is another OWNER.
    const down = await putMember(bob, p.id, alice.id, 'MEMBER');
    assert.equal(down.status, 200, down.text);
    assert.deepEqual((await recordsOf(h.server, down))[0]!.metadata, { userId: alice.id, oldRole: 'OWNER', newRole: 'MEMBER' });
  });

  test('answers the role a member already has with 200 and writes no record, notification or version', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    const before = await projectRow(p.id);
    const notesBefore = await countRows(h.server, 'notifications WHERE user_id = $1', [bob.id]);
    const eventsBefore = await countRows(h.server, 'outbox_events WHERE room = $1', [`user:${bob.id}`]);
    const res = await putMember(alice, p.id, bob.id, 'MEMBER');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.role, 'MEMBER');
    assert.equal((await recordsOf(h.server, res)).length, 0);
    assert.deepEqual(await projectRow(p.id), before);
    assert.equal(await countRows(h.server, 'notifications WHERE user_id = $1', [bob.id]), notesBefore);
    assert.equal(await countRows(h.server, 'outbox_events WHERE room = $1', [`user:${bob.id}`]), eventsBefore);
  });

  test('refuses to demote or remove the last OWNER with 409 LAST_OWNER and writes no record', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);

    const demote = await putMember(alice, p.id, alice.id, 'MEMBER');
    assert.equal(demote.status, 409, demote.text);
    assert.equal(demote.body.code, 'LAST_OWNER');
    const removeSelf = await alice.client.delete(`/api/v1/projects/${p.id}/members/${alice.id}`, { token: alice.token });
    assert.equal(removeSelf.status, 409, removeSelf.text);
    assert.equal(removeSelf.body.code, 'LAST_OWNER');
    const byAdmin = await h.admin.client.delete(`/api/v1/projects/${p.id}/members/${alice.id}`, { token: h.admin.token });
    assert.equal(byAdmin.status, 409, byAdmin.text);
    const demoteByAdmin = await putMember(h.admin, p.id, alice.id, 'MEMBER');
    assert.equal(demoteByAdmin.status, 409, demoteByAdmin.text);
    for (const res of [demote, removeSelf, byAdmin, demoteByAdmin]) assert.equal((await recordsOf(h.server, res)).length, 0);
    assert.equal(await memberRoleOf(p.id, alice.id), 'OWNER');

    // With a second OWNER, the first may step down.
    const promoted = await putMember(alice, p.id, bob.id, 'OWNER');
    assert.equal(promoted.status, 200, promoted.text);
    const ok = await putMember(alice, p.id, alice.id, 'MEMBER');
    assert.equal(ok.status, 200, ok.text);
    assert.equal(await memberRoleOf(p.id, alice.id), 'MEMBER');
  });

  test('lets only one of two OWNERs leave when both try at the same time', { skip: needsPostgres }, async () => {
    for (let round = 0; round < 5; round++) {
      const alice = await h.newUser();
      const bob = await h.newUser();
      const p = await createProject(alice);
      await addMember(alice, p.id, bob.id, 'OWNER');
      const [a, b] = await Promise.all([
        alice.client.delete(`/api/v1/projects/${p.id}/members/${alice.id}`, { token: alice.token }),
        bob.client.delete(`/api/v1/projects/${p.id}/members/${bob.id}`, { token: bob.token }),
      ]);
      assert.deepEqual([a.status, b.status].sort(), [204, 409], `${a.text} ${b.text}`);
      assert.equal(await countRows(h.server, `project_members WHERE project_id = $1 AND role = 'OWNER'`, [p.id]), 1);
      assert.equal((await projectRecords(p.id, 'REMOVE_PROJECT_MEMBER')).length, 1);
    }
  });

  test('adds a member once when the same addition arrives twice at the same time', { skip: needsPostgres }, async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    const results = await Promise.all([putMember(alice, p.id, bob.id, 'MEMBER'), putMember(alice, p.id, bob.id, 'MEMBER'), putMember(alice, p.id, bob.id, 'MEMBER')]);
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 200, 201], results.map((r) => r.text).join(' '));
    assert.equal((await projectRecords(p.id, 'ADD_PROJECT_MEMBER')).length, 1);
    assert.equal(await countRows(h.server, `notifications WHERE user_id = $1 AND kind = 'project_member_added'`, [bob.id]), 1);
  });

  test('lets a member remove themself and records REMOVE_PROJECT_MEMBER with their role', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    const res = await bob.client.delete(`/api/v1/projects/${p.id}/members/${bob.id}`, { token: bob.token });
    assert.equal(res.status, 204, res.text);
    assert.equal(await memberRoleOf(p.id, bob.id), undefined);
    const records = await recordsOf(h.server, res);
    assert.deepEqual(records.map((r) => [r.action, r.result, r.actor_id, r.resource_type, r.resource_id]), [['REMOVE_PROJECT_MEMBER', 'SUCCESS', bob.id, 'PROJECT', p.id]]);
    assert.deepEqual(records[0]!.metadata, { userId: bob.id, role: 'MEMBER' });
    // Out of the project, out of sight.
    assert.equal((await getProject(bob, p.id)).status, 404);
    assert.equal((await getProject(alice, p.id)).body.member_count, 1);
  });

  test('unassigns a removed member\u2019s tasks in that project and keeps their tasks elsewhere', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    const q = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    await addMember(alice, q.id, bob.id);
    const here1 = await createTask(alice, p.id, { assignee_id: bob.id });
    const here2 = await createTask(bob, p.id, { assignee_id: bob.id });
    const hereOther = await createTask(alice, p.id, { assignee_id: alice.id });
    const elsewhere = await createTask(alice, q.id, { assignee_id: bob.id });

    const res = await alice.client.delete(`/api/v1/projects/${p.id}/members/${bob.id}`, { token: alice.token });
    assert.equal(res.status, 204, res.text);
    const assignee = async (t: TaskBody) => (await alice.client.get<TaskBody>(`/api/v1/tasks/${t.id}`, { token: alice.token })).body.assignee_id;
    assert.equal(await assignee(here1), null);
    assert.equal(await assignee(here2), null);
    assert.equal(await assignee(hereOther), alice.id);
    assert.equal(await assignee(elsewhere), bob.id);
    // The unassignment is part of the removal, not an ASSIGN_TASK of its own.
    const records = await recordsOf(h.server, res);
    assert.deepEqual(records.map((r) => r.action), ['REMOVE_PROJECT_MEMBER']);
    assert.deepEqual(records[0]!.metadata, { userId: bob.id, role: 'MEMBER' });
  });

  test('lets an OWNER remove another OWNER while one remains', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id, 'OWNER');
    const res = await bob.client.delete(`/api/v1/projects/${p.id}/members/${alice.id}`, { token: bob.token });
    assert.equal(res.status, 204, res.text);
    assert.deepEqual((await recordsOf(h.server, res))[0]!.metadata, { userId: alice.id, role: 'OWNER' });
  });

  test('lists members as {user_id, role, added_at}, paginated by user id', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice);
    const others: Session[] = [];
    for (let i = 0; i < 4; i++) others.push(await h.newUser());
    for (const o of others) await addMember(alice, p.id, o.id);

    const seen: MemberBody[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = cursor ? `?limit=2&cursor=${cursor}` : '?limit=2';
      const res = await others[0]!.client.get<PageBody<MemberBody>>(`/api/v1/projects/${p.id}/members${q}`, { token: others[0]!.token });
      assert.equal(res.status, 200, res.text);
      for (const m of res.body.data) assert.deepEqual(Object.keys(m).sort(), ['added_at', 'role', 'user_id']);
      seen.push(...res.body.data);
      cursor = res.body.next_cursor;
      pages++;
    } while (cursor);
    assert.equal(pages, 3);
    const expected = [alice.id, ...others.map((o) => o.id)].sort((a, b) => a - b);
    assert.deepEqual(seen.map((m) => m.user_id), expected);
    assert.equal(seen.find((m) => m.user_id === alice.id)!.role, 'OWNER');
    assert.ok(seen.filter((m) => m.user_id !== alice.id).every((m) => m.role === 'MEMBER'));
  });

  test('answers 404 for an unknown user, and for removing someone who is not a member', async () => {
    const alice = await h.newUser();
    const eve = await h.newUser();
    const p = await createProject(alice);
    const add = await putMember(alice, p.id, 987654321, 'MEMBER');
    assert.equal(add.status, 404, add.text);
    assert.equal(await countRows(h.server, 'project_members WHERE project_id = $1', [p.id]), 1);
    const remove = await alice.client.delete(`/api/v1/projects/${p.id}/members/${eve.id}`, { token: alice.token });
    assert.equal(remove.status, 404, remove.text);
    const removeUnknown = await alice.client.delete(`/api/v1/projects/${p.id}/members/987654321`, { token: alice.token });
    assert.equal(removeUnknown.status, 404, removeUnknown.text);
    for (const res of [add, remove, removeUnknown]) assert.equal((await recordsOf(h.server, res)).length, 0);
  });

  test('rejects a role outside OWNER and MEMBER, and extra fields, with 400', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    for (const body of [{ role: 'ADMIN' }, { role: 'owner' }, {}, { role: 'MEMBER', user_id: 1 }]) {
      const res = await alice.client.put(`/api/v1/projects/${p.id}/members/${bob.id}`, body, { token: alice.token });
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal((await recordsOf(h.server, res)).length, 0);
    }
    assert.equal(await memberRoleOf(p.id, bob.id), undefined);
  });

  test('refuses a member change with a stale If-Match with 412', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const carol = await h.newUser();
    const p = await createProject(alice);
    const stale = (await getProject(alice, p.id)).headers.get('etag')!;
    await addMember(alice, p.id, bob.id);
    const res = await putMember(alice, p.id, carol.id, 'MEMBER', { 'if-match': stale });
    assert.equal(res.status, 412, res.text);
    assert.equal(await memberRoleOf(p.id, carol.id), undefined);
    assert.equal((await recordsOf(h.server, res)).length, 0);
    const current = (await getProject(alice, p.id)).headers.get('etag')!;
    const ok = await putMember(alice, p.id, carol.id, 'MEMBER', { 'if-match': current });
    assert.equal(ok.status, 201, ok.text);
  });
});

describe('a failing audit insert', () => {
  test('leaves no membership, notification or event behind when ADD_PROJECT_MEMBER cannot be recorded', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    const before = await projectRow(p.id);
    // The project's own events so far (its creation moves the creator's sockets into its room).
    const projectEvents = () => countRows(h.server, `outbox_events WHERE payload->>'project_id' = $1`, [String(p.id)]);
    const eventsBefore = await projectEvents();
    const res = await withFailingAudit('ADD_PROJECT_MEMBER', () => putMember(alice, p.id, bob.id, 'MEMBER'));
    assert.equal(res.status, 500, res.text);
    assert.equal(res.body.code, 'INTERNAL');
    assert.ok(!res.text.includes('forced audit failure'), 'a 500 body hides the database error');

    assert.equal(await memberRoleOf(p.id, bob.id), undefined);
    assert.equal(await countRows(h.server, 'notifications WHERE user_id = $1', [bob.id]), 0);
    assert.equal(await countRows(h.server, 'outbox_events WHERE room = $1', [`user:${bob.id}`]), 0);
    assert.equal(await projectEvents(), eventsBefore);
    assert.deepEqual(await projectRow(p.id), before);
    assert.equal((await recordsOf(h.server, res)).length, 0);

    // With the trigger gone, the same request works.
    const retry = await putMember(alice, p.id, bob.id, 'MEMBER');
    assert.equal(retry.status, 201, retry.text);
  });

  test('leaves no project and no membership behind when CREATE_PROJECT cannot be recorded', async () => {
    const alice = await h.newUser();
    const name = `Doomed ${uniqueWord()}`;
    const res = await withFailingAudit('CREATE_PROJECT', () => alice.client.post('/api/v1/projects', { name }, { token: alice.token }));
    assert.equal(res.status, 500, res.text);
    assert.equal(await countRows(h.server, 'projects WHERE name = $1', [name]), 0);
    assert.equal(await countRows(h.server, 'project_members WHERE user_id = $1', [alice.id]), 0);
    assert.equal((await recordsOf(h.server, res)).length, 0);
    const list = await alice.client.get<PageBody<ProjectBody>>('/api/v1/projects', { token: alice.token });
    assert.deepEqual(list.body.data, []);
  });
});
