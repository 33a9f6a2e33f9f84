// Tasks (docs/api.md section 4 "Tasks", section 5), their changes: creation by project members,
// reading and editing with ETags, assignment, deletion rights, the audit records and
// notifications each change writes, and the events row beside every successful change
// (task-created / task-updated / task-deleted in room project:<id>). The list:
// tasks-list.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditRows, type Session } from './helpers/client.js';
import { createTask, eventRows, notificationRows, tasksInProject, team, uniqueWord, type PageBody, type TaskBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();

// ── little helpers ─────────────────────────────────────────────────────────────────────

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const taskRecords = (taskId: number, action: string, result = 'SUCCESS') =>
  auditRows(h.server, `action = $1 AND resource_type = 'TASK' AND resource_id = $2 AND result = $3`, [action, taskId, result]);

const taskEvents = (taskId: number) => eventRows(h.server, `name LIKE 'task-%' AND payload->>'id' = $1`, [String(taskId)]);

const assignedNotifications = (taskId: number) =>
  notificationRows(h.server, `kind = 'task_assigned' AND payload->>'task_id' = $1`, [String(taskId)]);

// ── creating ───────────────────────────────────────────────────────────────────────────

describe('creating a task', () => {
  test('a member creates a task: 201 with Location, status TODO, one CREATE_TASK record and a task-created event', async () => {
    const { owner, projectId, members: [member] } = await team(h, 1);
    const res = await member!.client.post<TaskBody>(
      '/api/v1/tasks',
      { project_id: projectId, title: 'Write the release notes', description: 'For version two', assignee_id: owner.id },
      { token: member!.token },
    );
    assert.equal(res.status, 201, res.text);
    const task = res.body;
    assert.equal(res.headers.get('location'), `/api/v1/tasks/${task.id}`);
    assert.ok(res.headers.get('etag'));
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.ok(Number.isSafeInteger(task.id) && task.id > 0);
    assert.equal(task.project_id, projectId);
    assert.equal(task.title, 'Write the release notes');
    assert.equal(task.description, 'For version two');
    assert.equal(task.status, 'TODO');
    assert.equal(task.assignee_id, owner.id);
    assert.equal(task.created_by, member!.id);
    assert.match(task.created_at, ISO);
    assert.match(task.updated_at, ISO);

    const fetched = await member!.client.get<TaskBody>(res.headers.get('location')!, { token: member!.token });
    assert.equal(fetched.status, 200);
    assert.deepEqual(fetched.body, task);

    const records = await taskRecords(task.id, 'CREATE_TASK');
    assert.equal(records.length, 1);
    assert.equal(records[0]!.actor_id, member!.id);
    assert.deepEqual(records[0]!.metadata, { projectId, title: 'Write the release notes', assigneeId: owner.id });

    const events = await taskEvents(task.id);
    assert.equal(events.length, 1);
    assert.equal(events[0]!.name, 'task-created');
    assert.equal(events[0]!.room, `project:${projectId}`);
    assert.equal(events[0]!.payload.status, 'TODO');
    assert.equal(events[0]!.payload.title, 'Write the release notes');
  });

  test('a task without an assignee records assigneeId null and notifies nobody', async () => {
    const { owner, projectId } = await team(h, 0);
    const task = await createTask(owner, projectId, { title: 'Unowned work' });
    assert.equal(task.assignee_id, null);
    assert.equal(task.description, '');
    const records = await taskRecords(task.id, 'CREATE_TASK');
    assert.deepEqual(records.map((r) => r.metadata), [{ projectId, title: 'Unowned work', assigneeId: null }]);
    assert.equal((await assignedNotifications(task.id)).length, 0);
  });

  test('the assignee of a new task gets a task_assigned notification naming the task, project, title and actor', async () => {
    const { owner, projectId, members: [member] } = await team(h, 1);
    const task = await createTask(owner, projectId, { title: 'Review the budget', assignee_id: member!.id });
    const notes = await assignedNotifications(task.id);
    assert.equal(notes.length, 1);
    assert.equal(notes[0]!.user_id, member!.id);
    assert.deepEqual(notes[0]!.payload, { task_id: task.id, project_id: projectId, title: 'Review the budget', actor_id: owner.id });
    const pushed = await eventRows(h.server, `name = 'new-notification' AND room = $1`, [`user:${member!.id}`]);
    assert.ok(pushed.some((e) => e.payload.id === notes[0]!.id), 'a new-notification event goes to the assignee');

    const seen = await member!.client.get<PageBody<{ id: number; kind: string }>>('/api/v1/notifications', { token: member!.token });
    assert.ok(seen.body.data.some((n) => n.id === notes[0]!.id && n.kind === 'task_assigned'));
  });

  test('assigning a new task to yourself notifies nobody', async () => {
    const { projectId, members: [member] } = await team(h, 1);
    const task = await createTask(member!, projectId, { assignee_id: member!.id });
    assert.equal(task.assignee_id, member!.id);
    assert.equal((await assignedNotifications(task.id)).length, 0);
  });

  test('refuses an assignee who is not a member with 400 and creates nothing', async () => {
    const { owner, projectId } = await team(h, 0);
    const stranger = await h.newUser();
    const title = `Doomed ${uniqueWord()}`;
    const res = await owner.client.post('/api/v1/tasks', { project_id: projectId, title, assignee_id: stranger.id }, { token: owner.token });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.code, 'VALIDATION_FAILED');
    assert.equal(await tasksInProject(h.server, projectId), 0);
    const records = await auditRows(h.server, `action = 'CREATE_TASK' AND actor_id = $1`, [owner.id]);
    assert.equal(records.length, 0, 'a validation failure writes no record');
    assert.equal((await notificationRows(h.server, 'user_id = $1', [stranger.id])).length, 0);
    assert.equal((await eventRows(h.server, `name = 'task-created' AND room = $1`, [`project:${projectId}`])).length, 0);
  });

  test('refuses a task in a project the caller cannot see with 404, records DENIED CREATE_TASK on the project, and creates nothing', async () => {
    const { projectId } = await team(h, 0);
    const outsider = await h.newUser();
    const res = await outsider.client.post('/api/v1/tasks', { project_id: projectId, title: 'Sneaky' }, { token: outsider.token });
    assert.equal(res.status, 404, res.text);
    assert.equal(res.body.code, 'NOT_FOUND');
    const denied = await auditRows(h.server, `action = 'CREATE_TASK' AND actor_id = $1`, [outsider.id]);
    assert.equal(denied.length, 1);
    assert.equal(denied[0]!.result, 'DENIED');
    assert.equal(denied[0]!.resource_type, 'PROJECT');
    assert.equal(denied[0]!.resource_id, projectId);
    assert.equal(await tasksInProject(h.server, projectId), 0);
  });

  test('refuses a task in a project that does not exist with 404', async () => {
    const user = await h.newUser();
    const res = await user.client.post('/api/v1/tasks', { project_id: 987654321, title: 'Nowhere' }, { token: user.token });
    assert.equal(res.status, 404, res.text);
  });

  test('refuses a blank title, a title over 200 characters and unknown fields with 400', async () => {
    const { owner, projectId } = await team(h, 0);
    for (const body of [
      { project_id: projectId, title: '' },
      { project_id: projectId, title: '   ' },
      { project_id: projectId, title: 'x'.repeat(201) },
      { project_id: projectId, title: 'ok', description: 'd'.repeat(10001) },
      { project_id: projectId, title: 'ok', status: 'DONE' },
      { project_id: projectId, title: 'ok', created_by: 1 },
    ]) {
      const res = await owner.client.post('/api/v1/tasks', body, { token: owner.token });
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${res.text}`);
    }
    const longest = await createTask(owner, projectId, { title: 'x'.repeat(200), description: 'd'.repeat(10000) });
    assert.equal(longest.title.length, 200);
    assert.equal(await tasksInProject(h.server, projectId), 1);
  });
});

// ── reading and editing ────────────────────────────────────────────────────────────────

describe('reading and editing a task', () => {
  test('GET answers with a strong ETag and private no-cache; If-None-Match with it gets 304', async () => {
    const { owner, projectId } = await team(h, 0);
    const task = await createTask(owner, projectId);
    const res = await owner.client.get(`/api/v1/tasks/${task.id}`, { token: owner.token });
    assert.equal(res.status, 200);
    const etag = res.headers.get('etag');
    assert.ok(etag && !etag.startsWith('W/'), `strong ETag, got ${etag}`);
    assert.equal(res.headers.get('cache-control'), 'private, no-cache');
    const again = await owner.client.get(`/api/v1/tasks/${task.id}`, { token: owner.token, headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    assert.equal(again.text, '');
    const other = await owner.client.get(`/api/v1/tasks/${task.id}`, { token: owner.token, headers: { 'if-none-match': '"something-else"' } });
    assert.equal(other.status, 200);
  });

  test('a non-member gets 404 for a task, an ADMIN who is not a member gets it', async () => {
    const { owner, projectId } = await team(h, 0);
    const task = await createTask(owner, projectId);
    const outsider = await h.newUser();
    const hidden = await outsider.client.get(`/api/v1/tasks/${task.id}`, { token: outsider.token });
    assert.equal(hidden.status, 404);
    const seen = await h.admin.client.get<TaskBody>(`/api/v1/tasks/${task.id}`, { token: h.admin.token });
    assert.equal(seen.status, 200);
    assert.equal(seen.body.id, task.id);
    assert.equal((await owner.client.get('/api/v1/tasks/99999999999999999999', { token: owner.token })).status, 400);
    assert.equal((await owner.client.get('/api/v1/tasks/987654321', { token: owner.token })).status, 404);
  });

  test('PUT with the current If-Match edits title and description, bumps the ETag and writes a task-updated event', async () => {
    const { owner, projectId, members: [member] } = await team(h, 1);
    const task = await createTask(owner, projectId, { title: 'Draft', description: 'old' });
    const etag = (await owner.client.get(`/api/v1/tasks/${task.id}`, { token: owner.token })).headers.get('etag')!;
    const res = await member!.client.put<TaskBody>(
      `/api/v1/tasks/${task.id}`,
      { title: 'Final', description: 'new text' },
      { token: member!.token, headers: { 'if-match': etag } },
    );
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.title, 'Final');
    assert.equal(res.body.description, 'new text');
    assert.notEqual(res.headers.get('etag'), etag);
    assert.ok(res.body.updated_at >= task.updated_at);
    const fetched = await owner.client.get<TaskBody>(`/api/v1/tasks/${task.id}`, { token: owner.token });
    assert.equal(fetched.body.title, 'Final');
    assert.equal(fetched.headers.get('etag'), res.headers.get('etag'));

    const events = await taskEvents(task.id);
    assert.deepEqual(events.map((e) => e.name), ['task-created', 'task-updated']);
    assert.equal(events[1]!.room, `project:${projectId}`);
    assert.equal(events[1]!.payload.title, 'Final');
  });

  test('PUT with a stale If-Match is 412 and changes nothing', async () => {
    const { owner, projectId } = await team(h, 0);
    const task = await createTask(owner, projectId, { title: 'One' });
    const etag = (await owner.client.get(`/api/v1/tasks/${task.id}`, { token: owner.token })).headers.get('etag')!;
    assert.equal((await owner.client.put(`/api/v1/tasks/${task.id}`, { title: 'Two' }, { token: owner.token, headers: { 'if-match': etag } })).status, 200);
    const stale = await owner.client.put(`/api/v1/tasks/${task.id}`, { title: 'Three' }, { token: owner.token, headers: { 'if-match': etag } });
    assert.equal(stale.status, 412, stale.text);
    assert.equal(stale.body.code, 'PRECONDITION_FAILED');
    const fetched = await owner.client.get<TaskBody>(`/api/v1/tasks/${task.id}`, { token: owner.token });
    assert.equal(fetched.body.title, 'Two');
    assert.equal((await taskEvents(task.id)).length, 2, 'task-created and one task-updated only');
  });

  test('PUT with the values the task already has is 200 and changes nothing', async () => {
    const { owner, projectId } = await team(h, 0);
    const task = await createTask(owner, projectId, { title: 'Same', description: 'same' });
    const before = await owner.client.get<TaskBody>(`/api/v1/tasks/${task.id}`, { token: owner.token });
    const res = await owner.client.put<TaskBody>(`/api/v1/tasks/${task.id}`, { title: 'Same', description: 'same' }, { token: owner.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.updated_at, before.body.updated_at);
    assert.equal(res.headers.get('etag'), before.headers.get('etag'));
    assert.deepEqual((await taskEvents(task.id)).map((e) => e.name), ['task-created']);
  });

  test('PUT by a non-member is 404 and leaves the task alone', async () => {
    const { owner, projectId } = await team(h, 0);
    const task = await createTask(owner, projectId, { title: 'Mine' });
    const outsider = await h.newUser();
    const res = await outsider.client.put(`/api/v1/tasks/${task.id}`, { title: 'Theirs' }, { token: outsider.token });
    assert.equal(res.status, 404, res.text);
    assert.equal((await owner.client.get<TaskBody>(`/api/v1/tasks/${task.id}`, { token: owner.token })).body.title, 'Mine');
  });
});

// ── assigning ──────────────────────────────────────────────────────────────────────────

describe('assigning a task', () => {
  const assign = (who: Session, taskId: number, assigneeId: number | null, headers?: Record<string, string>) =>
    who.client.put<TaskBody>(`/api/v1/tasks/${taskId}/assignee`, { assignee_id: assigneeId }, { token: who.token, headers });

  test('reassigning records ASSIGN_TASK with the old and new assignee, notifies the new one and writes a task-updated event', async () => {
    const { owner, projectId, members: [first, second] } = await team(h, 2);
    const task = await createTask(owner, projectId, { assignee_id: first!.id });
    const res = await assign(owner, task.id, second!.id);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.assignee_id, second!.id);
    const records = await taskRecords(task.id, 'ASSIGN_TASK');
    assert.equal(records.length, 1);
    assert.equal(records[0]!.actor_id, owner.id);
    assert.deepEqual(records[0]!.metadata, { oldAssigneeId: first!.id, newAssigneeId: second!.id });
    const notes = await assignedNotifications(task.id);
    assert.deepEqual(notes.map((n) => n.user_id), [first!.id, second!.id], 'one at creation, one for the reassignment');
    assert.deepEqual(notes[1]!.payload, { task_id: task.id, project_id: projectId, title: task.title, actor_id: owner.id });
    const events = await taskEvents(task.id);
    assert.deepEqual(events.map((e) => e.name), ['task-created', 'task-updated']);
    assert.equal(events[1]!.payload.assignee_id, second!.id);
  });

  test('null unassigns, recording ASSIGN_TASK with newAssigneeId null and notifying nobody', async () => {
    const { owner, projectId, members: [member] } = await team(h, 1);
    const task = await createTask(owner, projectId, { assignee_id: member!.id });
    const res = await assign(owner, task.id, null);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.assignee_id, null);
    const records = await taskRecords(task.id, 'ASSIGN_TASK');
    assert.deepEqual(records.map((r) => r.metadata), [{ oldAssigneeId: member!.id, newAssigneeId: null }]);
    assert.equal((await assignedNotifications(task.id)).length, 1, 'only the notification from creation');
  });

  test('a member who assigns a task to themself gets no notification', async () => {
    const { owner, projectId, members: [member] } = await team(h, 1);
    const task = await createTask(owner, projectId);
    assert.equal((await assign(member!, task.id, member!.id)).status, 200);
    assert.equal((await taskRecords(task.id, 'ASSIGN_TASK')).length, 1);
    assert.equal((await assignedNotifications(task.id)).length, 0);
  });

  test('setting the assignee the task already has is 200 with no record, notification or event', async () => {
    const { owner, projectId, members: [member] } = await team(h, 1);
    const task = await createTask(owner, projectId, { assignee_id: member!.id });
    const before = await owner.client.get<TaskBody>(`/api/v1/tasks/${task.id}`, { token: owner.token });
    const res = await assign(owner, task.id, member!.id);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.updated_at, before.body.updated_at);
    assert.equal(res.headers.get('etag'), before.headers.get('etag'));
    assert.equal((await taskRecords(task.id, 'ASSIGN_TASK')).length, 0);
    assert.equal((await assignedNotifications(task.id)).length, 1);
    assert.equal((await taskEvents(task.id)).length, 1);

    const unassigned = await createTask(owner, projectId);
    assert.equal((await assign(owner, unassigned.id, null)).status, 200);
    assert.equal((await taskRecords(unassigned.id, 'ASSIGN_TASK')).length, 0);
  });

  test('refuses an assignee who is not a member with 400, writing no record', async () => {
    const { owner, projectId } = await team(h, 0);
    const stranger = await h.newUser();
    const task = await createTask(owner, projectId);
    const res = await assign(owner, task.id, stranger.id);
    assert.equal(res.status, 400, res.text);
    assert.equal((await owner.client.get<TaskBody>(`/api/v1/tasks/${task.id}`, { token: owner.token })).body.assignee_id, null);
    assert.equal((await auditRows(h.server, `action = 'ASSIGN_TASK' AND resource_id = $1`, [task.id])).length, 0);
    assert.equal((await notificationRows(h.server, 'user_id = $1', [stranger.id])).length, 0);
  });

  test('refuses a stale If-Match with 412 and a non-member with 404 recorded as DENIED', async () => {
    const { owner, projectId, members: [a, b] } = await team(h, 2);
    const task = await createTask(owner, projectId);
    const etag = (await owner.client.get(`/api/v1/tasks/${task.id}`, { token: owner.token })).headers.get('etag')!;
    assert.equal((await assign(owner, task.id, a!.id, { 'if-match': etag })).status, 200);
    const stale = await assign(owner, task.id, b!.id, { 'if-match': etag });
    assert.equal(stale.status, 412, stale.text);

    const outsider = await h.newUser();
    const hidden = await assign(outsider, task.id, null);
    assert.equal(hidden.status, 404, hidden.text);
    const denied = await taskRecords(task.id, 'ASSIGN_TASK', 'DENIED');
    assert.deepEqual(denied.map((r) => r.actor_id), [outsider.id]);
    assert.equal((await owner.client.get<TaskBody>(`/api/v1/tasks/${task.id}`, { token: owner.token })).body.assignee_id, a!.id);
    assert.equal((await taskRecords(task.id, 'ASSIGN_TASK')).length, 1);
  });
});

// ── deleting ───────────────────────────────────────────────────────────────────────────

describe('deleting a task', () => {
  async function expectDeleted(by: Session, task: TaskBody) {
    const res = await by.client.delete(`/api/v1/tasks/${task.id}`, { token: by.token });
    assert.equal(res.status, 204, res.text);
    assert.equal(res.text, '');
    assert.equal((await h.admin.client.get(`/api/v1/tasks/${task.id}`, { token: h.admin.token })).status, 404);
    const records = await taskRecords(task.id, 'DELETE_TASK');
    assert.equal(records.length, 1);
    assert.equal(records[0]!.actor_id, by.id);
    assert.deepEqual(records[0]!.metadata, { projectId: task.project_id, title: task.title });
    const events = await taskEvents(task.id);
    assert.equal(events.at(-1)!.name, 'task-deleted');
    assert.equal(events.at(-1)!.room, `project:${task.project_id}`);
    assert.deepEqual(events.at(-1)!.payload, { id: task.id, project_id: task.project_id });
  }

  test('its creator deletes it: 204, one DELETE_TASK record and a task-deleted event', async () => {
    const { projectId, members: [member] } = await team(h, 1);
    await expectDeleted(member!, await createTask(member!, projectId));
  });

  test("a project OWNER deletes a member's task", async () => {
    const { owner, projectId, members: [member] } = await team(h, 1);
    await expectDeleted(owner, await createTask(member!, projectId));
  });

  test('an ADMIN who is not a member deletes a task', async () => {
    const { owner, projectId } = await team(h, 0);
    await expectDeleted(h.admin, await createTask(owner, projectId));
  });

  test("refuses another member's deletion with 403, records DENIED and keeps the task", async () => {
    const { owner, projectId, members: [member] } = await team(h, 1);
    const task = await createTask(owner, projectId);
    const res = await member!.client.delete(`/api/v1/tasks/${task.id}`, { token: member!.token });
    assert.equal(res.status, 403, res.text);
    assert.equal(res.body.code, 'FORBIDDEN');
    const denied = await taskRecords(task.id, 'DELETE_TASK', 'DENIED');
    assert.deepEqual(denied.map((r) => r.actor_id), [member!.id]);
    assert.equal((await taskRecords(task.id, 'DELETE_TASK')).length, 0);
    assert.equal((await owner.client.get(`/api/v1/tasks/${task.id}`, { token: owner.token })).status, 200);
    assert.ok(!(await taskEvents(task.id)).some((e) => e.name === 'task-deleted'));
  });

  test('refuses a non-member with 404 recorded as DENIED, and a second deletion with 404', async () => {
    const { owner, projectId } = await team(h, 0);
    const task = await createTask(owner, projectId);
    const outsider = await h.newUser();
    assert.equal((await outsider.client.delete(`/api/v1/tasks/${task.id}`, { token: outsider.token })).status, 404);
    assert.equal((await taskRecords(task.id, 'DELETE_TASK', 'DENIED')).length, 1);
    assert.equal((await owner.client.delete(`/api/v1/tasks/${task.id}`, { token: owner.token })).status, 204);
    assert.equal((await owner.client.delete(`/api/v1/tasks/${task.id}`, { token: owner.token })).status, 404);
    assert.equal((await taskRecords(task.id, 'DELETE_TASK')).length, 1);
  });
});
