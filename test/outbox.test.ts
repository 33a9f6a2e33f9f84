// The outbox and the commit-order reader (db/commit-order.ts). addEvents writes a transaction's
// events as one row in the caller's transaction, so that they commit with the change (carrying
// the transaction's id) or vanish with it; the reader takes committed rows in batches between
// snapshots, so that a row written after another transaction committed comes after it, whatever
// the transaction ids say.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { committedReader, nextPair, positionAfter, type PositionColumns } from '../src/db/commit-order.js';
import type { Queryable } from '../src/db/database.js';
import { createAuditWriter } from '../src/modules/audit/audit.writer.js';
import type { OutboxEvent } from '../src/modules/outbox/outbox.events.js';
import { addEvents, committedOutbox } from '../src/modules/outbox/outbox.repository.js';
import { packetsFor } from '../src/realtime/delivery.js';
import { eventsNamed, type StoredEvent } from './helpers/factories.js';
import { useTestDatabase } from './helpers/harness.js';
import { needsPostgres, type TestDatabase } from './helpers/server.js';

const h = useTestDatabase();

const currentXact = async (tx: { query: TestDatabase['db']['query'] }) =>
  (await tx.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x'))[0]!.x;

test('writes a transaction\'s events as one row in its transaction: visible after commit, in the given order, with its transaction id', async () => {
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
  const rows = await eventsNamed(h.database.owner, name);
  assert.deepEqual(
    rows.map((r) => ({ room: r.room, payload: r.payload, xact_id: r.xact_id, position: r.position })),
    events.map((e, i) => ({ room: e.room, payload: e.payload, xact_id: xact, position: i + 1 })),
  );
  assert.equal(new Set(rows.map((r) => r.row_id)).size, 1, 'one row for the transaction');
});

test('writes nothing when the caller\'s transaction rolls back', async () => {
  const name = `test-${randomUUID()}`;
  await assert.rejects(
    h.database.db.transaction(async (tx) => {
      addEvents(tx, [{ name, room: 'general', payload: { doomed: true } }]);
      assert.equal((await tx.query(`SELECT 1 FROM outbox_events WHERE name = $1`, [name])).length, 1, 'written inside the transaction');
      throw new Error('the change failed');
    }),
    /the change failed/,
  );
  assert.deepEqual(await eventsNamed(h.database.owner, name), []);
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
  assert.deepEqual(await eventsNamed(h.database.owner, name), []);
});

test('an empty list writes no row; the service may never update an outbox row', async () => {
  const count = async () => (await h.database.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox'))[0]!.n;
  const before = await count();
  await h.database.db.transaction(async (tx) => addEvents(tx, []));
  assert.equal(await count(), before);
  if (h.database.db.kind === 'postgres') {
    // The service's role (R__privileges.sql): written once, only ever deleted by pruning.
    await assert.rejects(h.database.db.query('UPDATE outbox SET items = items WHERE false'), /permission denied/);
    await assert.rejects(h.database.db.query('UPDATE outbox_batches SET row_ids = row_ids WHERE false'), /permission denied/);
  }
});

test('other connections do not see the events until the transaction commits', { skip: needsPostgres }, async () => {
  const name = `test-${randomUUID()}`;
  let seenInside = -1;
  await h.database.db.transaction(async (tx) => {
    addEvents(tx, [{ name, room: 'general', payload: {} }]);
    seenInside = (await eventsNamed(h.database.owner, name)).length; // the owner's pool: another connection
  });
  assert.equal(seenInside, 0);
  assert.equal((await eventsNamed(h.database.owner, name)).length, 1);
});

// The reader over a throwaway table of its own, so that nothing else the database holds gets in the way.
describe('the commit-order reader', () => {
  const reader = committedReader<{ tag: string }>('test-commit-order', 'commit_order_probe', 't.tag');
  const setUp = async () => {
    await h.database.owner.query(`CREATE TABLE IF NOT EXISTS commit_order_probe (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, xact_id xid8 NOT NULL DEFAULT pg_current_xact_id(), tag text NOT NULL)`);
    await h.database.owner.query('CREATE INDEX IF NOT EXISTS commit_order_probe_xact ON commit_order_probe (xact_id)');
    if (h.database.db.kind === 'postgres') await h.database.owner.query('GRANT SELECT, INSERT ON commit_order_probe TO teamlog_app');
  };
  const insert = (q: Queryable, tag: string) => q.query('INSERT INTO commit_order_probe (tag) VALUES ($1)', [tag]);

  /** Reads batches as a consumer would, keeping its position as its batch rows would, until nothing is left. */
  async function drain(position: PositionColumns | undefined, limit: number): Promise<{ batches: string[][]; position: PositionColumns | undefined }> {
    const batches: string[][] = [];
    for (;;) {
      const { rows, position: next } = await reader.next(h.database.db, position, limit);
      if (!next) return { batches, position };
      batches.push(rows.map((r) => r.tag));
      position = next;
    }
  }

  test('reads every committed row once, in id order, across batches of a pair too big for one', async () => {
    await setUp();
    const { position: start } = await drain(undefined, 1000);
    const tags = Array.from({ length: 7 }, (_, i) => `split-${i}-${randomUUID()}`);
    for (const tag of tags) await insert(h.database.owner, tag);
    const { batches, position } = await drain(start, 3);
    assert.deepEqual(batches.flat(), tags);
    assert.deepEqual(batches.map((b) => b.length), [3, 3, 1]);
    assert.equal(position!.through_id, null, 'the pair is finished');
    assert.deepEqual((await drain(position, 3)).batches, [], 'nothing twice');
  });

  test('an exactly full last batch of a pair: the next read moves on to the next pair and skips nothing', async () => {
    await setUp();
    const { position: start } = await drain(undefined, 1000);
    const tags = [`full-a-${randomUUID()}`, `full-b-${randomUUID()}`];
    for (const tag of tags) await insert(h.database.owner, tag);
    const first = await reader.next(h.database.db, start, 2);
    assert.deepEqual(first.rows.map((r) => r.tag), tags);
    assert.notEqual(first.position!.through_id, null, 'a full batch may have left rows behind');
    const later = `full-c-${randomUUID()}`;
    await insert(h.database.owner, later);
    const { batches } = await drain(first.position, 2);
    assert.deepEqual(batches.flat(), [later]);
  });

  test('a transaction that took its id first and committed last is read after one that committed before it, and does not hold it back', { skip: needsPostgres }, async () => {
    await setUp();
    const { position: start } = await drain(undefined, 1000);
    const slowTag = `slow-${randomUUID()}`;
    const fastTag = `fast-${randomUUID()}`;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const inside = new Promise<void>((resolve) => (started = resolve));
    const slow = h.database.owner.transaction(async (tx) => {
      await currentXact(tx); // its transaction id, taken first
      started();
      await gate;
      await insert(tx, slowTag);
    });
    await inside;
    await insert(h.database.owner, fastTag);
    // The fast one is there at once, though an older transaction is still running.
    const early = await drain(start, 1000);
    assert.deepEqual(early.batches.flat(), [fastTag]);
    release();
    await slow;
    const late = await drain(early.position, 1000);
    assert.deepEqual(late.batches.flat(), [slowTag]);
    const [slowRow, fastRow] = await h.database.owner.query<{ tag: string; x: string }>(
      'SELECT tag, xact_id::text AS x FROM commit_order_probe WHERE tag = ANY ($1) ORDER BY xact_id',
      [[slowTag, fastTag]],
    );
    assert.deepEqual([slowRow!.tag, fastRow!.tag], [slowTag, fastTag], 'the slow one has the lower transaction id, and still came last');
  });

  test('rows written inside one batch are read in id order: what was written after a commit comes after it', { skip: needsPostgres }, async () => {
    await setUp();
    const { position: start } = await drain(undefined, 1000);
    // Three transactions, each started after the one before committed, the first holding the lowest transaction id.
    const tags = [`a-${randomUUID()}`, `b-${randomUUID()}`, `c-${randomUUID()}`];
    for (const tag of tags) await insert(h.database.owner, tag);
    const { batches } = await drain(start, 1000);
    assert.deepEqual(batches, [tags]);
  });

  test('after a point in the previous release\'s (xact_id, id) order: the rows past it, then on by snapshots', async () => {
    await setUp();
    await drain(undefined, 1000);
    const before = `before-${randomUUID()}`;
    await insert(h.database.owner, before);
    const [point] = await h.database.owner.query<{ x: string; id: number }>('SELECT xact_id::text AS x, id::int AS id FROM commit_order_probe WHERE tag = $1', [before]);
    const after = [`after-1-${randomUUID()}`, `after-2-${randomUUID()}`];
    for (const tag of after) await insert(h.database.owner, tag);
    const legacy: PositionColumns = { after_snapshot: null, after_xact: point!.x, after_id: point!.id, snapshot: null, through_id: null };
    assert.deepEqual(nextPair(legacy).lower, { xact: point!.x, id: point!.id });
    const { batches, position } = await drain(legacy, 1);
    assert.deepEqual(batches.flat(), after);
    const more = `more-${randomUUID()}`;
    await insert(h.database.owner, more);
    assert.deepEqual((await drain(position, 1000)).batches.flat(), [more]);
    assert.equal(positionAfter(nextPair(position), '5:5:', { length: 1, lastId: 9 }, 2).through_id, null);
  });
});

// The audit writer sends a change's record and its transaction's outbox row as one statement.
describe('events sent with an audit record', () => {
  const audit = createAuditWriter(Buffer.alloc(32, 7));
  const ctx = { actor: undefined, ip: '127.0.0.1', userAgent: 'outbox-test', requestId: '' };
  const recordsOf = (requestId: string) =>
    h.database.owner.query<{ id: number; action: string; xact_id: string; timestamp: string }>(
      'SELECT id, action, xact_id::text AS xact_id, "timestamp" FROM audit_log WHERE request_id = $1',
      [requestId],
    );

  test('are written with the record in one row, in the given order, then the record\'s own /admin event naming it; delivered, it carries the record', async () => {
    const name = `test-${randomUUID()}`;
    const requestId = randomUUID();
    const xact = await h.database.db.transaction(async (tx) => {
      audit.record(tx, { ...ctx, requestId }, { action: 'DELETE_TASK', resourceType: 'TASK', resourceId: 1, actorId: null, metadata: { title: 'x' } }, [
        { name, room: 'project:1', payload: { n: 1 } },
        { name, room: 'user:2', payload: { n: 2 } },
      ]);
      return currentXact(tx);
    });
    const [record] = await recordsOf(requestId);
    assert.deepEqual({ action: record!.action, xact_id: record!.xact_id }, { action: 'DELETE_TASK', xact_id: xact });
    const changes = await eventsNamed(h.database.owner, name);
    assert.deepEqual(changes.map((r) => [r.room, r.payload.n, r.xact_id, r.position]), [['project:1', 1, xact, 1], ['user:2', 2, xact, 2]]);
    const own = await h.database.owner.query<StoredEvent>(
      `SELECT row_id, position::int, name, room, payload FROM outbox_events WHERE name = 'audit-record' AND (payload->>'id')::bigint = $1`,
      [record!.id],
    );
    assert.equal(own.length, 1);
    assert.deepEqual([own[0]!.row_id, own[0]!.position, own[0]!.room, own[0]!.payload], [changes[0]!.row_id, 3, 'admin', { id: record!.id }], 'written naming the record: not a copy of it');
    // As the relay reads it: the record's event still names the record, and reads nothing more.
    const [row] = (await committedOutbox.next(h.database.db, { after_snapshot: null, after_xact: xact, after_id: own[0]!.row_id - 1, snapshot: null, through_id: null }, 1)).rows;
    const read = row!.items;
    assert.deepEqual(read.slice(0, 2).map((e) => e.payload.n), [1, 2]);
    assert.deepEqual(read[2], { name: 'audit-record', room: 'admin', payload: { id: record!.id } });
    // As delivery sends it, for a socket in its room: it carries the record. Not needed: not read.
    const numbered = read.map((e, i) => ({ ...e, event_id: 1_000 + i }));
    assert.equal((await packetsFor(numbered, h.database.db, () => false)).has(1_002), false);
    const packet = (await packetsFor(numbered, h.database.db)).get(1_002)!;
    const { timestamp, ...rest } = packet;
    assert.deepEqual(rest, {
      id: record!.id, actor_id: null, action: 'DELETE_TASK', resource_type: 'TASK', resource_id: 1, result: 'SUCCESS',
      metadata: { title: 'x' }, ip: '127.0.0.1', user_agent: 'outbox-test', request_id: requestId, event_id: 1_002,
    });
    assert.equal(await packetsFor([{ ...numbered[2]!, payload: { id: record!.id + 1_000_000 } }], h.database.db).then((p) => p.get(1_002)), null, 'a record that is gone: nothing to send');
    assert.equal(timestamp, record!.timestamp);
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
    assert.deepEqual(await eventsNamed(h.database.owner, name), []);
  });

  test('fail with the record: a record the database refuses (over its bounds) takes its events and the change down too', async () => {
    const name = `test-${randomUUID()}`;
    const requestId = randomUUID();
    await assert.rejects(
      h.database.db.transaction(async (tx) => {
        addEvents(tx, [{ name: `${name}-change`, room: 'general', payload: {} }]);
        // audit_log_bounded (migrations/0008): a record's metadata text is at most 16 KiB.
        audit.record(tx, { ...ctx, requestId }, { action: 'DELETE_TASK', resourceType: 'TASK', resourceId: 1, actorId: null, metadata: { blob: 'x'.repeat(20_000) } }, [
          { name, room: 'general', payload: {} },
        ]);
      }),
      (err: Error & { code?: string }) => err.code === '23514' && /audit_log_bounded/.test(err.message),
    );
    assert.deepEqual(await recordsOf(requestId), []);
    assert.deepEqual(await eventsNamed(h.database.owner, name), []);
    assert.deepEqual(await eventsNamed(h.database.owner, `${name}-change`), [], 'the change before them rolled back too');
  });
});
