// Commit order (docs/api.md 5.5): if a record or event was written after another's transaction
// committed, it comes after it, in seq, in event_id and on the wire. The trap is a transaction
// that started first (it holds the lower transaction id), waited on a lock, and committed last:
// ordering by transaction id puts its effect before its cause.
//
// Made deterministic as docs/architecture.md habit 11 says: a second connection holds the row lock
// the first request queues on.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Response } from './helpers/client.js';
import { addMember, createProject, createTask } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';
import { connectRecording, type Received } from './helpers/sockets.js';

const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0', AUDIT_CHECKPOINT_INTERVAL_MS: '100' } });

interface ExportLine {
  type: string;
  record?: { id: number; request_id: string; metadata: Record<string, unknown> };
  seq?: number | null;
}

/** Waits until a backend of this database waits on a lock (the request has queued). */
async function untilSomeoneWaits(): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const [row] = await h.server.owner.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (row!.n > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the first request never queued on the held lock');
}

/** The task's CHANGE_TASK_STATUS lines of a full export, once every one has its seq. */
async function sealedStatusChanges(taskId: number): Promise<ExportLine[]> {
  for (let i = 0; i < 200; i++) {
    const res = await h.admin.client.get(`/api/v1/audit-logs/export?format=ndjson&action=CHANGE_TASK_STATUS&resource_type=TASK&resource_id=${taskId}`, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
    const lines = res.text.trim().split('\n').map((l) => JSON.parse(l) as ExportLine).filter((l) => l.type === 'record');
    if (lines.length === 2 && lines.every((l) => typeof l.seq === 'number')) return lines;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the two status changes were not sealed and checkpointed');
}

test('a request that took its transaction id first, waited on a lock and committed last comes last: in seq, in event_id and on the wire', { skip: needsPostgres }, async () => {
  const owner = await h.newUser();
  const early = await h.newUser();
  const late = await h.newUser();
  const project = await createProject(owner);
  await addMember(owner, project.id, early.id);
  await addMember(owner, project.id, late.id);
  const task = await createTask(owner, project.id);
  const { socket, rec } = await connectRecording(owner);
  try {
    let first: Promise<Response> | undefined;
    // `early` locks its own user and session rows (its transaction id is taken there), then
    // queues on its membership row, which this transaction holds.
    await h.server.owner.transaction(async (tx) => {
      await tx.query('SELECT 1 FROM project_members WHERE project_id = $1 AND user_id = $2 FOR UPDATE', [project.id, early.id]);
      first = early.client.put(`/api/v1/tasks/${task.id}/status`, { status: 'DONE' }, { token: early.token });
      await untilSomeoneWaits();
      // Meanwhile `late` starts after it, moves the task on and commits.
      const second = await late.client.put(`/api/v1/tasks/${task.id}/status`, { status: 'IN_PROGRESS' }, { token: late.token });
      assert.equal(second.status, 200, second.text);
    });
    const res = await first!;
    // It saw the second request's commit: its change is the effect, the second one its cause.
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.status, 'DONE');

    const isUpdate = (e: Received) => e.name === 'task-updated' && e.payload.id === task.id;
    await rec.waitFor(() => rec.events.filter(isUpdate).length >= 2, 5000, 'both task-updated events');
    const updates = rec.events.filter(isUpdate).map((e) => e.payload);
    assert.deepEqual(updates.map((u) => u.status), ['IN_PROGRESS', 'DONE'], 'a client applying events in order must end with the task DONE');
    assert.ok((updates[0]!.event_id as number) < (updates[1]!.event_id as number), 'event ids in commit order');

    const [cause, effect] = await sealedStatusChanges(task.id);
    assert.equal(cause!.record!.metadata.newStatus, 'IN_PROGRESS', `seq order: ${JSON.stringify([cause, effect])}`);
    assert.equal(effect!.record!.metadata.oldStatus, 'IN_PROGRESS');
    assert.equal(effect!.record!.metadata.newStatus, 'DONE');
    assert.ok(cause!.seq! < effect!.seq!);

    // A client that reconnects from before both gets them again in the same order.
    const { socket: replaying, rec: replay } = await connectRecording(owner, { lastEventId: (updates[0]!.event_id as number) - 1 });
    try {
      await replay.waitFor(() => replay.events.filter(isUpdate).length >= 2, 5000, 'both replayed task-updated events');
      assert.deepEqual(replay.events.filter(isUpdate).map((e) => [e.payload.status, e.payload.event_id]), updates.map((u) => [u.status, u.event_id]));
    } finally {
      replaying.close();
    }
  } finally {
    socket.close();
  }
});

test('a transaction held open for 10 s delays only itself: what commits around it is delivered and sealed while it is open, and it comes after them', { skip: needsPostgres }, async () => {
  const user = await h.newUser();
  const { socket, rec } = await connectRecording(user);
  try {
    const tag = `held-${Date.now()}`;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    // As a request would write them, by hand: a record and an event, then 10 s before COMMIT.
    const held = h.server.owner.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, request_id) VALUES (NULL, 'CREATE_PROJECT', 'PROJECT', NULL, 'SUCCESS', '{}', $1)`,
        [tag],
      );
      await tx.query(`INSERT INTO outbox (items) VALUES (json_build_array(json_build_object('name', 'new-message', 'room', 'general', 'payload', json_build_object('id', 0, 'text', $1::text))))`, [tag]);
      opened();
      await Promise.race([gate, new Promise((r) => setTimeout(r, 10_000))]);
    });
    await open;
    const heldSince = Date.now();
    // Meanwhile: messages (events) and projects (audited), each committed after the held transaction began.
    const texts: string[] = [];
    const requestIds: string[] = [];
    for (let i = 0; i < 5; i++) {
      const text = `${tag} around ${i}`;
      const m = await user.client.post('/api/v1/messages', { text }, { token: user.token });
      assert.equal(m.status, 201, m.text);
      texts.push(text);
      const p = await user.client.post('/api/v1/projects', { name: `${tag} ${i}` }, { token: user.token });
      assert.equal(p.status, 201, p.text);
      requestIds.push(p.headers.get('x-request-id')!);
    }
    // Every one of them arrives, and is sealed, while the held transaction is still open.
    await rec.waitFor(() => texts.every((t) => rec.events.some((e) => e.name === 'new-message' && e.payload.text === t)), 8000, 'the messages around it');
    for (let i = 0; i < 200; i++) {
      const [sealed] = await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_seal s JOIN audit_log a ON a.id = s.record_id WHERE a.request_id = ANY ($1)', [requestIds]);
      if (sealed!.n === requestIds.length) break;
      assert.ok(i < 199, 'the records around it were not sealed while it was open');
      await new Promise((r) => setTimeout(r, 30));
    }
    assert.ok(Date.now() - heldSince < 10_000, 'all of that happened while it was still open');
    release();
    await held;
    // Then it comes, after all of them: in event_id and in seq.
    const late = await rec.waitFor((e) => e.name === 'new-message' && e.payload.text === tag, 5000, 'the held transaction\'s event');
    const around = rec.events.filter((e) => e.name === 'new-message' && texts.includes(e.payload.text as string));
    assert.ok(around.every((e) => (e.payload.event_id as number) < (late.payload.event_id as number)));
    for (let i = 0; i < 200; i++) {
      const rows = await h.server.owner.query<{ request_id: string; seq: number }>(
        'SELECT a.request_id, s.seq FROM audit_seal s JOIN audit_log a ON a.id = s.record_id WHERE a.request_id = ANY ($1)',
        [[tag, ...requestIds]],
      );
      if (rows.length === requestIds.length + 1) {
        const heldSeq = rows.find((r) => r.request_id === tag)!.seq;
        assert.ok(rows.every((r) => r.request_id === tag || r.seq < heldSeq), JSON.stringify(rows));
        return;
      }
      await new Promise((r) => setTimeout(r, 30));
    }
    assert.fail('the held record was not sealed after it committed');
  } finally {
    socket.close();
  }
});
