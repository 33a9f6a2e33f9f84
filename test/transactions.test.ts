// Database.transaction with statements sent and not awaited (Tx.send: audit records, outbox
// rows). On PostgreSQL they are pipelined behind the statements before them and settled
// before COMMIT; on PGlite they run in turn. Either way a failure among them must fail the
// whole transaction with that statement's own error and leave nothing behind.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { eventsNamed } from './helpers/factories.js';
import { useTestDatabase } from './helpers/harness.js';
import { onPostgres } from './helpers/server.js';

const h = useTestDatabase();

const insertEvent = `INSERT INTO outbox (items) VALUES (json_build_array(json_build_object('name', $1::text, 'room', 'general', 'payload', '{}'::json)))`;
// outbox.items is NOT NULL: sending null items is a statement that fails in the database.
const failingInsert = `INSERT INTO outbox (items) VALUES (NULL)`;


test('a sent statement is in place for the statements after it, and commits with them', async () => {
  const name = `tx-${randomUUID()}`;
  const seen = await h.database.db.transaction(async (tx) => {
    tx.send(insertEvent, [name]);
    tx.send(insertEvent, [name]);
    return (await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox_events WHERE name = $1', [name]))[0]!.n;
  });
  assert.equal(seen, 2);
  assert.equal((await eventsNamed(h.database.owner, name)).length, 2);
});

test('a sent statement that fails before COMMIT rolls back everything, and its own error is thrown', async () => {
  const name = `tx-${randomUUID()}`;
  await assert.rejects(
    h.database.db.transaction(async (tx) => {
      await tx.query(insertEvent, [name]);
      tx.send(insertEvent, [name]);
      tx.send(failingInsert);
    }),
    (err: { code?: string }) => err.code === '23502',
  );
  assert.equal((await eventsNamed(h.database.owner, name)).length, 0, 'neither the awaited nor the sent rows committed');
});

test('a statement awaited after a failed sent one reports the sent one\'s error, not "transaction aborted"', async () => {
  const name = `tx-${randomUUID()}`;
  let afterwards: unknown;
  await assert.rejects(
    h.database.db.transaction(async (tx) => {
      tx.send(insertEvent, [name]);
      tx.send(failingInsert);
      try {
        await tx.query(insertEvent, [name]);
      } catch (err) {
        afterwards = err;
        throw err;
      }
    }),
    (err: { code?: string }) => err.code === '23502',
  );
  assert.equal((afterwards as { code?: string }).code, '25P02', 'the awaited statement only saw an aborted transaction');
  assert.equal((await eventsNamed(h.database.owner, name)).length, 0);
});

test('an error thrown by the use case after sending rolls the sent statements back', async () => {
  const name = `tx-${randomUUID()}`;
  await assert.rejects(
    h.database.db.transaction(async (tx) => {
      tx.send(insertEvent, [name]);
      throw new Error('refused after the audit record was sent');
    }),
    /refused after/,
  );
  assert.equal((await eventsNamed(h.database.owner, name)).length, 0);
});

test('after failed transactions every connection is clean: later transactions commit normally', async () => {
  // More failures than the pool has connections, so a connection left inside a transaction
  // (or with answers still in flight) would be handed out again and show here.
  for (let i = 0; i < 12; i++) {
    await assert.rejects(h.database.db.transaction(async (tx) => tx.send(failingInsert)));
  }
  const name = `tx-${randomUUID()}`;
  await Promise.all(Array.from({ length: 12 }, () => h.database.db.transaction(async (tx) => tx.send(insertEvent, [name]))));
  assert.equal((await eventsNamed(h.database.owner, name)).length, 12);
  if (onPostgres) {
    const stuck = await h.database.owner.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
    );
    assert.equal(stuck[0]!.n, 0, 'no connection was left inside a transaction');
  }
});

test('concurrent transactions each commit exactly their own sent statements', async () => {
  const names = Array.from({ length: 30 }, () => `tx-${randomUUID()}`);
  const outcomes = await Promise.allSettled(
    names.map((name, i) =>
      h.database.db.transaction(async (tx) => {
        tx.send(insertEvent, [name]);
        await tx.query('SELECT pg_sleep(0.001)');
        tx.send(insertEvent, [name]);
        if (i % 3 === 0) tx.send(failingInsert);
      }),
    ),
  );
  for (const [i, name] of names.entries()) {
    assert.equal(outcomes[i]!.status, i % 3 === 0 ? 'rejected' : 'fulfilled');
    assert.equal((await eventsNamed(h.database.owner, name)).length, i % 3 === 0 ? 0 : 2, `transaction ${i}`);
  }
});

test('key lookups outside transactions answer correctly when many run at once', async () => {
  // They share two pipelined connections: each answer must reach its own caller.
  const ids = Array.from({ length: 200 }, (_, i) => i + 1);
  const answers = await Promise.all(
    ids.map((id) => h.database.db.query<{ id: number }>('SELECT $1::bigint AS id', [id], { prepareAs: 'test_echo' })),
  );
  assert.deepEqual(answers.map((rows) => rows[0]!.id), ids);
});
