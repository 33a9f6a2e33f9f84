// The hot writes, sent at once over real HTTP so that they share batches (use-cases/batch.ts):
// good requests mixed with refused, invalid and conflicting ones. Whichever batch a request
// lands in, it gets its own answer, and the audit log holds exactly one record for each
// success, one DENIED record for each refusal, and none for a 400 or a 409.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { auditRows } from './helpers/client.js';
import { createProject, createTask, team, type TaskBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();

describe('hot writes sent at once', () => {
  test('task creations mixing members, outsiders and a non-member assignee: each its own answer and its own record', async () => {
    const { owner, projectId, members } = await team(h, 3);
    const outsider = await h.newUser();
    const hidden = await createProject(outsider);
    const sent = Array.from({ length: 24 }, (_, i) => {
      const requestId = `batch-http-${randomUUID()}`;
      const by = i % 6 === 3 ? outsider : [owner, ...members][i % 4]!;
      const body =
        i % 6 === 3 ? { project_id: projectId, title: `outsider ${i}` } // not a member: 404, DENIED
        : i % 6 === 5 ? { project_id: projectId, title: `bad assignee ${i}`, assignee_id: outsider.id } // 400, no record
        : i % 8 === 7 ? { project_id: hidden.id, title: `hidden ${i}` } // a project the member cannot see: 404, DENIED
        : { project_id: projectId, title: `task ${i}` };
      return { i, by, body, requestId };
    });
    const answers = await Promise.all(sent.map((s) => s.by.client.post<TaskBody>('/api/v1/tasks', s.body, { token: s.by.token, headers: { 'x-request-id': s.requestId } })));
    for (const [n, s] of sent.entries()) {
      const res = answers[n]!;
      const records = await auditRows(h.server, 'request_id = $1', [s.requestId]);
      const kind = s.body.title.split(' ')[0];
      if (kind === 'task') {
        assert.equal(res.status, 201, `${s.i}: ${res.text}`);
        assert.equal(res.body.title, s.body.title, 'its own task, not another request\'s');
        assert.equal(res.body.created_by, s.by.id);
        assert.deepEqual(records.map((r) => [r.action, r.result, r.resource_type, r.resource_id, r.actor_id]), [['CREATE_TASK', 'SUCCESS', 'TASK', res.body.id, s.by.id]]);
        assert.equal(records[0]!.metadata.title, s.body.title);
      } else if (kind === 'bad') {
        assert.equal(res.status, 400, `${s.i}: ${res.text}`);
        assert.deepEqual(records, []);
      } else {
        assert.equal(res.status, 404, `${s.i}: ${res.text}`);
        assert.deepEqual(records.map((r) => [r.action, r.result, r.resource_type, r.resource_id]), [['CREATE_TASK', 'DENIED', 'PROJECT', s.body.project_id]]);
      }
    }
    const created = await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks WHERE project_id = ANY ($1)', [[projectId, hidden.id]]);
    assert.equal(created[0]!.n, sent.filter((s) => s.body.title.startsWith('task')).length, 'nothing of a refused or invalid request was written');
  });

  test('status changes of many tasks at once, two of them on one task and some not allowed: each its own answer, records in the order they happened', async () => {
    const { owner, projectId, member } = await team(h, 1);
    const tasks = await Promise.all(Array.from({ length: 10 }, () => createTask(owner, projectId)));
    const requests = [
      ...tasks.map((t) => ({ id: t.id, status: 'IN_PROGRESS' })), // TODO → IN_PROGRESS: allowed
      { id: tasks[0]!.id, status: 'IN_REVIEW' }, // after the first: IN_PROGRESS → IN_REVIEW
      // Allowed after IN_PROGRESS only, so that whichever of a task's two requests is served first,
      // every 200 is a change with its record (TODO again, served first, would be an unchanged 200).
      ...tasks.slice(1, 4).map((t) => ({ id: t.id, status: 'IN_REVIEW' })),
      { id: tasks[5]!.id, status: 'DONE' }, // IN_PROGRESS → DONE: allowed
    ];
    const outsider = await h.newUser();
    const refused = outsider.client.put(`/api/v1/tasks/${tasks[9]!.id}/status`, { status: 'CANCELED' }, { token: outsider.token });
    const answers = await Promise.all([...requests.map((r) => member.client.put<TaskBody>(`/api/v1/tasks/${r.id}/status`, { status: r.status }, { token: member.token })), refused]);
    // Requests of one task may be served in any order: each answer is 200 or 409, and the task's
    // records chain from TODO to its final status, one per 200.
    for (const task of tasks) {
      const mine = requests.map((r, n) => ({ ...r, res: answers[n]! })).filter((r) => r.id === task.id);
      const records = await auditRows(h.server, `action = 'CHANGE_TASK_STATUS' AND resource_id = $1 AND result = 'SUCCESS'`, [task.id]);
      assert.equal(records.length, mine.filter((r) => r.res.status === 200).length, `task ${task.id}: one record per change`);
      let status = 'TODO';
      for (const r of records) {
        assert.equal(r.metadata.oldStatus, status, `task ${task.id}: each change starts where the one before ended`);
        status = r.metadata.newStatus as string;
      }
      for (const r of mine) assert.ok(r.res.status === 200 || r.res.status === 409, `${r.res.status} ${r.res.text}`);
      const now = await member.client.get<TaskBody>(`/api/v1/tasks/${task.id}`, { token: member.token });
      assert.equal(now.body.status, status, 'the task ends where its last record says');
    }
    assert.equal(answers[answers.length - 1]!.status, 404);
    const denied = await auditRows(h.server, `action = 'CHANGE_TASK_STATUS' AND resource_id = $1 AND result = 'DENIED'`, [tasks[9]!.id]);
    assert.equal(denied.length, 1);
  });

  test('likes of one post from many users at once: every like counted, one notification each', async () => {
    const author = await h.newUser();
    const post = await author.client.post<{ id: number }>('/api/v1/posts', { content: `post ${randomUUID()}` }, { token: author.token });
    const likers = await Promise.all(Array.from({ length: 8 }, () => h.newUser()));
    const answers = await Promise.all(likers.flatMap((u) => [1, 2].map(() => u.client.put<{ like_count: number; liked_by_me: boolean }>(`/api/v1/posts/${post.body.id}/like`, undefined, { token: u.token }))));
    for (const res of answers) {
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.liked_by_me, true);
    }
    const after = await author.client.get<{ like_count: number }>(`/api/v1/posts/${post.body.id}`, { token: author.token });
    assert.equal(after.body.like_count, likers.length, 'a second like of the same user changed nothing');
    const notified = await h.server.owner.query<{ n: number }>(`SELECT count(*)::int AS n FROM notifications WHERE kind = 'post_liked' AND (payload->>'post_id')::bigint = $1`, [post.body.id]);
    assert.equal(notified[0]!.n, likers.length);
  });
});
