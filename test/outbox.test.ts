// The events outbox: addEvents writes its rows in the caller's transaction, so they commit
// with the change (carrying that transaction's id, which consumers order by) or vanish with it.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { createAuditWriter } from '../src/modules/audit/audit.writer.js';
import { addEvents, type OutboxEvent } from '../src/modules/outbox/outbox.js';
import type { EventRow } from './helpers/factories.js';
import { useTestDatabase } from './helpers/harness.js';
import { needsPostgres, type TestDatabase } from './helpers/server.js';

const h = useTestDatabase();

/** An outbox row with the id of the transaction that wrote it. */
interface StoredEvent extends EventRow {
  xact_id: string;
}

async function eventsNamed(name: string): Promise<StoredEvent[]> {
  return h.database.owner.query<StoredEvent>('SELECT id, name, room, payload, xact_id::text AS xact_id FROM events WHERE name = $1 ORDER BY id', [name]);
}

const currentXact = async (tx: { query: TestDatabase['db']['query'] }) =>
  (await tx.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x'))[0]!.x;

test('writes the events in the caller\'s transaction: visible after commit, in the given order, with its transaction id', async () => {
  const name = `test-${randomUUID()}`;
  const tricky = { text: 'a, "quoted" {braces} \\ back\\slash é 😀 \n newline', nested: { list: [1, null, 'x'], empty: {} }, n: 9007199254740991, t: true };
  const events: OutboxEvent[] = [
    { name, room: 'general', payload: { seq: 1 } },
    { name, room: 'project:7', payload: tricky },
    { name, room: 'user:3', payload: {} },
  ];
  const xact = await h.database.db.transaction(async (tx) => {
    addEvents(tx, events);
    return currentXact(tx);
  });
  const rows = await eventsNamed(name);
  assert.deepEqual(
    rows.map((r) => ({ room: r.room, payload: r.payload, xact_id: r.xact_id })),
    events.map((e) => ({ room: e.room, payload: e.payload, xact_id: xact })),
  );
  assert.ok(rows[0]!.id < rows[1]!.id && rows[1]!.id < rows[2]!.id, 'ids follow the order given');
});

test('writes nothing when the caller\'s transaction rolls back', async () => {
  const name = `test-${randomUUID()}`;
  await assert.rejects(
    h.database.db.transaction(async (tx) => {
      addEvents(tx, [{ name, room: 'general', payload: { doomed: true } }]);
      assert.equal((await tx.query('SELECT 1 FROM events WHERE name = $1', [name])).length, 1, 'written inside the transaction');
      throw new Error('the change failed');
    }),
    /the change failed/,
  );
  assert.deepEqual(await eventsNamed(name), []);
});

test('writes nothing when a later statement of the same transaction fails in the database', async () => {
  const name = `test-${randomUUID()}`;
  await assert.rejects(
    h.database.db.transaction(async (tx) => {
      addEvents(tx, [{ name, room: 'general', payload: {} }]);
      await tx.query('SELECT 1 / 0');
    }),
    /division by zero/,
  );
  assert.deepEqual(await eventsNamed(name), []);
});

test('separate transactions get separate transaction ids; an empty list writes nothing', async () => {
  const name = `test-${randomUUID()}`;
  const first = await h.database.db.transaction(async (tx) => {
    addEvents(tx, [{ name, room: 'general', payload: { n: 1 } }]);
    addEvents(tx, []);
    addEvents(tx, [{ name, room: 'general', payload: { n: 2 } }]);
    return currentXact(tx);
  });
  const second = await h.database.db.transaction(async (tx) => {
    addEvents(tx, [{ name, room: 'general', payload: { n: 3 } }]);
    return currentXact(tx);
  });
  const before = (await h.database.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM events'))[0]!.n;
  await h.database.db.transaction(async (tx) => addEvents(tx, []));
  assert.equal((await h.database.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM events'))[0]!.n, before);
  assert.notEqual(first, second);
  assert.deepEqual(
    (await eventsNamed(name)).map((r) => [r.payload.n, r.xact_id]),
    [[1, first], [2, first], [3, second]],
  );
});

test('other connections do not see the events until the transaction commits', { skip: needsPostgres }, async () => {
  const name = `test-${randomUUID()}`;
  let seenInside = -1;
  await h.database.db.transaction(async (tx) => {
    addEvents(tx, [{ name, room: 'general', payload: {} }]);
    seenInside = (await eventsNamed(name)).length; // the owner's pool: another connection
  });
  assert.equal(seenInside, 0);
  assert.equal((await eventsNamed(name)).length, 1);
});

test('a consumer reading below the oldest running transaction does not see a late commit until it commits', { skip: needsPostgres }, async () => {
  // API.md 5.5: rows are read only when their transaction is older than every running one.
  const name = `test-${randomUUID()}`;
  const visible = () =>
    h.database.owner.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM events WHERE name = $1 AND xact_id < pg_snapshot_xmin(pg_current_snapshot())`,
      [name],
    ).then((r) => r[0]!.n);
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const inside = new Promise<void>((resolve) => (started = resolve));
  const slow = h.database.db.transaction(async (tx) => {
    addEvents(tx, [{ name, room: 'general', payload: { which: 'slow' } }]);
    started();
    await gate;
  });
  await inside;
  await h.database.db.transaction(async (tx) => addEvents(tx, [{ name, room: 'general', payload: { which: 'fast' } }]));
  const rows = await eventsNamed(name);
  assert.deepEqual(rows.map((r) => r.payload.which), ['fast'], 'the fast one committed, the slow one not yet');
  assert.equal(await visible(), 0, 'the fast one waits behind the running slow transaction');
  release();
  await slow;
  const [slowRow, fastRow] = await eventsNamed(name);
  assert.deepEqual([slowRow!.payload.which, fastRow!.payload.which], ['slow', 'fast'], 'the slow one has the lower id');
  assert.ok(BigInt(slowRow!.xact_id) < BigInt(fastRow!.xact_id), 'and the older transaction id');
});

// The audit writer sends a change's record and its events as one statement (a writable CTE).
describe('events sent with an audit record', () => {
  const audit = createAuditWriter(Buffer.alloc(32, 7));
  const ctx = { actor: undefined, ip: '127.0.0.1', userAgent: 'outbox-test', requestId: '' };
  const recordsOf = (requestId: string) =>
    h.database.owner.query<{ action: string; xact_id: string }>('SELECT action, xact_id::text AS xact_id FROM audit_log WHERE request_id = $1', [requestId]);

  test('are written with the record, in the given order, in the same transaction', async () => {
    const name = `test-${randomUUID()}`;
    const requestId = randomUUID();
    const xact = await h.database.db.transaction(async (tx) => {
      audit.record(tx, { ...ctx, requestId }, { action: 'DELETE_TASK', resourceType: 'TASK', resourceId: 1, actorId: null }, [
        { name, room: 'project:1', payload: { n: 1 } },
        { name, room: 'user:2', payload: { n: 2 } },
      ]);
      return currentXact(tx);
    });
    assert.deepEqual(await recordsOf(requestId), [{ action: 'DELETE_TASK', xact_id: xact }]);
    assert.deepEqual((await eventsNamed(name)).map((r) => [r.room, r.payload.n, r.xact_id]), [['project:1', 1, xact], ['user:2', 2, xact]]);
  });

  test('leave neither the record nor the events when the transaction fails after them', async () => {
    const name = `test-${randomUUID()}`;
    const requestId = randomUUID();
    await assert.rejects(
      h.database.db.transaction(async (tx) => {
        audit.record(tx, { ...ctx, requestId }, { action: 'DELETE_TASK', resourceType: 'TASK', resourceId: 1, actorId: null }, [{ name, room: 'general', payload: {} }]);
        await tx.query('SELECT 1 / 0');
      }),
      /division by zero/,
    );
    assert.deepEqual(await recordsOf(requestId), []);
    assert.deepEqual(await eventsNamed(name), []);
  });

  test('fail with the record: an event the database refuses takes the record and the change down too', async () => {
    const name = `test-${randomUUID()}`;
    const requestId = randomUUID();
    await assert.rejects(
      h.database.db.transaction(async (tx) => {
        await tx.query(`INSERT INTO events (name, room, payload) VALUES ($1, 'general', '{}')`, [`${name}-change`]);
        // A NUL in a jsonb string is refused by PostgreSQL: the events part of the statement fails.
        audit.record(tx, { ...ctx, requestId }, { action: 'DELETE_TASK', resourceType: 'TASK', resourceId: 1, actorId: null }, [{ name, room: 'general', payload: { bad: 'a\u0000b' } }]);
      }),
      (err: Error & { code?: string }) => err.code === '22P05' || /unsupported Unicode escape|\\u0000/.test(err.message),
    );
    assert.deepEqual(await recordsOf(requestId), []);
    assert.deepEqual(await eventsNamed(name), []);
    assert.deepEqual(await eventsNamed(`${name}-change`), [], 'the change before them rolled back too');
  });
});
