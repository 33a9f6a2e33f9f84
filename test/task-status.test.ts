// The task status machine (docs/api.md section 4 "Tasks"), table-driven over HTTP: all 25
// from→to pairs. An allowed move is 200 with one CHANGE_TASK_STATUS record, a
// task_status_changed notification to the creator and the assignee (never the actor) and a
// task-updated event; a disallowed one is 409 INVALID_TRANSITION listing the allowed
// targets; the current status again is 200 and changes nothing.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditRows, type Session } from './helpers/client.js';
import { addMember, createProject, createTask, eventRows, notificationRows, type Problem, type TaskBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

type Status = 'TODO' | 'IN_PROGRESS' | 'IN_REVIEW' | 'DONE' | 'CANCELED';
const STATUSES: Status[] = ['TODO', 'IN_PROGRESS', 'IN_REVIEW', 'DONE', 'CANCELED'];

// The contract's table, written out here rather than imported, so that a wrong table in the
// source fails these tests.
const CONTRACT: Record<Status, Status[]> = {
  TODO: ['IN_PROGRESS', 'CANCELED'],
  IN_PROGRESS: ['TODO', 'IN_REVIEW', 'DONE', 'CANCELED'],
  IN_REVIEW: ['IN_PROGRESS', 'DONE', 'CANCELED'],
  DONE: ['IN_PROGRESS'],
  CANCELED: ['TODO'],
};

/** How a new (TODO) task reaches each state through allowed transitions only. */
const ROUTE_TO: Record<Status, Status[]> = {
  TODO: [],
  IN_PROGRESS: ['IN_PROGRESS'],
  IN_REVIEW: ['IN_PROGRESS', 'IN_REVIEW'],
  DONE: ['IN_PROGRESS', 'DONE'],
  CANCELED: ['CANCELED'],
};

const h = useTestServer();
/** Creates the tasks and owns the project. */
let creator: Session;
/** Every task here is assigned to them. */
let assignee: Session;
/** Makes the status changes under test. */
let actor: Session;
let outsider: Session;
let projectId: number;

h.before(async () => {
  [creator, assignee, actor, outsider] = await Promise.all([h.newUser(), h.newUser(), h.newUser(), h.newUser()]);
  projectId = (await createProject(creator)).id;
  await addMember(creator, projectId, assignee.id);
  await addMember(creator, projectId, actor.id);
});

// ── little helpers ─────────────────────────────────────────────────────────────────────

const setStatus = (who: Session, taskId: number, status: string, headers?: Record<string, string>) =>
  who.client.put<TaskBody & Problem & { allowed_transitions?: string[] }>(`/api/v1/tasks/${taskId}/status`, { status }, { token: who.token, headers });

async function getTask(taskId: number) {
  const res = await creator.client.get<TaskBody>(`/api/v1/tasks/${taskId}`, { token: creator.token });
  assert.equal(res.status, 200, res.text);
  return { task: res.body, etag: res.headers.get('etag') };
}

/** A new task (created by `creator`, assigned to `assignee`) moved to `status` the allowed way. */
async function taskIn(status: Status): Promise<TaskBody> {
  const task = await createTask(creator, projectId, { assignee_id: assignee.id });
  let current: Status = 'TODO';
  for (const next of ROUTE_TO[status]) {
    assert.ok(CONTRACT[current].includes(next), `set-up route ${current} → ${next} must be allowed`);
    const res = await setStatus(creator, task.id, next);
    assert.equal(res.status, 200, `set-up ${current} → ${next}: ${res.text}`);
    current = next;
  }
  const { task: reached } = await getTask(task.id);
  assert.equal(reached.status, status);
  return reached;
}

/** Everything a status change may leave behind for one task. */
async function traces(taskId: number) {
  const [records, notifications, events] = await Promise.all([
    auditRows(h.server, `action = 'CHANGE_TASK_STATUS' AND resource_type = 'TASK' AND resource_id = $1`, [taskId]),
    notificationRows(h.server, `kind = 'task_status_changed' AND payload->>'task_id' = $1`, [String(taskId)]),
    eventRows(h.server, `name = 'task-updated' AND payload->>'id' = $1`, [String(taskId)]),
  ]);
  return { records, notifications, events };
}

const sorted = (xs: readonly string[]) => [...xs].sort();

// ── the 25 pairs ───────────────────────────────────────────────────────────────────────

for (const from of STATUSES) {
  describe(`from ${from}`, () => {
    for (const to of STATUSES) {
      if (from === to) {
        test(`setting ${from} again is 200 and writes no record, notification or event, nor touches updated_at`, async () => {
          const task = await taskIn(from);
          const before = await getTask(task.id);
          const tracesBefore = await traces(task.id);

          const res = await setStatus(actor, task.id, to);
          assert.equal(res.status, 200, res.text);
          assert.equal(res.body.status, from);
          assert.equal(res.body.updated_at, before.task.updated_at);

          const afterwards = await getTask(task.id);
          assert.equal(afterwards.task.status, from);
          assert.equal(afterwards.task.updated_at, before.task.updated_at);
          assert.equal(afterwards.etag, before.etag, 'an unchanged task keeps its version');
          const tracesAfter = await traces(task.id);
          assert.equal(tracesAfter.records.length, tracesBefore.records.length);
          assert.equal(tracesAfter.notifications.length, tracesBefore.notifications.length);
          assert.equal(tracesAfter.events.length, tracesBefore.events.length);
        });
      } else if (CONTRACT[from].includes(to)) {
        test(`${from} → ${to} is allowed: 200, one CHANGE_TASK_STATUS record, creator and assignee notified`, async () => {
          const task = await taskIn(from);
          const before = await getTask(task.id);
          const tracesBefore = await traces(task.id);

          const res = await setStatus(actor, task.id, to);
          assert.equal(res.status, 200, res.text);
          assert.equal(res.body.status, to);
          assert.notEqual(res.headers.get('etag'), before.etag, 'a change bumps the version');

          const afterwards = await getTask(task.id);
          assert.equal(afterwards.task.status, to);

          const tracesAfter = await traces(task.id);
          const newRecords = tracesAfter.records.slice(tracesBefore.records.length);
          assert.equal(newRecords.length, 1, 'exactly one record');
          const record = newRecords[0]!;
          assert.equal(record.actor_id, actor.id);
          assert.equal(record.result, 'SUCCESS');
          assert.deepEqual(record.metadata, { oldStatus: from, newStatus: to });

          const newNotifications = tracesAfter.notifications.slice(tracesBefore.notifications.length);
          assert.deepEqual(
            newNotifications.map((n) => n.user_id).sort((a, b) => a - b),
            [creator.id, assignee.id].sort((a, b) => a - b),
            'the creator and the assignee are notified, the actor is not',
          );
          for (const n of newNotifications) {
            assert.deepEqual(n.payload, {
              task_id: task.id, project_id: projectId, title: task.title, old_status: from, new_status: to, actor_id: actor.id,
            });
          }

          const newEvents = tracesAfter.events.slice(tracesBefore.events.length);
          assert.equal(newEvents.length, 1, 'one task-updated event');
          assert.equal(newEvents[0]!.room, `project:${projectId}`);
          assert.equal(newEvents[0]!.payload.status, to);
        });
      } else {
        test(`${from} → ${to} is refused with 409 INVALID_TRANSITION listing ${CONTRACT[from].join(', ')}, and changes nothing`, async () => {
          const task = await taskIn(from);
          const before = await getTask(task.id);
          const tracesBefore = await traces(task.id);

          const res = await setStatus(actor, task.id, to);
          assert.equal(res.status, 409, res.text);
          assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
          assert.equal(res.body.code, 'INVALID_TRANSITION');
          const allowed = res.body.allowed_transitions ?? [];
          assert.deepEqual(sorted(allowed), sorted(CONTRACT[from]));

          const afterwards = await getTask(task.id);
          assert.equal(afterwards.task.status, from);
          assert.equal(afterwards.task.updated_at, before.task.updated_at);
          assert.equal(afterwards.etag, before.etag);
          const tracesAfter = await traces(task.id);
          assert.equal(tracesAfter.records.length, tracesBefore.records.length, 'a conflict writes no record');
          assert.equal(tracesAfter.notifications.length, tracesBefore.notifications.length);
          assert.equal(tracesAfter.events.length, tracesBefore.events.length);
        });
      }
    }
  });
}

// ── who is notified, and who may move a task ───────────────────────────────────────────

describe('notification recipients and access', () => {
  test('a change made by the assignee notifies only the creator', async () => {
    const task = await createTask(creator, projectId, { assignee_id: assignee.id });
    const res = await setStatus(assignee, task.id, 'IN_PROGRESS');
    assert.equal(res.status, 200, res.text);
    const { notifications } = await traces(task.id);
    assert.deepEqual(notifications.map((n) => n.user_id), [creator.id]);
  });

  test('a change made by a creator who assigned themself notifies nobody', async () => {
    const task = await createTask(creator, projectId, { assignee_id: creator.id });
    const res = await setStatus(creator, task.id, 'CANCELED');
    assert.equal(res.status, 200, res.text);
    const { records, notifications } = await traces(task.id);
    assert.equal(records.length, 1);
    assert.equal(notifications.length, 0);
  });

  test('an unassigned task notifies only its creator', async () => {
    const task = await createTask(creator, projectId);
    const res = await setStatus(actor, task.id, 'IN_PROGRESS');
    assert.equal(res.status, 200, res.text);
    const { notifications } = await traces(task.id);
    assert.deepEqual(notifications.map((n) => n.user_id), [creator.id]);
  });

  test('an ADMIN who is not a member may move a task', async () => {
    const task = await createTask(creator, projectId, { assignee_id: assignee.id });
    const res = await setStatus(h.admin, task.id, 'IN_PROGRESS');
    assert.equal(res.status, 200, res.text);
    const { records } = await traces(task.id);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.actor_id, h.admin.id);
  });

  test('refuses a status change by a non-member with 404 and records DENIED, leaving the task as it was', async () => {
    const task = await createTask(creator, projectId, { assignee_id: assignee.id });
    const res = await setStatus(outsider, task.id, 'IN_PROGRESS');
    assert.equal(res.status, 404, res.text);
    const denied = await auditRows(h.server, `action = 'CHANGE_TASK_STATUS' AND resource_id = $1 AND result = 'DENIED'`, [task.id]);
    assert.equal(denied.length, 1);
    assert.equal(denied[0]!.actor_id, outsider.id);
    assert.equal((await getTask(task.id)).task.status, 'TODO');
    const { records, notifications, events } = await traces(task.id);
    assert.equal(records.filter((r) => r.result === 'SUCCESS').length, 0);
    assert.equal(notifications.length, 0);
    assert.equal(events.length, 0);
  });

  test('refuses a status change with a stale If-Match with 412 and changes nothing', async () => {
    const task = await createTask(creator, projectId, { assignee_id: assignee.id });
    const { etag } = await getTask(task.id);
    assert.ok(etag);
    assert.equal((await setStatus(actor, task.id, 'IN_PROGRESS', { 'if-match': etag })).status, 200);
    const stale = await setStatus(actor, task.id, 'IN_REVIEW', { 'if-match': etag });
    assert.equal(stale.status, 412, stale.text);
    assert.equal(stale.body.code, 'PRECONDITION_FAILED');
    assert.equal((await getTask(task.id)).task.status, 'IN_PROGRESS');
    assert.equal((await traces(task.id)).records.length, 1);
  });

  test('refuses an unknown status with 400', async () => {
    const task = await createTask(creator, projectId);
    const res = await setStatus(actor, task.id, 'ARCHIVED');
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.code, 'VALIDATION_FAILED');
    assert.equal((await getTask(task.id)).task.status, 'TODO');
  });
});
