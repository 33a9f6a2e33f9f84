// Notifications (docs/api.md section 4 "Notifications"): each user lists only their own
// (?unread=true for the unread ones), marks one read (idempotent, someone else's is 404) or
// all of them (204); every stored notification has a new-notification events row in the
// recipient's room user:<id>.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Session } from './helpers/client.js';
import { addMember, allPages, createProject, createTask, eventRows, notificationRows, type NotificationBody, type PageBody, type Problem } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();

// ── little helpers ─────────────────────────────────────────────────────────────────────

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

async function listed(who: Session, query = ''): Promise<NotificationBody[]> {
  const res = await who.client.get<PageBody<NotificationBody>>(`/api/v1/notifications${query}`, { token: who.token });
  assert.equal(res.status, 200, res.text);
  return res.body.data;
}

const markRead = (who: Session, id: number) => who.client.put<NotificationBody & Problem>(`/api/v1/notifications/${id}/read`, undefined, { token: who.token });
const markAllRead = (who: Session) => who.client.put(`/api/v1/notifications/read`, undefined, { token: who.token });

/**
 * Gives `recipient` three notifications, one of each kind that other people's actions cause:
 * project_member_added, task_assigned and post_liked (oldest first).
 */
async function threeNotificationsFor(recipient: Session) {
  const actor = await h.newUser();
  const project = await createProject(actor);
  await addMember(actor, project.id, recipient.id);
  const task = await createTask(actor, project.id, { title: 'Call the client', assignee_id: recipient.id });
  const post = await recipient.client.post('/api/v1/posts', { content: 'Like me' }, { token: recipient.token });
  assert.equal(post.status, 201);
  assert.equal((await actor.client.put(`/api/v1/posts/${post.body.id}/like`, undefined, { token: actor.token })).status, 200);
  return { actor, project, task, postId: post.body.id as number };
}

// ── listing ────────────────────────────────────────────────────────────────────────────

describe('listing notifications', () => {
  test("lists the caller's own notifications, newest first, with the contract's payloads", async () => {
    const user = await h.newUser();
    const { actor, project, task, postId } = await threeNotificationsFor(user);
    const mine = await listed(user);
    assert.deepEqual(mine.map((n) => n.kind), ['post_liked', 'task_assigned', 'project_member_added']);
    const ids = mine.map((n) => n.id);
    assert.deepEqual(ids, [...ids].sort((a, b) => b - a));
    for (const n of mine) {
      assert.deepEqual(Object.keys(n).sort(), ['created_at', 'id', 'kind', 'payload', 'read_at']);
      assert.equal(n.read_at, null);
      assert.match(n.created_at, ISO);
    }
    assert.deepEqual(mine[0]!.payload, { post_id: postId, actor_id: actor.id });
    assert.deepEqual(mine[1]!.payload, { task_id: task.id, project_id: project.id, title: 'Call the client', actor_id: actor.id });
    assert.deepEqual(mine[2]!.payload, { project_id: project.id, project_name: project.name, role: 'MEMBER', actor_id: actor.id });
  });

  test("never shows someone else's notifications", async () => {
    const [user, other] = await Promise.all([h.newUser(), h.newUser()]);
    const { actor } = await threeNotificationsFor(user);
    assert.deepEqual(await listed(other), [], 'a user with no notifications sees none');
    const actorsOwn = await listed(actor);
    assert.equal(actorsOwn.length, 0, 'nobody is notified of their own actions');
    const stored = await notificationRows(h.server, 'user_id = $1', [user.id]);
    assert.deepEqual((await listed(user)).map((n) => n.id).sort(), stored.map((n) => n.id).sort());
  });

  test('?unread=true lists only the unread ones; ?unread=false lists all', async () => {
    const user = await h.newUser();
    await threeNotificationsFor(user);
    const all = await listed(user);
    assert.equal((await markRead(user, all[1]!.id)).status, 200);
    const unread = await listed(user, '?unread=true');
    assert.deepEqual(unread.map((n) => n.id), [all[0]!.id, all[2]!.id]);
    assert.ok(unread.every((n) => n.read_at === null));
    assert.equal((await listed(user, '?unread=false')).length, 3);
    const bad = await user.client.get('/api/v1/notifications?unread=maybe', { token: user.token });
    assert.equal(bad.status, 400, bad.text);
  });

  test('pages with a cursor', async () => {
    const user = await h.newUser();
    await threeNotificationsFor(user);
    await threeNotificationsFor(user);
    const first = await user.client.get<PageBody<NotificationBody>>('/api/v1/notifications?limit=4', { token: user.token });
    assert.equal(first.body.data.length, 4);
    assert.ok(first.body.next_cursor);
    const everything = await allPages<NotificationBody>(user, '/api/v1/notifications?limit=4');
    assert.equal(everything.length, 6);
    assert.equal(new Set(everything.map((n) => n.id)).size, 6);
    assert.deepEqual(everything.slice(0, 4), first.body.data);
  });
});

// ── marking read ───────────────────────────────────────────────────────────────────────

describe('who is told about a task', () => {
  test('a member who left the project hears no more of its tasks; an ADMIN creator, member or not, still does', async () => {
    const owner = await h.newUser();
    const [creator, worker] = await Promise.all([h.newUser(), h.newUser()]);
    const project = await createProject(owner);
    await addMember(owner, project.id, creator.id);
    await addMember(owner, project.id, worker.id);
    const task = await createTask(creator, project.id, { assignee_id: worker.id });
    const byAdmin = await createTask(h.admin, project.id);
    assert.equal((await creator.client.delete(`/api/v1/projects/${project.id}/members/${creator.id}`, { token: creator.token })).status, 204);

    for (const t of [task, byAdmin]) {
      const res = await owner.client.put(`/api/v1/tasks/${t.id}/status`, { status: 'IN_PROGRESS' }, { token: owner.token });
      assert.equal(res.status, 200, res.text);
    }
    const about = (n: { payload: Record<string, unknown> }, id: number) => n.payload.task_id === id;
    const statusChanges = async (userId: number) => notificationRows(h.server, `user_id = $1 AND kind = 'task_status_changed'`, [userId]);
    assert.deepEqual((await statusChanges(creator.id)).filter((n) => about(n, task.id)), [], 'the former member is not told, not even the title');
    assert.equal((await statusChanges(worker.id)).filter((n) => about(n, task.id)).length, 1, 'the assignee, still a member, is');
    assert.equal((await statusChanges(h.admin.id)).filter((n) => about(n, byAdmin.id)).length, 1, 'an ADMIN sees every project');
  });
});

describe('marking notifications read', () => {
  test('marks one read: 200 with read_at set; marking it again keeps the same read_at', async () => {
    const user = await h.newUser();
    await threeNotificationsFor(user);
    const [target, untouched] = await listed(user);
    const res = await markRead(user, target!.id);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.id, target!.id);
    assert.equal(res.body.kind, target!.kind);
    assert.deepEqual(res.body.payload, target!.payload);
    assert.match(res.body.read_at ?? '', ISO);
    const again = await markRead(user, target!.id);
    assert.equal(again.status, 200);
    assert.equal(again.body.read_at, res.body.read_at, 'the first read_at stays');
    const now = await listed(user);
    assert.equal(now.find((n) => n.id === target!.id)!.read_at, res.body.read_at);
    assert.equal(now.find((n) => n.id === untouched!.id)!.read_at, null, 'other notifications stay unread');
  });

  test("someone else's notification is 404 and stays unread; unknown and malformed ids are 404 and 400", async () => {
    const [user, other] = await Promise.all([h.newUser(), h.newUser()]);
    await threeNotificationsFor(user);
    const [target] = await listed(user);
    const res = await markRead(other, target!.id);
    assert.equal(res.status, 404, res.text);
    assert.equal(res.body.code, 'NOT_FOUND');
    assert.equal((await markRead(h.admin, target!.id)).status, 404, "not even an ADMIN marks another's notification");
    const stored = await notificationRows(h.server, 'id = $1', [target!.id]);
    assert.equal(stored[0]!.read_at, null);
    assert.equal((await markRead(user, 987654321)).status, 404);
    assert.equal((await user.client.put('/api/v1/notifications/abc/read', undefined, { token: user.token })).status, 400);
  });

  test('marks all read: 204, then ?unread=true is empty and earlier read_at values are kept', async () => {
    const [user, other] = await Promise.all([h.newUser(), h.newUser()]);
    await threeNotificationsFor(user);
    await threeNotificationsFor(other);
    const [first] = await listed(user);
    const firstRead = (await markRead(user, first!.id)).body.read_at;

    const res = await markAllRead(user);
    assert.equal(res.status, 204, res.text);
    assert.equal(res.text, '');
    assert.deepEqual(await listed(user, '?unread=true'), []);
    const all = await listed(user);
    assert.equal(all.length, 3);
    assert.ok(all.every((n) => typeof n.read_at === 'string'));
    assert.equal(all.find((n) => n.id === first!.id)!.read_at, firstRead);
    assert.equal((await listed(other, '?unread=true')).length, 3, "another user's notifications stay unread");

    assert.equal((await markAllRead(user)).status, 204, 'with nothing left unread it is still 204');
  });
});

// ── events ─────────────────────────────────────────────────────────────────────────────

describe('real-time events', () => {
  test('each notification has one new-notification events row in room user:<id> carrying it', async () => {
    const user = await h.newUser();
    await threeNotificationsFor(user);
    const mine = await listed(user);
    const events = await eventRows(h.server, `name = 'new-notification' AND room = $1`, [`user:${user.id}`]);
    assert.equal(events.length, mine.length);
    for (const n of mine) {
      const matching = events.filter((e) => e.payload.id === n.id);
      assert.equal(matching.length, 1, `one event for notification ${n.id}`);
      assert.deepEqual(matching[0]!.payload, { ...n });
    }
  });
});

describe('If-Match on marking read', () => {
  test('the ETag of an unread notification no longer matches once it is read: a stale If-Match is 412', async () => {
    const recipient = await h.newUser();
    await threeNotificationsFor(recipient);
    const id = (await listed(recipient))[0]!.id;
    const first = await recipient.client.put<NotificationBody>(`/api/v1/notifications/${id}/read`, undefined, {
      token: recipient.token,
      headers: { 'if-match': `"notification-${id}-v1"` },
    });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.headers.get('etag'), `"notification-${id}-v2"`);
    const stale = await recipient.client.put(`/api/v1/notifications/${id}/read`, undefined, {
      token: recipient.token,
      headers: { 'if-match': `"notification-${id}-v1"` },
    });
    assert.equal(stale.status, 412);
    const current = await recipient.client.put<NotificationBody>(`/api/v1/notifications/${id}/read`, undefined, {
      token: recipient.token,
      headers: { 'if-match': first.headers.get('etag')! },
    });
    assert.equal(current.status, 200);
    assert.equal(current.body.read_at, first.body.read_at);
  });
});
