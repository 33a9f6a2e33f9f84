// A lone run's one-statement form (RunOptions.alone; CREATE_TASK_ALONE and SET_TASK_STATUS_ALONE, composed with its
// caller's check, record and outbox row in audit-writer.repository.ts): where it writes, it writes
// what the use case would have, in one transaction, and the body never runs; wherever the caller
// is not entitled, or the case is one the SQL leaves to the body, or the statement fails, it
// writes nothing and the body decides. Runs are submitted one at a time, so each goes alone,
// except under "runs submitted together": there the first goes alone at once, and the others
// queue behind it for one batch, which goes as the form for many runs (CREATE_TASK_ALONE.many).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import type { ActorContext } from '../src/context.js';
import { runnerStore } from '../src/runtime.js';
import { createAuditWriter } from '../src/modules/audit/audit.writer.js';
import { CREATE_TASK_ALONE, SET_TASK_STATUS_ALONE, taskOfRow, type TaskRow } from '../src/modules/tasks/tasks.repository.js';
import { insertUser } from '../src/modules/users/users.repository.js';
import { CommitSignal, type Committed } from '../src/background/commit-signal.js';
import { createRunner, useCase, type Run } from '../src/use-cases/runner.js';
import { batchingFor } from '../src/use-cases/batch.js';
import { presentTask } from '../src/modules/tasks/tasks.presenter.js';
import pg from 'pg';
import { needsPostgres } from './helpers/server.js';
import { auditRows } from './helpers/client.js';
import { createProject, team, type TaskBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();
const commits = new CommitSignal();
const announced: Committed[] = [];
commits.onCommitted((c) => announced.push(c));
let runner: Run | undefined;
const run: Run = (ctx, uc, body, opts) => (runner ??= createRunner(h.server.db, runnerStore(createAuditWriter(Buffer.alloc(32, 1))), commits))(ctx, uc, body, opts);

const CREATE = useCase('test.createAlone', ['CREATE_TASK'], { batch: true });

/** A user with a live session, and a project they are a member of (as OWNER). */
async function member(): Promise<{ ctx: ActorContext; projectId: number }> {
  const user = (await insertUser(h.server.db, { email: `alone-${randomUUID()}@test.local`, name: 'Alone', passwordHash: 'x', role: 'USER' }))!;
  const session = await h.server.owner.query<{ id: number }>(`INSERT INTO sessions (user_id, expires_at) VALUES ($1, now() + interval '1 hour') RETURNING id`, [user.id]);
  const project = await h.server.owner.query<{ id: number }>(`INSERT INTO projects (name, description, created_by) VALUES ('alone', '', $1) RETURNING id`, [user.id]);
  await h.server.owner.query(`INSERT INTO project_members (project_id, user_id, role) VALUES ($1, $2, 'OWNER')`, [project[0]!.id, user.id]);
  const ctx = { actor: { id: user.id, email: user.email, name: user.name, role: 'USER' as const, sessionId: session[0]!.id }, ip: '10.0.0.7', userAgent: 'alone-test', requestId: `alone-${randomUUID()}` };
  return { ctx, projectId: project[0]!.id };
}

/** Creates `title` in `projectId` through the runner, in its one-statement form; answers the task, or 'body' when the body ran instead. */
async function create(ctx: ActorContext, projectId: number, title: string, through: Run = run): Promise<TaskRow | 'body'> {
  return through<TaskRow | 'body'>(ctx, CREATE, async (uow) => {
    uow.withoutRecord('unchanged'); // what the body does is not what is tried here: only that it ran
    return 'body';
  }, { alone: { change: CREATE_TASK_ALONE, params: [projectId, title, 'made alone'], answer: taskOfRow } });
}

const tasksTitled = async (title: string) => (await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks WHERE title = $1', [title]))[0]!.n;

describe('a lone run in its one-statement form', () => {
  test('a member\'s task: the task, its one record and its outbox row commit together, and the body never runs', async () => {
    const { ctx, projectId } = await member();
    announced.length = 0;
    const task = await create(ctx, projectId, 'one statement');
    assert.notEqual(task, 'body', 'the statement wrote, so the body did not run');
    const t = task as TaskRow;
    assert.deepEqual([t.project_id, t.title, t.description, t.status, t.assignee_id, t.created_by, t.version], [projectId, 'one statement', 'made alone', 'TODO', null, ctx.actor.id, 1]);
    assert.match(t.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const records = await auditRows(h.server, 'request_id = $1', [ctx.requestId]);
    assert.deepEqual(
      records.map((r) => [r.actor_id, r.action, r.resource_type, r.resource_id, r.result, r.metadata, r.ip, r.user_agent]),
      [[ctx.actor.id, 'CREATE_TASK', 'TASK', t.id, 'SUCCESS', { projectId, title: 'one statement', assigneeId: null }, '10.0.0.7', 'alone-test']],
    );
    const outbox = await h.server.owner.query<{ items: Array<{ name: string; room: string; payload: Record<string, unknown> }>; xmin: string }>(
      `SELECT items, xmin::text FROM outbox WHERE items::text LIKE '%"audit-record"%' AND (items->1->'payload'->>'id')::bigint = $1`,
      [records[0]!.id],
    );
    assert.equal(outbox.length, 1, 'one outbox row: the change\'s event, then its record\'s');
    assert.deepEqual(outbox[0]!.items.map((i) => [i.name, i.room]), [['task-created', `project:${projectId}`], ['audit-record', 'admin']]);
    const xmins = await h.server.owner.query<{ task: string; record: string }>(
      'SELECT (SELECT xmin::text FROM tasks WHERE id = $1) AS task, (SELECT xmin::text FROM audit_log WHERE id = $2) AS record',
      [t.id, records[0]!.id],
    );
    assert.deepEqual([xmins[0]!.task, xmins[0]!.record], [outbox[0]!.xmin, outbox[0]!.xmin], 'one transaction');
    assert.deepEqual(announced, [{ audited: true, events: 2 }], 'the relay and the sealer are told, as after any commit');
  });

  const notEntitled: Array<[string, (m: { ctx: ActorContext; projectId: number }) => Promise<{ ctx: ActorContext; projectId: number }>]> = [
    ['not a member of the project', async (m) => {
      await h.server.owner.query('DELETE FROM project_members WHERE project_id = $1 AND user_id = $2', [m.projectId, m.ctx.actor.id]);
      return m;
    }],
    ['a project that does not exist', async (m) => ({ ...m, projectId: m.projectId + 1_000_000 })],
    ['a revoked session', async (m) => {
      await h.server.owner.query(`UPDATE sessions SET revoked_at = now(), revoked_reason = 'logout' WHERE id = $1`, [m.ctx.actor.sessionId]);
      return m;
    }],
    ['an expired session', async (m) => {
      await h.server.owner.query(`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = $1`, [m.ctx.actor.sessionId]);
      return m;
    }],
    ['a deactivated user', async (m) => {
      await h.server.owner.query('UPDATE users SET active = false WHERE id = $1', [m.ctx.actor.id]);
      return m;
    }],
    ['another user\'s session', async (m) => {
      const other = await member();
      return { ...m, ctx: { ...m.ctx, actor: { ...m.ctx.actor, sessionId: other.ctx.actor.sessionId } } };
    }],
  ];
  for (const [name, change] of notEntitled) {
    test(`${name}: the statement writes nothing and the body decides`, async () => {
      const { ctx, projectId } = await change(await member());
      const title = `not entitled ${randomUUID()}`;
      const answer = await create(ctx, projectId, title).catch((err: { code?: string }) => `refused ${err.code}`);
      assert.ok(answer === 'body' || (typeof answer === 'string' && answer.startsWith('refused ')), `the body ran and answered: ${JSON.stringify(answer)}`);
      assert.equal(await tasksTitled(title), 0, 'no task');
      assert.deepEqual(await auditRows(h.server, 'request_id = $1', [ctx.requestId]), [], 'no record');
    });
  }

  test('a statement that fails (a title the table refuses) writes nothing, and the body runs', async () => {
    const { ctx, projectId } = await member();
    const title = 'x'.repeat(201); // tasks_title_check: at most 200
    assert.equal(await create(ctx, projectId, title), 'body');
    assert.equal(await tasksTitled(title), 0);
    assert.deepEqual(await auditRows(h.server, 'request_id = $1', [ctx.requestId]), []);
  });
});

describe('POST /tasks alone and in a transaction answer, record and announce alike', () => {
  test('a member\'s task (one statement) and an ADMIN\'s in a project they are not a member of (a transaction)', async () => {
    const { owner, projectId } = await team(h, 0);
    const viaStatement = await owner.client.post<TaskBody>('/api/v1/tasks', { project_id: projectId, title: '  alone  ', description: 'd' }, { token: owner.token });
    const viaTransaction = await h.admin.client.post<TaskBody>('/api/v1/tasks', { project_id: projectId, title: '  alone  ', description: 'd' }, { token: h.admin.token });
    assert.equal(viaStatement.status, 201, viaStatement.text);
    assert.equal(viaTransaction.status, 201, viaTransaction.text);
    const shape = (b: TaskBody) => Object.keys(b).join(',');
    assert.equal(shape(viaStatement.body), shape(viaTransaction.body));
    for (const [res, by] of [[viaStatement, owner.id], [viaTransaction, h.admin.id]] as const) {
      assert.equal(res.body.title, 'alone', 'trimmed');
      assert.equal(res.headers.get('location'), `/api/v1/tasks/${res.body.id}`);
      const records = await auditRows(h.server, `action = 'CREATE_TASK' AND resource_id = $1`, [res.body.id]);
      assert.deepEqual(records.map((r) => [r.actor_id, r.result, r.metadata]), [[by, 'SUCCESS', { projectId, title: 'alone', assigneeId: null }]]);
      const events = await h.server.owner.query<{ items: Array<{ name: string; room: string; payload: unknown }>; text: string }>(
        `SELECT items, items::text AS text FROM outbox WHERE items::text LIKE '%"audit-record"%' AND (items->1->'payload'->>'id')::bigint = $1`,
        [records[0]!.id],
      );
      assert.deepEqual(events[0]!.items, [
        { name: 'task-created', room: `project:${projectId}`, payload: res.body },
        { name: 'audit-record', room: 'admin', payload: { id: records[0]!.id } },
      ], 'the event carries the task as the answer shows it');
      assert.equal(events[0]!.text, JSON.stringify(events[0]!.items), 'stored as compact JSON, in the order of the answer\'s fields');
    }
  });

  test('a project the member cannot see: 404 and one DENIED record, as before', async () => {
    const { owner } = await team(h, 0);
    const stranger = await h.newUser();
    const hidden = await createProject(stranger);
    const res = await owner.client.post('/api/v1/tasks', { project_id: hidden.id, title: 'hidden' }, { token: owner.token });
    assert.equal(res.status, 404, res.text);
    const records = await auditRows(h.server, `action = 'CREATE_TASK' AND actor_id = $1`, [owner.id]);
    assert.deepEqual(records.map((r) => [r.result, r.resource_type, r.resource_id]), [['DENIED', 'PROJECT', hidden.id]]);
  });
});

describe('runs submitted together, in the form for many runs', () => {
  type Outbox = { items: Array<{ name: string; room: string; payload: Record<string, unknown> }>; xmin: string };
  const withMembers = (n: number) => Promise.all(Array.from({ length: n }, member));

  test('one statement for the batch: each entitled run its own task and record, one transaction, one outbox row in run order; the body runs only for the others', async () => {
    // Run 0 goes alone at once; runs 1…6 queue behind it and go as one batch.
    const members = await withMembers(7);
    const [revoked, outsider] = [members[3]!, members[5]!];
    await h.server.owner.query(`UPDATE sessions SET revoked_at = now(), revoked_reason = 'logout' WHERE id = $1`, [revoked.ctx.actor.sessionId]);
    await h.server.owner.query('DELETE FROM project_members WHERE project_id = $1 AND user_id = $2', [outsider.projectId, outsider.ctx.actor.id]);
    announced.length = 0;
    const titles = members.map((_, i) => `together ${i} ${randomUUID()}`);
    const answers = await Promise.all(members.map((m, i) => create(m.ctx, m.projectId, titles[i]!).catch((err: { code?: string }) => `refused ${err.code}`)));
    const entitled = [0, 1, 2, 4, 6];
    for (const [i, answer] of answers.entries()) {
      if (!entitled.includes(i)) {
        assert.ok(answer === 'body' || (typeof answer === 'string' && answer.startsWith('refused ')), `run ${i}: the body decided: ${JSON.stringify(answer)}`);
        assert.equal(await tasksTitled(titles[i]!), 0, `run ${i}: no task`);
        assert.deepEqual(await auditRows(h.server, 'request_id = $1', [members[i]!.ctx.requestId]), [], `run ${i}: no record`);
        continue;
      }
      assert.notEqual(answer, 'body', `run ${i}: the statement wrote, so the body did not run`);
      const t = answer as TaskRow;
      assert.deepEqual([t.project_id, t.title, t.created_by, t.assignee_id, t.version], [members[i]!.projectId, titles[i], members[i]!.ctx.actor.id, null, 1], `run ${i}: its own task`);
      const records = await auditRows(h.server, 'request_id = $1', [members[i]!.ctx.requestId]);
      assert.deepEqual(
        records.map((r) => [r.actor_id, r.action, r.resource_type, r.resource_id, r.result, r.metadata, r.ip, r.user_agent]),
        [[members[i]!.ctx.actor.id, 'CREATE_TASK', 'TASK', t.id, 'SUCCESS', { projectId: t.project_id, title: titles[i], assigneeId: null }, '10.0.0.7', 'alone-test']],
        `run ${i}: exactly one record, its own`,
      );
    }
    const batched = entitled.slice(1).map((i) => answers[i] as TaskRow);
    const records = await auditRows(h.server, `action = 'CREATE_TASK' AND resource_id = ANY ($1)`, [batched.map((t) => t.id)]);
    const xmins = await h.server.owner.query<{ xmin: string }>('SELECT DISTINCT xmin::text FROM tasks WHERE id = ANY ($1) UNION SELECT DISTINCT xmin::text FROM audit_log WHERE id = ANY ($2)', [batched.map((t) => t.id), records.map((r) => r.id)]);
    assert.equal(xmins.length, 1, 'the batch\'s tasks and records committed in one transaction');
    const outbox = await h.server.owner.query<Outbox>(`SELECT items, xmin::text FROM outbox WHERE xmin::text = $1`, [xmins[0]!.xmin]);
    assert.equal(outbox.length, 1, 'one outbox row for the batch');
    const recordOf = (t: TaskRow) => records.find((r) => r.resource_id === t.id)!.id;
    assert.deepEqual(
      outbox[0]!.items.map((i) => [i.name, i.room, i.payload.id]),
      batched.flatMap((t) => [['task-created', `project:${t.project_id}`, t.id], ['audit-record', 'admin', recordOf(t)]]),
      'run by run: its task-created event, then its record\'s',
    );
    assert.deepEqual(outbox[0]!.items.filter((i) => i.name === 'task-created').map((i) => i.payload), batched.map((t) => presentTask(t)), 'each event carries the task as its run was answered');
    assert.ok(announced.some((c) => c.audited && c.events === 2 * batched.length), `the commit of the batch is announced: ${JSON.stringify(announced)}`);
  });

  test('a statement that fails (one title the table refuses) commits nothing of the batch: every run goes alone, and the body decides', async () => {
    const members = await withMembers(5);
    const titles = members.map((_, i) => (i === 3 ? 'x'.repeat(201) : `fails together ${i} ${randomUUID()}`));
    const answers = await Promise.all(members.map((m, i) => create(m.ctx, m.projectId, titles[i]!)));
    assert.notEqual(answers[0], 'body', 'the first went alone, before the batch');
    assert.deepEqual(answers.slice(1), ['body', 'body', 'body', 'body']);
    for (const [i, m] of members.entries()) {
      if (i === 0) continue;
      assert.equal(await tasksTitled(titles[i]!), 0);
      assert.deepEqual(await auditRows(h.server, 'request_id = $1', [m.ctx.requestId]), []);
    }
  });

  test('a caller\'s row locked elsewhere does not stall the batch: after the lock timeout every run goes alone, and the others are answered while the lock is held', { skip: needsPostgres }, async () => {
    const through = createRunner(h.server.db, runnerStore(createAuditWriter(Buffer.alloc(32, 1))), commits, { ...batchingFor('postgres'), lockTimeoutMs: 50 });
    const members = await withMembers(5);
    const holder = new pg.Client({ connectionString: h.server.databaseUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [members[2]!.ctx.actor.id]);
      const done: number[] = [];
      const runs = members.map((m, i) => create(m.ctx, m.projectId, `locked ${i}`, through).then((answer) => (done.push(i), answer)));
      for (let waited = 0; done.length < 4 && waited < 5000; waited += 20) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual([...done].sort(), [0, 1, 3, 4], 'all but the waiting run answered while the lock is held');
      await holder.query('COMMIT');
      const answers = await Promise.all(runs);
      assert.notEqual(answers[0], 'body', 'the first went alone, before the batch');
      assert.deepEqual(answers.slice(1), ['body', 'body', 'body', 'body'], 'the batch\'s statement gave up, so each went alone');
    } finally {
      await holder.end();
    }
  });
});

describe('a task\'s status change as one statement (SET_TASK_STATUS_ALONE)', () => {
  const SET_STATUS = useCase('test.setStatusAlone', ['CHANGE_TASK_STATUS'], { batch: true });
  type Outbox = { items: Array<{ name: string; room: string; payload: Record<string, unknown> }>; xmin: string };

  /** A task in `projectId`, made directly: `status`, its creator and assignee as given. */
  async function taskIn(projectId: number, createdBy: number | null, opts: { status?: string; assignee?: number | null } = {}): Promise<TaskRow> {
    const rows = await h.server.owner.query<TaskRow>(
      `INSERT INTO tasks (project_id, title, description, status, created_by, assignee_id) VALUES ($1, $2, 'moved', $3, $4, $5)
       RETURNING id, project_id, title, description, status, assignee_id, created_by, version`,
      [projectId, `status ${randomUUID()}`, opts.status ?? 'TODO', createdBy, opts.assignee ?? null],
    );
    return rows[0]!;
  }

  /** Moves `taskId` to `status` through the runner in its one-statement form; answers the task, or 'body' when the body ran instead. */
  function move(ctx: ActorContext, taskId: number, status: string, expected: number | null = null): Promise<TaskRow | 'body'> {
    return run<TaskRow | 'body'>(ctx, SET_STATUS, async (uow) => {
      uow.withoutRecord('unchanged'); // only that the body ran is tried here
      return 'body';
    }, { batchKey: `task:${taskId}`, alone: { change: SET_TASK_STATUS_ALONE, params: [taskId, status, expected], answer: taskOfRow } });
  }

  const stateOf = async (id: number) => (await h.server.owner.query<{ status: string; version: number }>('SELECT status, version FROM tasks WHERE id = $1', [id]))[0];

  test('a member\'s move: the task moved, its one record and its outbox row commit together, and the body never runs', async () => {
    const { ctx, projectId } = await member();
    const task = await taskIn(projectId, ctx.actor.id);
    announced.length = 0;
    const answer = await move(ctx, task.id, 'IN_PROGRESS', task.version);
    assert.notEqual(answer, 'body', 'the statement wrote, so the body did not run');
    const t = answer as TaskRow;
    assert.deepEqual([t.id, t.status, t.version, t.created_by, t.assignee_id], [task.id, 'IN_PROGRESS', task.version + 1, ctx.actor.id, null]);
    assert.deepEqual(await stateOf(task.id), { status: 'IN_PROGRESS', version: task.version + 1 });
    const records = await auditRows(h.server, 'request_id = $1', [ctx.requestId]);
    assert.deepEqual(
      records.map((r) => [r.actor_id, r.action, r.resource_type, r.resource_id, r.result, r.metadata, r.ip, r.user_agent]),
      [[ctx.actor.id, 'CHANGE_TASK_STATUS', 'TASK', task.id, 'SUCCESS', { oldStatus: 'TODO', newStatus: 'IN_PROGRESS' }, '10.0.0.7', 'alone-test']],
    );
    const outbox = await h.server.owner.query<Outbox>(
      `SELECT items, xmin::text FROM outbox WHERE items::text LIKE '%"audit-record"%' AND (items->1->'payload'->>'id')::bigint = $1`,
      [records[0]!.id],
    );
    assert.deepEqual(outbox.map((o) => o.items), [[
      { name: 'task-updated', room: `project:${projectId}`, payload: presentTask(t) },
      { name: 'audit-record', room: 'admin', payload: { id: records[0]!.id } },
    ]], 'one outbox row: the task as answered, then its record');
    assert.deepEqual(announced, [{ audited: true, events: 2 }]);
  });

  test('the current status again: the task answered as it is, with no record, no event and no new version', async () => {
    const { ctx, projectId } = await member();
    const task = await taskIn(projectId, ctx.actor.id, { status: 'IN_PROGRESS' });
    const before = (await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox'))[0]!.n;
    announced.length = 0;
    const answer = await move(ctx, task.id, 'IN_PROGRESS');
    assert.notEqual(answer, 'body');
    assert.deepEqual([(answer as TaskRow).status, (answer as TaskRow).version], ['IN_PROGRESS', task.version]);
    assert.deepEqual(await stateOf(task.id), { status: 'IN_PROGRESS', version: task.version });
    assert.deepEqual(await auditRows(h.server, 'request_id = $1', [ctx.requestId]), []);
    assert.equal((await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox'))[0]!.n, before, 'no outbox row');
    assert.deepEqual(announced, [], 'nothing to announce');
  });

  const leftToTheBody: Array<[string, (m: { ctx: ActorContext; projectId: number }) => Promise<{ ctx: ActorContext; taskId: number; status: string; expected?: number }>]> = [
    ['a move the machine refuses (TODO to DONE)', async (m) => ({ ctx: m.ctx, taskId: (await taskIn(m.projectId, m.ctx.actor.id)).id, status: 'DONE' })],
    ['a version other than the one expected', async (m) => {
      const t = await taskIn(m.projectId, m.ctx.actor.id);
      return { ctx: m.ctx, taskId: t.id, status: 'IN_PROGRESS', expected: t.version + 1 };
    }],
    ['another creator to notify', async (m) => {
      const other = await member();
      return { ctx: m.ctx, taskId: (await taskIn(m.projectId, other.ctx.actor.id)).id, status: 'IN_PROGRESS' };
    }],
    ['another assignee to notify', async (m) => {
      const other = await member();
      return { ctx: m.ctx, taskId: (await taskIn(m.projectId, m.ctx.actor.id, { assignee: other.ctx.actor.id })).id, status: 'CANCELED' };
    }],
    ['not a member of the task\'s project', async (m) => {
      const other = await member();
      return { ctx: m.ctx, taskId: (await taskIn(other.projectId, m.ctx.actor.id)).id, status: 'IN_PROGRESS' };
    }],
    ['a task that does not exist', async (m) => ({ ctx: m.ctx, taskId: (await taskIn(m.projectId, m.ctx.actor.id)).id + 1_000_000, status: 'IN_PROGRESS' })],
    ['a revoked session', async (m) => {
      await h.server.owner.query(`UPDATE sessions SET revoked_at = now(), revoked_reason = 'logout' WHERE id = $1`, [m.ctx.actor.sessionId]);
      return { ctx: m.ctx, taskId: (await taskIn(m.projectId, m.ctx.actor.id)).id, status: 'IN_PROGRESS' };
    }],
  ];
  for (const [name, arrange] of leftToTheBody) {
    test(`${name}: the statement writes nothing and the body decides`, async () => {
      const { ctx, taskId, status, expected } = await arrange(await member());
      const before = await stateOf(taskId);
      const answer = await move(ctx, taskId, status, expected ?? null).catch((err: { code?: string }) => `refused ${err.code}`);
      assert.ok(answer === 'body' || (typeof answer === 'string' && answer.startsWith('refused ')), `the body ran and answered: ${JSON.stringify(answer)}`);
      assert.deepEqual(await stateOf(taskId), before, 'the task is as it was');
      assert.deepEqual(await auditRows(h.server, 'request_id = $1', [ctx.requestId]), [], 'no record');
    });
  }

  test('runs submitted together: one statement moves each entitled run\'s task, answers the unchanged one as it is, and leaves the others to the body', async () => {
    // Run 0 goes alone at once; runs 1…6 queue behind it and go as one batch.
    const members = await Promise.all(Array.from({ length: 7 }, member));
    const tasks = await Promise.all(members.map((m, i) => taskIn(m.projectId, m.ctx.actor.id, { status: i === 4 ? 'IN_REVIEW' : 'TODO' })));
    await h.server.owner.query('DELETE FROM project_members WHERE project_id = $1 AND user_id = $2', [members[5]!.projectId, members[5]!.ctx.actor.id]);
    // 2: refused move; 4: the status it has; 5: no longer a member.
    const targets = ['IN_PROGRESS', 'IN_PROGRESS', 'DONE', 'CANCELED', 'IN_REVIEW', 'IN_PROGRESS', 'IN_PROGRESS'];
    announced.length = 0;
    const answers = await Promise.all(members.map((m, i) => move(m.ctx, tasks[i]!.id, targets[i]!).catch((err: { code?: string }) => `refused ${err.code}`)));
    for (const i of [2, 5]) {
      assert.ok(answers[i] === 'body' || String(answers[i]).startsWith('refused '), `run ${i}: the body decided: ${JSON.stringify(answers[i])}`);
      assert.deepEqual(await stateOf(tasks[i]!.id), { status: 'TODO', version: 1 }, `run ${i}: its task is as it was`);
      assert.deepEqual(await auditRows(h.server, 'request_id = $1', [members[i]!.ctx.requestId]), [], `run ${i}: no record`);
    }
    assert.deepEqual([(answers[4] as TaskRow).status, (answers[4] as TaskRow).version], ['IN_REVIEW', 1], 'run 4: answered as it is');
    assert.deepEqual(await auditRows(h.server, 'request_id = $1', [members[4]!.ctx.requestId]), [], 'run 4: no record');
    const moved = [1, 3, 6];
    for (const i of [0, ...moved]) {
      const t = answers[i] as TaskRow;
      assert.deepEqual([t.id, t.status, t.version], [tasks[i]!.id, targets[i], 2], `run ${i}: its own task, moved`);
      const records = await auditRows(h.server, 'request_id = $1', [members[i]!.ctx.requestId]);
      assert.deepEqual(records.map((r) => [r.actor_id, r.resource_id, r.metadata]), [[members[i]!.ctx.actor.id, t.id, { oldStatus: 'TODO', newStatus: targets[i] }]], `run ${i}: exactly one record, its own`);
    }
    const batched = moved.map((i) => answers[i] as TaskRow);
    const records = await auditRows(h.server, `action = 'CHANGE_TASK_STATUS' AND resource_id = ANY ($1)`, [batched.map((t) => t.id)]);
    const xmins = await h.server.owner.query<{ xmin: string }>('SELECT DISTINCT xmin::text FROM tasks WHERE id = ANY ($1) UNION SELECT DISTINCT xmin::text FROM audit_log WHERE id = ANY ($2)', [batched.map((t) => t.id), records.map((r) => r.id)]);
    assert.equal(xmins.length, 1, 'the batch\'s moves and records committed in one transaction');
    const outbox = await h.server.owner.query<Outbox>('SELECT items, xmin::text FROM outbox WHERE xmin::text = $1', [xmins[0]!.xmin]);
    const recordOf = (t: TaskRow) => records.find((r) => r.resource_id === t.id)!.id;
    assert.deepEqual(
      outbox.map((o) => o.items.map((i) => [i.name, i.room, i.payload.id])),
      [batched.flatMap((t) => [['task-updated', `project:${t.project_id}`, t.id], ['audit-record', 'admin', recordOf(t)]])],
      'one outbox row, run by run: its task-updated event, then its record\'s; nothing for the unchanged run',
    );
    assert.ok(announced.some((c) => c.audited && c.events === 2 * batched.length), `the commit of the batch is announced: ${JSON.stringify(announced)}`);
  });
});

describe('PUT /tasks/:id/status in one statement and in a transaction answer, record and announce alike', () => {
  test('a member\'s move (one statement) and an ADMIN\'s in a project they are not a member of (a transaction)', async () => {
    const { owner, projectId } = await team(h, 0);
    for (const [by, token] of [[owner.id, owner.token], [h.admin.id, h.admin.token]] as const) {
      const created = await owner.client.post<TaskBody>('/api/v1/tasks', { project_id: projectId, title: 'to move' }, { token: owner.token });
      const res = await owner.client.put<TaskBody>(`/api/v1/tasks/${created.body.id}/status`, { status: 'IN_PROGRESS' }, { token, headers: { 'if-match': `"task-${created.body.id}-v1"` } });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers.get('etag'), `"task-${created.body.id}-v2"`);
      const body = (await owner.client.get<TaskBody>(`/api/v1/tasks/${created.body.id}`, { token: owner.token })).body;
      assert.equal(body.status, 'IN_PROGRESS');
      const records = await auditRows(h.server, `action = 'CHANGE_TASK_STATUS' AND resource_id = $1`, [created.body.id]);
      assert.deepEqual(records.map((r) => [r.actor_id, r.result, r.metadata]), [[by, 'SUCCESS', { oldStatus: 'TODO', newStatus: 'IN_PROGRESS' }]]);
      const events = await h.server.owner.query<{ items: Array<{ name: string; room: string; payload: unknown }>; text: string }>(
        `SELECT items, items::text AS text FROM outbox
          WHERE EXISTS (SELECT 1 FROM json_array_elements(items::json) e WHERE e->>'name' = 'audit-record' AND (e->'payload'->>'id')::bigint = $1)`,
        [records[0]!.id],
      );
      // The ADMIN's move notifies the task's creator, the owner; the owner's own move nobody.
      assert.deepEqual(events[0]!.items.map((i) => (i.name === 'new-notification' ? [i.name, i.room] : i)), [
        { name: 'task-updated', room: `project:${projectId}`, payload: body },
        ...(by === owner.id ? [] : [['new-notification', `user:${owner.id}`]]),
        { name: 'audit-record', room: 'admin', payload: { id: records[0]!.id } },
      ], 'the event carries the task as the API shows it');
      assert.equal(events[0]!.text, JSON.stringify(events[0]!.items), 'stored as compact JSON, in the order of the answer\'s fields');
    }
  });
});
