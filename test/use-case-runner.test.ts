// The use-case runner's rules (use-cases/runner.ts), tried directly on a real database: what
// an audited use case must record, what a refusal leaves behind, that the caller is checked
// inside the transaction, and that a unique constraint a concurrent request won is the
// domain's conflict. Each use case here "changes" something visible: an outbox row.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import type { ActorContext, RequestContext } from '../src/context.js';
import { DomainError } from '../src/domain/errors.js';
import { runnerStore } from '../src/runtime.js';
import { createAuditWriter } from '../src/modules/audit/audit.writer.js';
import { insertUser } from '../src/modules/users/users.repository.js';
import { CommitSignal, type Committed } from '../src/background/commit-signal.js';
import { UseCaseContractError, createRunner, useCase, type Run, type UnitOfWork } from '../src/use-cases/runner.js';
import { useTestDatabase } from './helpers/harness.js';

const h = useTestDatabase();
let runner: Run | undefined;
const run: Run = (ctx, uc, body, opts) => {
  runner ??= createRunner(h.database.db, runnerStore(createAuditWriter(Buffer.alloc(32, 1))), commits);
  return runner(ctx, uc, body, opts);
};

const commits = new CommitSignal();
const announced: Committed[] = [];
commits.onCommitted((c) => announced.push(c));

const AUDITED = useCase('test.audited', ['DELETE_TASK']);
const PLAIN = useCase('test.plain');

const context = (): RequestContext => ({ actor: undefined, ip: '10.0.0.1', userAgent: 'runner-test', requestId: `runner-${randomUUID()}` });

/** The use case's visible change: an outbox row with an event named after the request. */
const change = (uow: UnitOfWork) =>
  uow.tx.query(`INSERT INTO outbox (items) VALUES (json_build_array(json_build_object('name', $1::text, 'room', 'general', 'payload', '{}'::json)))`, [uow.ctx.requestId]);

async function left(ctx: RequestContext) {
  const [changes, records] = await Promise.all([
    h.database.owner.query<{ n: number }>(`SELECT count(*)::int AS n FROM outbox_events WHERE name = $1`, [ctx.requestId]),
    h.database.owner.query<{ action: string; result: string; resource_type: string; resource_id: number | null }>(
      'SELECT action, result, resource_type, resource_id FROM audit_log WHERE request_id = $1 ORDER BY id',
      [ctx.requestId],
    ),
  ]);
  return { changes: changes[0]!.n, records: records.map((r) => `${r.result} ${r.action} ${r.resource_type}/${r.resource_id}`) };
}

const record = { action: 'DELETE_TASK', resourceType: 'TASK', resourceId: 7 } as const;

describe('the audit record of an audited use case', () => {
  test('commits with its change when recorded exactly once, and announces the commit (audited, with its record\'s event) after it', async () => {
    const ctx = context();
    const before = announced.length;
    await run(ctx, AUDITED, async (uow) => {
      await change(uow);
      uow.audit(record);
      uow.emit({ name: 'test-event', room: 'general', payload: {} });
      assert.equal(announced.length, before, 'not before the commit');
    });
    assert.deepEqual(await left(ctx), { changes: 1, records: ['SUCCESS DELETE_TASK TASK/7'] });
    assert.deepEqual(announced.slice(before), [{ audited: true, events: 2 }]);
  });

  test('forgotten: the run fails as a bug and its change is rolled back', async () => {
    const ctx = context();
    await assert.rejects(run(ctx, AUDITED, change), (err) => err instanceof UseCaseContractError && /without its audit record/.test(err.message));
    assert.deepEqual(await left(ctx), { changes: 0, records: [] });
  });

  test('recorded twice: the run fails, nothing is written', async () => {
    const ctx = context();
    await assert.rejects(
      run(ctx, AUDITED, async (uow) => {
        await change(uow);
        uow.audit(record);
        uow.audit(record);
      }),
      UseCaseContractError,
    );
    assert.deepEqual(await left(ctx), { changes: 0, records: [] });
  });

  test('an action the use case does not declare is refused as a bug', async () => {
    const ctx = context();
    await assert.rejects(
      run(ctx, AUDITED, async (uow) => uow.audit({ ...record, action: 'CREATE_TASK' })),
      UseCaseContractError,
    );
    await assert.rejects(run(ctx, PLAIN, async (uow) => uow.audit(record)), UseCaseContractError, 'a plain use case may record nothing');
    assert.deepEqual(await left(ctx), { changes: 0, records: [] });
  });

  test('withoutRecord: a change that is not audited commits alone; saying both is a bug', async () => {
    const ctx = context();
    await run(ctx, AUDITED, async (uow) => {
      await change(uow);
      uow.withoutRecord('not audited');
    });
    assert.deepEqual(await left(ctx), { changes: 1, records: [] });
    const both = context();
    await assert.rejects(
      run(both, AUDITED, async (uow) => {
        uow.audit(record);
        uow.withoutRecord('unchanged');
      }),
      UseCaseContractError,
    );
    assert.deepEqual(await left(both), { changes: 0, records: [] });
  });

  test('failAfterCommit keeps the change and its record, then throws the domain error', async () => {
    const ctx = context();
    const error = new DomainError('unauthenticated', 'TOKEN_REVOKED', 'revoked');
    await assert.rejects(
      run(ctx, AUDITED, async (uow) => {
        await change(uow);
        uow.audit({ ...record, result: 'FAILURE' });
        return uow.failAfterCommit(error);
      }),
      (err) => err === error,
    );
    assert.deepEqual(await left(ctx), { changes: 1, records: ['FAILURE DELETE_TASK TASK/7'] });
  });
});

describe('refusals', () => {
  const HIDDEN = { allowed: false, visible: false } as const;
  const VISIBLE = { allowed: false, visible: true, reason: 'not yours' } as const;

  test('a refused authorize() rolls the change back, then writes one DENIED record in its own transaction, and throws 404 for what the caller may not see', async () => {
    const ctx = context();
    await assert.rejects(
      run(ctx, AUDITED, async (uow) => {
        await change(uow);
        uow.emit({ name: ctx.requestId, room: 'general', payload: {} });
        uow.authorize(HIDDEN, 'Task', record);
      }),
      (err) => err instanceof DomainError && err.code === 'NOT_FOUND' && err.detail === 'Task not found',
    );
    assert.deepEqual(await left(ctx), { changes: 0, records: ['DENIED DELETE_TASK TASK/7'] });
  });

  test('a refusal names only an action the use case declares; a visible resource is refused with 403 and its reason', async () => {
    const ctx = context();
    await assert.rejects(run(ctx, PLAIN, async (uow) => uow.authorize(VISIBLE, 'Task', record)), UseCaseContractError);
    await assert.rejects(run(ctx, PLAIN, async (uow) => uow.authorize(VISIBLE, 'Task')), (err) => err instanceof DomainError && err.code === 'FORBIDDEN' && err.detail === 'not yours');
    assert.deepEqual(await left(ctx), { changes: 0, records: [] });
  });

  test('an allowing verdict lets the use case go on: its change and record commit', async () => {
    const ctx = context();
    await run(ctx, AUDITED, async (uow) => {
      uow.authorize({ allowed: true, visible: true }, 'Task', record);
      await change(uow);
      uow.audit(record);
    });
    assert.deepEqual(await left(ctx), { changes: 1, records: ['SUCCESS DELETE_TASK TASK/7'] });
  });

  test('any other error rolls back and writes no record', async () => {
    const ctx = context();
    await assert.rejects(
      run(ctx, AUDITED, async (uow) => {
        await change(uow);
        uow.audit(record);
        throw new DomainError('conflict', 'CONFLICT', 'no');
      }),
      (err) => err instanceof DomainError && err.code === 'CONFLICT',
    );
    assert.deepEqual(await left(ctx), { changes: 0, records: [] });
  });
});

describe('the caller, checked inside the transaction', () => {
  async function caller(): Promise<ActorContext> {
    const user = (await insertUser(h.database.db, { email: `runner-${randomUUID()}@test.local`, name: 'Runner', passwordHash: 'x', role: 'ADMIN' }))!;
    const session = await h.database.owner.query<{ id: number }>(`INSERT INTO sessions (user_id, expires_at) VALUES ($1, now() + interval '1 hour') RETURNING id`, [user.id]);
    return { ...context(), actor: { id: user.id, email: user.email, name: user.name, role: 'ADMIN', sessionId: session[0]!.id } };
  }

  test('uow.actor() is the caller as the database has them now, not as the request said', async () => {
    const ctx = await caller();
    await h.database.owner.query(`UPDATE users SET role = 'USER' WHERE id = $1`, [ctx.actor.id]);
    const seen = await run(ctx, PLAIN, async (uow) => (await uow.actor()).role);
    assert.equal(seen, 'USER');
  });

  test('a session revoked, or a user deactivated, since the request began: nothing commits, even if the use case never asked', async () => {
    const revoked = await caller();
    await h.database.owner.query(`UPDATE sessions SET revoked_at = now() WHERE id = $1`, [revoked.actor.sessionId]);
    await assert.rejects(run(revoked, PLAIN, change), (err) => err instanceof DomainError && err.code === 'TOKEN_REVOKED');
    assert.equal((await left(revoked)).changes, 0);

    const deactivated = await caller();
    await h.database.owner.query('UPDATE users SET active = false WHERE id = $1', [deactivated.actor.id]);
    await assert.rejects(run(deactivated, PLAIN, change), (err) => err instanceof DomainError && err.code === 'ACCOUNT_DEACTIVATED');
    assert.equal((await left(deactivated)).changes, 0);
  });
});

test('a unique email a concurrent request took first is EMAIL_TAKEN, not a driver error', async () => {
  const email = `taken-${randomUUID()}@test.local`;
  await insertUser(h.database.db, { email, name: 'First', passwordHash: 'x', role: 'USER' });
  const other = (await insertUser(h.database.db, { email: `other-${randomUUID()}@test.local`, name: 'Other', passwordHash: 'x', role: 'USER' }))!;
  await assert.rejects(
    run(context(), PLAIN, (uow) => uow.tx.query('UPDATE users SET email = $1 WHERE id = $2', [email, other.id])),
    (err) => err instanceof DomainError && err.kind === 'conflict' && err.code === 'EMAIL_TAKEN',
  );
});
