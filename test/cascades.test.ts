// Deletion cascades (docs/api.md section 4 "Users" and "Projects", section 5): deleting a user
// takes their posts, likes, messages, notifications and memberships with them and unassigns
// their tasks; deleting a project takes its tasks and messages. In every case each audit
// record written before stays exactly as it was, and the deletion adds exactly one record.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Client, auditRows, type Session } from './helpers/client.js';
import {
  addMember, countRows, createProject, createTask, postMessage, recordsOf,
  type ProjectBody, type TaskBody,
} from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';

const h = useTestServer();

/** The whole audit table, every column, as the database holds it. */
const auditTable = () => h.server.owner.query<Record<string, unknown> & { id: number }>('SELECT * FROM audit_log ORDER BY id');

/**
 * Runs fn and checks that every audit row that existed before is unchanged afterwards;
 * returns the rows that fn added.
 */
async function auditUntouchedBy(fn: () => Promise<void>) {
  const before = await auditTable();
  await fn();
  const after = await auditTable();
  const lastBefore = before.at(-1)?.id ?? 0;
  assert.deepEqual(after.filter((r) => r.id <= lastBefore), before, 'audit records written before must survive untouched');
  return after.filter((r) => r.id > lastBefore);
}

async function post(by: Session, content = 'a post'): Promise<{ id: number }> {
  const res = await by.client.post('/api/v1/posts', { content }, { token: by.token });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

async function like(by: Session, postId: number): Promise<void> {
  const res = await by.client.put(`/api/v1/posts/${postId}/like`, undefined, { token: by.token });
  assert.equal(res.status, 200, res.text);
}

async function task(by: Session, id: number): Promise<TaskBody> {
  const res = await by.client.get<TaskBody>(`/api/v1/tasks/${id}`, { token: by.token });
  assert.equal(res.status, 200, res.text);
  return res.body;
}

const deleteUser = (id: number) => h.admin.client.delete(`/api/v1/users/${id}`, { token: h.admin.token });

/** What a refused deletion must leave as it was. */
async function userFootprint(id: number) {
  const q = (sql: string) => h.server.owner.query(sql, [id]);
  return {
    user: await q('SELECT id, email, name, role, active, version FROM users WHERE id = $1'),
    posts: await q('SELECT * FROM posts WHERE author_id = $1 ORDER BY id'),
    likes: await q('SELECT * FROM post_likes WHERE user_id = $1 ORDER BY post_id'),
    messages: await q('SELECT * FROM messages WHERE author_id = $1 ORDER BY id'),
    notifications: await q('SELECT * FROM notifications WHERE user_id = $1 ORDER BY id'),
    memberships: await q('SELECT * FROM project_members WHERE user_id = $1 ORDER BY project_id'),
    tasks: await q('SELECT id, assignee_id, created_by, version FROM tasks WHERE assignee_id = $1 OR created_by = $1 ORDER BY id'),
    sessions: await q('SELECT id, revoked_at FROM sessions WHERE user_id = $1 ORDER BY id'),
  };
}

describe('deleting a user', () => {
  test('removes their posts, likes, messages, notifications and memberships, unassigns their tasks, and keeps every audit record', async () => {
    const victim = await h.newUser();
    const alice = await h.newUser();
    const bob = await h.newUser();

    // Projects: a member of Alice's, co-OWNER of Bob's, and creator of one handed to Alice.
    const pAlice = await createProject(alice);
    await addMember(alice, pAlice.id, victim.id);
    const pBob = await createProject(bob);
    await addMember(bob, pBob.id, victim.id, 'OWNER');
    const pVictim = await createProject(victim);
    await addMember(victim, pVictim.id, alice.id, 'OWNER');

    // Tasks assigned to and created by the victim.
    const assignedHere = await createTask(alice, pAlice.id, { assignee_id: victim.id });
    const ownAssigned = await createTask(victim, pBob.id, { assignee_id: victim.id });
    const createdForAlice = await createTask(victim, pAlice.id, { assignee_id: alice.id });
    // Status changes and assignments make audit records that name the victim in metadata.
    const moved = await victim.client.put(`/api/v1/tasks/${ownAssigned.id}/status`, { status: 'IN_PROGRESS' }, { token: victim.token });
    assert.equal(moved.status, 200, moved.text);

    // The feed: the victim's posts (liked by others) and their likes of others' posts.
    const victimPost = await post(victim, 'by the victim');
    await like(alice, victimPost.id);
    const alicePost = await post(alice, 'by alice');
    await like(victim, alicePost.id);
    await like(bob, alicePost.id);
    assert.equal((await alice.client.get(`/api/v1/posts/${alicePost.id}`, { token: alice.token })).body.like_count, 2);

    // Chat, in the general room and in a project room.
    await postMessage(victim, 'general');
    await postMessage(victim, `project:${pAlice.id}`);
    const aliceMessage = await postMessage(alice, `project:${pAlice.id}`);

    assert.ok((await countRows(h.server, 'notifications WHERE user_id = $1', [victim.id])) >= 3, 'the victim has notifications to lose');
    const naming = await auditRows(h.server, `actor_id = $1 OR (resource_type = 'USER' AND resource_id = $1) OR metadata->>'userId' = $2`, [victim.id, String(victim.id)]);
    assert.ok(naming.length >= 8, 'there are audit records naming the victim');

    let res!: Awaited<ReturnType<typeof deleteUser>>;
    const added = await auditUntouchedBy(async () => {
      res = await deleteUser(victim.id);
      assert.equal(res.status, 204, res.text);
    });
    assert.deepEqual(added.map((r) => [r.action, r.result, r.actor_id, r.resource_type, r.resource_id]), [['DELETE_USER', 'SUCCESS', h.admin.id, 'USER', victim.id]]);
    assert.deepEqual((await recordsOf(h.server, res)).map((r) => r.action), ['DELETE_USER']);

    // Gone with them.
    assert.equal(await countRows(h.server, 'users WHERE id = $1', [victim.id]), 0);
    assert.equal(await countRows(h.server, 'posts WHERE author_id = $1', [victim.id]), 0);
    assert.equal(await countRows(h.server, 'post_likes WHERE user_id = $1 OR post_id = $2', [victim.id, victimPost.id]), 0);
    assert.equal(await countRows(h.server, 'messages WHERE author_id = $1', [victim.id]), 0);
    assert.equal(await countRows(h.server, 'notifications WHERE user_id = $1', [victim.id]), 0);
    assert.equal(await countRows(h.server, 'project_members WHERE user_id = $1', [victim.id]), 0);
    assert.equal((await alice.client.get(`/api/v1/posts/${victimPost.id}`, { token: alice.token })).status, 404);
    const after = await alice.client.get(`/api/v1/posts/${alicePost.id}`, { token: alice.token });
    assert.equal(after.body.like_count, 1, 'like_count drops with the deleted liker');

    // Their tasks stay, unassigned; other people's stay as they were.
    assert.equal((await task(alice, assignedHere.id)).assignee_id, null);
    assert.equal((await task(bob, ownAssigned.id)).assignee_id, null);
    const forAlice = await task(alice, createdForAlice.id);
    assert.equal(forAlice.assignee_id, alice.id);
    assert.equal(forAlice.created_by, null);

    // The projects go on without them.
    const members = async (p: ProjectBody, by: Session) =>
      (await by.client.get(`/api/v1/projects/${p.id}/members`, { token: by.token })).body.data.map((m: { user_id: number }) => m.user_id);
    assert.deepEqual(await members(pAlice, alice), [alice.id]);
    assert.deepEqual(await members(pBob, bob), [bob.id]);
    const handedOver = await alice.client.get<ProjectBody>(`/api/v1/projects/${pVictim.id}`, { token: alice.token });
    assert.equal(handedOver.status, 200);
    assert.equal(handedOver.body.created_by, null);
    const chat = await alice.client.get(`/api/v1/messages?room=project:${pAlice.id}`, { token: alice.token });
    assert.deepEqual(chat.body.data.map((m: { id: number }) => m.id), [aliceMessage.id]);

    // And their session is dead.
    assert.equal((await victim.client.get('/api/v1/profile', { token: victim.token })).status, 401);
  });

  test("refuses with 409 LAST_OWNER, naming the projects, to delete a project's only OWNER, and changes nothing", async () => {
    const solo = await h.newUser();
    const bob = await h.newUser();
    const first = await createProject(solo);
    const second = await createProject(solo);
    const shared = await createProject(bob);
    await addMember(bob, shared.id, solo.id, 'OWNER');
    await createTask(solo, first.id, { assignee_id: solo.id });
    await post(solo);
    await postMessage(solo, 'general');

    const footprint = await userFootprint(solo.id);
    let res!: Awaited<ReturnType<typeof deleteUser>>;
    const added = await auditUntouchedBy(async () => {
      res = await deleteUser(solo.id);
    });
    assert.equal(res.status, 409, res.text);
    assert.equal(res.body.code, 'LAST_OWNER');
    assert.deepEqual(res.body.projects, [{ id: first.id, name: first.name }, { id: second.id, name: second.name }]);
    assert.ok(res.body.detail.includes(first.name) && res.body.detail.includes(second.name), res.body.detail);
    assert.deepEqual(added, [], 'a conflict writes no audit record');
    assert.deepEqual(await userFootprint(solo.id), footprint);
    assert.equal((await solo.client.get('/api/v1/profile', { token: solo.token })).status, 200);

    // Once ownership of one is handed over and the other is deleted, the user can go.
    await addMember(solo, first.id, bob.id, 'OWNER');
    assert.equal((await deleteUser(solo.id)).status, 409, 'the second project still has them as only OWNER');
    const del = await solo.client.delete(`/api/v1/projects/${second.id}`, { token: solo.token });
    assert.equal(del.status, 204, del.text);
    const ok = await deleteUser(solo.id);
    assert.equal(ok.status, 204, ok.text);
    assert.equal(await countRows(h.server, 'project_members WHERE project_id = $1', [first.id]), 1);
  });

  test('never leaves a project without an OWNER when a co-OWNER is deleted while the other steps down', { skip: needsPostgres }, async () => {
    for (let round = 0; round < 8; round++) {
      const leaving = await h.newUser();
      const doomed = await h.newUser();
      const p = await createProject(leaving);
      await addMember(leaving, p.id, doomed.id, 'OWNER');
      const stepDown = round % 2 === 0
        ? () => leaving.client.delete(`/api/v1/projects/${p.id}/members/${leaving.id}`, { token: leaving.token })
        : () => leaving.client.put(`/api/v1/projects/${p.id}/members/${leaving.id}`, { role: 'MEMBER' }, { token: leaving.token });
      const [del, left] = await Promise.all([deleteUser(doomed.id), stepDown()]);
      const owners = await countRows(h.server, `project_members WHERE project_id = $1 AND role = 'OWNER'`, [p.id]);
      assert.equal(owners, 1, `round ${round}: deletion ${del.status}, step-down ${left.status}`);
      assert.deepEqual([del.status, left.status].map((s) => (s === 200 ? 204 : s)).sort(), [204, 409], `${del.text} ${left.text}`);
    }
  });

  test('lets a re-login attempt of the deleted user fail like an unknown email', async () => {
    const gone = await h.newUser();
    assert.equal((await deleteUser(gone.id)).status, 204);
    const res = await new Client(h.server).post('/api/v1/auth/login', { email: gone.email, password: gone.password });
    assert.equal(res.status, 401);
    assert.equal(res.body.code, 'INVALID_CREDENTIALS');
  });
});

describe('deleting a project', () => {
  test('removes its tasks, messages and memberships, keeps everything else, and keeps every audit record', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const doomed = await createProject(alice);
    const kept = await createProject(alice);
    await addMember(alice, doomed.id, bob.id);
    await addMember(alice, kept.id, bob.id);
    const doomedTasks = [
      await createTask(alice, doomed.id, { assignee_id: bob.id }),
      await createTask(bob, doomed.id),
      await createTask(bob, doomed.id, { assignee_id: alice.id }),
    ];
    const moved = await bob.client.put(`/api/v1/tasks/${doomedTasks[0]!.id}/status`, { status: 'IN_PROGRESS' }, { token: bob.token });
    assert.equal(moved.status, 200, moved.text);
    const keptTask = await createTask(alice, kept.id, { assignee_id: bob.id });
    await postMessage(alice, `project:${doomed.id}`);
    await postMessage(bob, `project:${doomed.id}`);
    const keptMessage = await postMessage(bob, `project:${kept.id}`);
    const generalMessage = await postMessage(bob, 'general');
    const aboutDoomed = await auditRows(
      h.server,
      `(resource_type = 'PROJECT' AND resource_id = $1) OR (resource_type = 'TASK' AND resource_id = ANY($2::bigint[]))`,
      [doomed.id, doomedTasks.map((t) => t.id)],
    );
    assert.ok(aboutDoomed.length >= 6, 'there are audit records about the project and its tasks');

    let res!: Awaited<ReturnType<typeof alice.client.delete>>;
    const added = await auditUntouchedBy(async () => {
      res = await alice.client.delete(`/api/v1/projects/${doomed.id}`, { token: alice.token });
      assert.equal(res.status, 204, res.text);
    });
    assert.deepEqual(added.map((r) => [r.action, r.result, r.actor_id, r.resource_type, r.resource_id]), [['DELETE_PROJECT', 'SUCCESS', alice.id, 'PROJECT', doomed.id]]);
    assert.deepEqual(added[0]!.metadata, { name: doomed.name, taskCount: 3 });

    assert.equal(await countRows(h.server, 'tasks WHERE project_id = $1', [doomed.id]), 0);
    for (const t of doomedTasks) assert.equal((await alice.client.get(`/api/v1/tasks/${t.id}`, { token: alice.token })).status, 404);
    assert.equal(await countRows(h.server, 'messages WHERE room = $1', [`project:${doomed.id}`]), 0);
    assert.equal(await countRows(h.server, 'project_members WHERE project_id = $1', [doomed.id]), 0);
    assert.equal((await bob.client.get(`/api/v1/messages?room=project:${doomed.id}`, { token: bob.token })).status, 404);

    // Nothing outside the project is touched.
    assert.equal((await task(bob, keptTask.id)).assignee_id, bob.id);
    const keptChat = await bob.client.get(`/api/v1/messages?room=project:${kept.id}`, { token: bob.token });
    assert.deepEqual(keptChat.body.data.map((m: { id: number }) => m.id), [keptMessage.id]);
    assert.equal(await countRows(h.server, 'messages WHERE id = $1', [generalMessage.id]), 1);
    assert.equal(await countRows(h.server, 'users WHERE id = ANY($1::bigint[])', [[alice.id, bob.id]]), 2);
    assert.equal(await countRows(h.server, 'project_members WHERE project_id = $1', [kept.id]), 2);
  });
});
