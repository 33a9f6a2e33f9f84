// Natural batching (use-cases/batch.ts), tried on a real database: runs submitted together
// share one transaction, and yet each keeps its own answer and its own record. Runs are
// submitted in one tick, so the batches are known: the first run goes at once, alone, and
// everything queued behind it goes as one batch when it finishes (a batch in flight holds what
// queues behind it, for up to stallMs).
// Which transaction a change committed in is its row's xmin.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import type { ActorContext } from '../src/context.js';
import { DomainError, invalid, notFound } from '../src/domain/errors.js';
import { runnerStore } from '../src/runtime.js';
import { createAuditWriter } from '../src/modules/audit/audit.writer.js';
import { insertTask } from '../src/modules/tasks/tasks.repository.js';
import { insertUser } from '../src/modules/users/users.repository.js';
import { DEFAULT_BATCHING, type BatchSettings } from '../src/use-cases/batch.js';
import { CommitSignal, type Committed } from '../src/background/commit-signal.js';
import { createRunner, useCase, type Run, type UnitOfWork } from '../src/use-cases/runner.js';
import { useTestDatabase } from './helpers/harness.js';
import pg from 'pg';
import { isUnavailableError } from '../src/db/database.js';
import { APP_ROLE, createPostgresDatabase } from '../src/db/postgres.js';
import { TcpProxy } from './helpers/tcp-proxy.js';
import { needsPostgres } from './helpers/server.js';
import { sleep } from './helpers/sockets.js';

const h = useTestDatabase();
const commits = new CommitSignal();
const announced: Committed[] = [];
commits.onCommitted((c) => announced.push(c));

const runner = (settings: Partial<BatchSettings> = {}): Run =>
  createRunner(h.database.db, runnerStore(createAuditWriter(Buffer.alloc(32, 1))), commits, { ...DEFAULT_BATCHING, ...settings });

const BATCHED = useCase('test.batched', ['CREATE_TASK'], { batch: true });
const BATCHED_PLAIN = useCase('test.batchedPlain', [], { batch: true });

async function caller(): Promise<ActorContext> {
  const user = (await insertUser(h.database.db, { email: `batch-${randomUUID()}@test.local`, name: 'Batch', passwordHash: 'x', role: 'USER' }))!;
  const session = await h.database.owner.query<{ id: number }>(`INSERT INTO sessions (user_id, expires_at) VALUES ($1, now() + interval '1 hour') RETURNING id`, [user.id]);
  return { actor: { id: user.id, email: user.email, name: user.name, role: 'USER', sessionId: session[0]!.id }, ip: '10.0.0.2', userAgent: 'batch-test', requestId: `batch-${randomUUID()}` };
}

const callers = (n: number) => Promise.all(Array.from({ length: n }, caller));

/** A visible change named after the request: an outbox row. */
const change = (uow: UnitOfWork) =>
  uow.tx.query(`INSERT INTO outbox (items) VALUES (json_build_array(json_build_object('name', $1::text, 'room', 'general', 'payload', '{}'::json)))`, [uow.ctx.requestId]);

/** An audited change: its outbox row and one CREATE_TASK record naming `n`. */
async function audited(uow: UnitOfWork, n: number): Promise<number> {
  await change(uow);
  uow.audit({ action: 'CREATE_TASK', resourceType: 'TASK', resourceId: n });
  return n;
}

/** Per request: how many changes and records it left, and the transactions (xmin) they committed in. */
async function left(ctx: ActorContext) {
  const [changes, records] = await Promise.all([
    h.database.owner.query<{ xmin: string }>(`SELECT o.xmin::text FROM outbox o, json_array_elements(o.items) i WHERE i->>'name' = $1`, [ctx.requestId]),
    h.database.owner.query<{ result: string; action: string; resource_id: number | null; xmin: string }>(
      'SELECT result, action, resource_id, xmin::text FROM audit_log WHERE request_id = $1 ORDER BY id',
      [ctx.requestId],
    ),
  ]);
  return { changes: changes.length, records: records.map((r) => `${r.result} ${r.action} ${r.resource_id}`), xmins: [...changes, ...records].map((r) => r.xmin) };
}

const codeOf = (settled: PromiseSettledResult<unknown>) =>
  settled.status === 'fulfilled' ? 'ok' : settled.reason instanceof DomainError ? settled.reason.code : String(settled.reason);

describe('runs submitted together', () => {
  test('share one transaction behind the one that went at once, each with its own answer and exactly one record', async () => {
    const run = runner();
    const ctxs = await callers(8);
    const before = announced.length;
    const answers = await Promise.all(ctxs.map((ctx, i) => run(ctx, BATCHED, (uow) => audited(uow, 100 + i))));
    assert.deepEqual(answers, ctxs.map((_, i) => 100 + i), 'every run is answered with its own result');
    const seen = await Promise.all(ctxs.map(left));
    for (const [i, s] of seen.entries()) {
      assert.equal(s.changes, 1);
      assert.deepEqual(s.records, [`SUCCESS CREATE_TASK ${100 + i}`]);
    }
    const transactions = new Set(seen.flatMap((s) => s.xmins));
    assert.equal(transactions.size, 2, 'the first alone, the seven queued behind it in one transaction');
    assert.equal(new Set(seen.slice(1).flatMap((s) => s.xmins)).size, 1);
    const afterBatch = announced.slice(before);
    assert.equal(afterBatch.reduce((n, c) => n + c.events, 0), 8, 'each run\'s record event announced once');
    assert.equal(afterBatch.length, 2, 'one announcement a commit');
  });

  test('a batch writes its records in one statement and one outbox row: each run\'s events, then its record\'s event, run by run', async () => {
    const run = runner();
    const ctxs = await callers(6);
    await Promise.all(
      ctxs.map((ctx, i) =>
        run(ctx, BATCHED, async (uow) => {
          uow.emit({ name: `first-${ctx.requestId}`, room: 'general', payload: {} }, { name: `second-${ctx.requestId}`, room: 'general', payload: {} });
          uow.audit({ action: 'CREATE_TASK', resourceType: 'TASK', resourceId: 500 + i });
          return i;
        }),
      ),
    );
    const rows = await h.database.owner.query<{ id: number; items: Array<{ name: string; payload: { id?: number } }> }>(
      `SELECT id, items FROM outbox WHERE xmin = (SELECT xmin FROM audit_log WHERE request_id = $1) ORDER BY id`,
      [ctxs[5]!.requestId],
    );
    assert.equal(rows.length, 1, 'one outbox row for the batch');
    const records = await h.database.owner.query<{ id: number; request_id: string }>('SELECT id, request_id FROM audit_log WHERE request_id = ANY ($1)', [ctxs.map((c) => c.requestId)]);
    const recordOf = new Map(records.map((r) => [r.request_id, r.id]));
    const expected = ctxs.slice(1).flatMap((ctx) => [`first-${ctx.requestId}`, `second-${ctx.requestId}`, `audit-record ${recordOf.get(ctx.requestId)}`]);
    assert.deepEqual(rows[0]!.items.map((e) => (e.name === 'audit-record' ? `audit-record ${e.payload.id}` : e.name)), expected);
  });

  test('a refusal, a 404, a 400 and a 409 in a batch are answered alone; the others commit; only the refusal leaves a (DENIED) record', async () => {
    const run = runner();
    const ctxs = await callers(8);
    const bodies: Array<(uow: UnitOfWork) => Promise<number>> = [
      (uow) => audited(uow, 1),
      (uow) => audited(uow, 2),
      (uow) => audited(uow, 3),
      async (uow) => {
        await uow.actor();
        uow.authorize({ allowed: false, visible: false }, 'Project', { action: 'CREATE_TASK', resourceType: 'PROJECT', resourceId: 44 });
        return audited(uow, 4);
      },
      async (uow) => {
        await uow.actor();
        throw notFound('Project');
      },
      (uow) => audited(uow, 6),
      async (uow) => {
        uow.authorize({ allowed: true, visible: true }, 'Project');
        throw invalid('/assignee_id', 'must be a member of the project');
      },
      async () => {
        throw new DomainError('conflict', 'INVALID_TRANSITION', 'no');
      },
    ];
    const settled = await Promise.allSettled(ctxs.map((ctx, i) => run(ctx, BATCHED, bodies[i]!)));
    assert.deepEqual(settled.map(codeOf), ['ok', 'ok', 'ok', 'NOT_FOUND', 'NOT_FOUND', 'ok', 'VALIDATION_FAILED', 'INVALID_TRANSITION']);
    const seen = await Promise.all(ctxs.map(left));
    assert.deepEqual(seen.map((s) => s.records), [
      ['SUCCESS CREATE_TASK 1'], ['SUCCESS CREATE_TASK 2'], ['SUCCESS CREATE_TASK 3'],
      ['DENIED CREATE_TASK 44'], [], ['SUCCESS CREATE_TASK 6'], [], [],
    ]);
    assert.deepEqual(seen.map((s) => s.changes), [1, 1, 1, 0, 0, 1, 0, 0]);
    assert.equal(new Set([...seen[2]!.xmins, ...seen[3]!.xmins, ...seen[5]!.xmins]).size, 1, 'the DENIED record committed with the batch');
  });

  test('a statement that fails (a unique email) fails its own run only: the batch is run again without it', async () => {
    const run = runner();
    const ctxs = await callers(6);
    const taken = `taken-${randomUUID()}@test.local`;
    await insertUser(h.database.db, { email: taken, name: 'First', passwordHash: 'x', role: 'USER' });
    const settled = await Promise.allSettled(
      ctxs.map((ctx, i) =>
        run(ctx, BATCHED, async (uow) => {
          if (i === 3) await uow.tx.query('UPDATE users SET email = $1 WHERE id = $2', [taken, ctx.actor.id]);
          return audited(uow, 200 + i);
        }),
      ),
    );
    assert.deepEqual(settled.map(codeOf), ['ok', 'ok', 'ok', 'EMAIL_TAKEN', 'ok', 'ok']);
    const seen = await Promise.all(ctxs.map(left));
    assert.deepEqual(seen.map((s) => s.changes), [1, 1, 1, 0, 1, 1]);
    assert.deepEqual(seen[3]!.records, []);
    for (const i of [0, 1, 2, 4, 5]) assert.deepEqual(seen[i]!.records, [`SUCCESS CREATE_TASK ${200 + i}`]);
  });

  test('the batch\'s records statement failing (it goes with COMMIT) commits nothing of the batch: each run goes again alone, and only the run whose record cannot be written fails', async () => {
    const run = runner();
    const ctxs = await callers(6);
    // audit_log_bounded: a request id of at most 128 characters; this run's record breaks it.
    ctxs[4] = { ...ctxs[4]!, requestId: `batch-${randomUUID()}-${'x'.repeat(130)}` };
    const settled = await Promise.allSettled(ctxs.map((ctx, i) => run(ctx, BATCHED, (uow) => audited(uow, 400 + i))));
    assert.deepEqual(settled.map((s) => s.status), ['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    assert.match(String((settled[4] as PromiseRejectedResult).reason), /audit_log_bounded/);
    const seen = await Promise.all(ctxs.map(left));
    assert.deepEqual(seen.map((s) => s.changes), [1, 1, 1, 1, 0, 1], 'the failed run\'s change rolled back with its record');
    for (const i of [0, 1, 2, 3, 5]) assert.deepEqual(seen[i]!.records, [`SUCCESS CREATE_TASK ${400 + i}`], `run ${i}: exactly one record`);
    assert.deepEqual(seen[4]!.records, []);
  });

  test('a run that fails after writing rolls its batch back: its change is gone, the others commit', async () => {
    const run = runner();
    const ctxs = await callers(6);
    const settled = await Promise.allSettled(
      ctxs.map((ctx, i) =>
        run(ctx, BATCHED_PLAIN, async (uow) => {
          await change(uow);
          if (i === 4) throw new DomainError('conflict', 'CONFLICT', 'changed its mind after writing');
          uow.withoutRecord('not audited');
        }),
      ),
    );
    assert.deepEqual(settled.map(codeOf), ['ok', 'ok', 'ok', 'ok', 'CONFLICT', 'ok']);
    assert.deepEqual((await Promise.all(ctxs.map(left))).map((s) => s.changes), [1, 1, 1, 1, 0, 1]);
  });

  test('a caller revoked or deactivated meanwhile is refused in the batch; the others commit', async () => {
    const run = runner();
    const ctxs = await callers(6);
    await h.database.owner.query('UPDATE sessions SET revoked_at = now() WHERE id = $1', [ctxs[3]!.actor.sessionId]);
    await h.database.owner.query('UPDATE users SET active = false WHERE id = $1', [ctxs[4]!.actor.id]);
    const settled = await Promise.allSettled(ctxs.map((ctx, i) => run(ctx, BATCHED, (uow) => audited(uow, 300 + i))));
    assert.deepEqual(settled.map(codeOf), ['ok', 'ok', 'ok', 'TOKEN_REVOKED', 'ACCOUNT_DEACTIVATED', 'ok']);
    assert.deepEqual((await Promise.all(ctxs.map(left))).map((s) => s.changes), [1, 1, 1, 0, 0, 1]);
  });

  test('two runs with one batch key never share a batch: the second reads what the first wrote', async () => {
    const run = runner({ writers: 1 });
    const [a, b, c] = await callers(3);
    const counter = (await insertUser(h.database.db, { email: `counter-${randomUUID()}@test.local`, name: '0', passwordHash: 'x', role: 'USER' }))!;
    const key = `user:${counter.id}`;
    const bump = (ctx: ActorContext) =>
      run(
        ctx,
        BATCHED_PLAIN,
        async (uow) => {
          const [row] = await uow.tx.query<{ name: string }>('SELECT name FROM users WHERE id = $1', [counter.id]);
          const n = Number(row!.name) + 1;
          await uow.tx.query('UPDATE users SET name = $2 WHERE id = $1', [counter.id, String(n)]);
          uow.withoutRecord('not audited');
          return n;
        },
        { batchKey: key },
      );
    const answers = await Promise.all([bump(a!), bump(b!), bump(c!)]);
    assert.deepEqual(answers, [1, 2, 3], 'no run lost another\'s update');
  });

  test('runs of one batch share one execution of a shareable statement (the same text and values), and no other', async () => {
    const run = runner();
    const ctxs = await callers(6);
    const draw = (uow: UnitOfWork, shareable: boolean, key: number) =>
      uow.tx.query<{ n: number }>('SELECT nextval(\'tasks_id_seq\') AS n, $1::int AS key', [key], { shareable });
    const answers = await Promise.all(
      ctxs.map((ctx, i) =>
        run(ctx, BATCHED_PLAIN, async (uow) => {
          const [same, own, byKey] = await Promise.all([draw(uow, true, 0), draw(uow, false, 0), draw(uow, true, i % 2)]);
          uow.withoutRecord('not audited');
          return { same: same[0]!.n, own: own[0]!.n, byKey: byKey[0]!.n };
        }),
      ),
    );
    const batched = answers.slice(1);
    assert.equal(new Set(batched.map((a) => a.same)).size, 1, 'one execution for the same values');
    assert.equal(new Set(batched.map((a) => a.own)).size, 5, 'a statement not declared shareable runs for each run');
    assert.equal(new Set(batched.map((a) => a.byKey)).size, 2, 'other values, another execution');
  });

  test('one-row inserts of a batch\'s runs go as one statement, and each run gets its own row back', async () => {
    const run = runner();
    const ctxs = await callers(7);
    const [project] = await h.database.owner.query<{ id: number }>(`INSERT INTO projects (name, description, created_by) VALUES ('batch', '', $1) RETURNING id`, [ctxs[0]!.actor.id]);
    const created = await Promise.all(
      ctxs.map((ctx, i) =>
        run(ctx, BATCHED_PLAIN, async (uow) => {
          const [a, b] = await Promise.all([
            insertTask(uow.tx, { projectId: project!.id, title: `${ctx.requestId} a`, description: `run ${i}`, assigneeId: null, createdBy: ctx.actor.id }),
            insertTask(uow.tx, { projectId: project!.id, title: `${ctx.requestId} b`, description: `run ${i}`, assigneeId: null, createdBy: ctx.actor.id }),
          ]);
          uow.withoutRecord('not audited');
          return [a, b];
        }),
      ),
    );
    for (const [i, [a, b]] of created.entries()) {
      assert.equal(a!.title, `${ctxs[i]!.requestId} a`);
      assert.equal(b!.title, `${ctxs[i]!.requestId} b`);
      assert.equal(a!.created_by, ctxs[i]!.actor.id);
    }
    const stored = await h.database.owner.query<{ id: number; title: string; xmin: string }>('SELECT id, title, xmin::text FROM tasks WHERE project_id = $1', [project!.id]);
    assert.deepEqual(new Map(stored.map((t) => [t.id, t.title])), new Map(created.flat().map((t) => [t!.id, t!.title])), 'each answer is the row stored under its id');
    assert.equal(new Set(stored.filter((t) => !t.title.startsWith(ctxs[0]!.requestId)).map((t) => t.xmin)).size, 1);
  });

  test('beyond the queue\'s bound a run is refused with 503 UNAVAILABLE and Retry-After; nothing of it is written', async () => {
    const run = runner({ writers: 1, maxQueue: 2 });
    const ctxs = await callers(5);
    const settled = await Promise.allSettled(ctxs.map((ctx) => run(ctx, BATCHED_PLAIN, async (uow) => void (await change(uow), uow.withoutRecord('not audited')))));
    assert.deepEqual(settled.map(codeOf), ['ok', 'ok', 'ok', 'UNAVAILABLE', 'UNAVAILABLE']);
    const refused = (settled[3] as PromiseRejectedResult).reason as DomainError;
    assert.equal(refused.kind, 'unavailable');
    assert.equal(refused.details.retryAfterSeconds, 1);
    assert.deepEqual((await Promise.all(ctxs.map(left))).map((s) => s.changes), [1, 1, 1, 0, 0]);
  });

  test('a row lock held elsewhere does not stall the batch: the waiting run goes alone, the others commit meanwhile', { skip: needsPostgres }, async () => {
    const run = runner({ lockTimeoutMs: 50 });
    const ctxs = await callers(6);
    const locked = (await insertUser(h.database.db, { email: `locked-${randomUUID()}@test.local`, name: 'Locked', passwordHash: 'x', role: 'USER' }))!;
    const lockedRow = locked.id;
    const holder = new pg.Client({ connectionString: h.database.databaseUrl });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [lockedRow]);
    const done: number[] = [];
    const runs = ctxs.map((ctx, i) =>
      run(ctx, BATCHED_PLAIN, async (uow) => {
        if (i === 4) await uow.tx.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [lockedRow]);
        await change(uow);
        uow.withoutRecord('not audited');
      }).then(() => void done.push(i)),
    );
    // The five others commit while the lock is still held.
    for (let waited = 0; done.length < 5 && waited < 5000; waited += 20) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual([...done].sort(), [0, 1, 2, 3, 5]);
    await holder.query('COMMIT');
    await holder.end();
    await Promise.all(runs);
    assert.deepEqual((await Promise.all(ctxs.map(left))).map((s) => s.changes), [1, 1, 1, 1, 1, 1]);
  });

  test('a connection lost mid-batch answers every run of the batch with 503 UNAVAILABLE, and none of them committed', { skip: needsPostgres }, async () => {
    const target = new URL(h.database.databaseUrl!);
    const proxy = new TcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const proxied = new URL(h.database.databaseUrl!);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(await proxy.start());
    const db = createPostgresDatabase({ url: proxied.toString(), poolSize: 4, role: APP_ROLE, onError: () => {} });
    try {
      // The first run goes alone, and the five queued meanwhile share a batch.
      const run = createRunner(db, runnerStore(createAuditWriter(Buffer.alloc(32, 1))), commits, { ...DEFAULT_BATCHING, writers: 2 });
      const ctxs = await callers(6);
      let reached!: () => void;
      const atGate = new Promise<void>((resolve) => (reached = resolve));
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      const runs = ctxs.map((ctx, i) =>
        run(ctx, BATCHED_PLAIN, async (uow) => {
          await change(uow);
          if (i === 4) {
            reached();
            await gate;
          }
          uow.withoutRecord('not audited');
        }),
      );
      const settled = Promise.allSettled(runs);
      await Promise.allSettled(runs.slice(0, 1)); // the one alone, before the cut
      await atGate;
      await proxy.stop();
      open();
      const outcomes = await settled;
      assert.deepEqual(outcomes.slice(0, 1).map(codeOf), ['ok'], 'the run alone committed before the cut');
      for (const o of outcomes.slice(1)) {
        assert.equal(o.status, 'rejected');
        assert.ok(isUnavailableError((o as PromiseRejectedResult).reason), String((o as PromiseRejectedResult).reason));
      }
      assert.deepEqual((await Promise.all(ctxs.map(left))).map((s) => s.changes), [1, 0, 0, 0, 0, 0]);
    } finally {
      await proxy.stop();
      await db.close();
    }
  });
});

describe('a batch in flight', () => {
  /** A run whose body waits until `open()`: a batch in flight for as long as the test wants. */
  function gated() {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    return { open, body: async (uow: UnitOfWork) => void (await gate, await change(uow), uow.withoutRecord('not audited')) };
  }
  const plain = (uow: UnitOfWork) => change(uow).then(() => uow.withoutRecord('not audited'));
  /** `promises` all settled within 10 s, or an error naming `what`. */
  const within10s = (promises: Array<Promise<unknown>>, what: string) =>
    Promise.race([Promise.all(promises), new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: not settled within 10 s`)), 10_000).unref())]);
  const settledSoon = async (promises: Array<Promise<unknown>>, ms: number) => {
    const done = promises.map(() => false);
    promises.forEach((p, i) => void p.then(() => (done[i] = true), () => (done[i] = true)));
    await sleep(ms);
    return done;
  };

  test('holds the runs that arrive meanwhile for one batch after it, though a writer is free', async () => {
    const run = runner({ writers: 4, stallMs: 60_000 });
    const ctxs = await callers(4);
    const first = gated();
    const held = run(ctxs[0]!, BATCHED_PLAIN, first.body);
    const behind = ctxs.slice(1).map((ctx) => run(ctx, BATCHED_PLAIN, plain));
    assert.deepEqual(await settledSoon(behind, 300), [false, false, false], 'three writers were free, and none took them');
    first.open();
    await Promise.all([held, ...behind]);
    const seen = await Promise.all(ctxs.map(left));
    assert.equal(new Set(seen.slice(1).flatMap((s) => s.xmins)).size, 1, 'the three held runs committed as one batch');
    assert.notEqual(seen[1]!.xmins[0], seen[0]!.xmins[0]);
  });

  test('does not hold a full batch: it goes on a free writer at once', { skip: needsPostgres }, async () => {
    const run = runner({ writers: 2, maxBatch: 3, stallMs: 60_000 });
    const ctxs = await callers(4);
    const first = gated();
    const held = run(ctxs[0]!, BATCHED_PLAIN, first.body);
    const behind = ctxs.slice(1).map((ctx) => run(ctx, BATCHED_PLAIN, plain));
    await within10s(behind, 'the full batch behind a batch in flight'); // the first is still in flight
    assert.deepEqual((await Promise.all(ctxs.map(left))).map((s) => s.changes), [0, 1, 1, 1]);
    first.open();
    await held;
  });

  test('holds nothing once it is older than stallMs (it may be waiting for a lock): the runs behind it go on another writer', { skip: needsPostgres }, async () => {
    const run = runner({ writers: 2, stallMs: 30 });
    const ctxs = await callers(3);
    const first = gated();
    const held = run(ctxs[0]!, BATCHED_PLAIN, first.body);
    await within10s(ctxs.slice(1).map((ctx) => run(ctx, BATCHED_PLAIN, plain)), 'the runs behind a stalled batch'); // the first is still in flight
    const seen = await Promise.all(ctxs.map(left));
    assert.deepEqual(seen.map((s) => s.changes), [0, 1, 1]);
    assert.equal(new Set(seen.slice(1).flatMap((s) => s.xmins)).size, 1, 'the two behind it as one batch');
    first.open();
    await held;
  });
});
