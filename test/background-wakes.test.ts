// What an audited commit sets off in the background, counted by the statements the service sends
// to a real database. Each commit wakes the sealer and the relay; what they do after it must not
// wake work that has nothing to do:
// - a checkpointer waiting for its interval has nothing to do before then, however much is sealed;
// - the dispatcher is told of each batch twice on the instance whose relay numbered it (the
//   relay's hand-over and its NOTIFY): the second telling must not read the database back.
// Only the loops' safety polls (one a second each) may read for nothing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Database, Tx } from '../src/db/database.js';
import { declaredStatements } from '../src/db/statements.js';
import { loginAdmin } from './helpers/client.js';
import { createTestDatabase, onPostgres, startTestServer, type TestServer } from './helpers/server.js';

/** Counts, by statement text, what is sent through `db` (its transactions included), and how many answers were empty. */
function counted(db: Database) {
  const sent = new Map<string, number>();
  const empty = new Map<string, number>();
  const bump = (m: Map<string, number>, sql: string) => m.set(sql, (m.get(sql) ?? 0) + 1);
  const watch = async <R>(sql: string, run: () => Promise<R[]>): Promise<R[]> => {
    bump(sent, sql);
    const rows = await run();
    if (rows.length === 0) bump(empty, sql);
    return rows;
  };
  const watchTx = (tx: Tx): Tx =>
    new Proxy(tx, {
      get(target, key) {
        if (key === 'query') return (sql: string, params?: readonly unknown[], o?: never) => watch(sql, () => target.query(sql, params, o));
        if (key === 'send') return (sql: string, params?: readonly unknown[], o?: never) => (bump(sent, sql), target.send(sql, params, o));
        const value = Reflect.get(target, key) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  const wrapped: Database = new Proxy(db, {
    get(target, key) {
      // No access for threads: on PostgreSQL the sealer would otherwise run in a thread of its
      // own, on connections this proxy never sees (sealing.thread.ts). Its wakes are the same
      // code there (evidence.sealer.ts); test/sealing-thread.test.ts covers the thread itself.
      if (key === 'threadAccess') return undefined;
      if (key === 'query') return (sql: string, params?: readonly unknown[], o?: never) => watch(sql, () => target.query(sql, params, o));
      if (key === 'transaction') return (fn: (tx: Tx) => Promise<unknown>, o?: never) => target.transaction((tx) => fn(watchTx(tx)), o);
      const value = Reflect.get(target, key) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const textOf = (name: string) => declaredStatements().get(name)?.text ?? assert.fail(`no statement ${name}`);
  return {
    db: wrapped,
    reset: () => (sent.clear(), empty.clear()),
    sent: (name: string) => sent.get(textOf(name)) ?? 0,
    empty: (name: string) => empty.get(textOf(name)) ?? 0,
  };
}

/** Waits until every record is sealed (and, with `checkpointed`, a checkpoint has been signed). */
async function sealedAll(server: TestServer, { checkpointed = false } = {}): Promise<void> {
  for (let tries = 0; tries < 1000; tries++) {
    const [row] = await server.owner.query<{ unsealed: number; checkpoints: number }>(
      `SELECT (SELECT count(*)::int FROM audit_log a WHERE NOT EXISTS (SELECT 1 FROM audit_seal s WHERE s.record_id = a.id)) AS unsealed,
              (SELECT count(*)::int FROM audit_checkpoints) AS checkpoints`,
    );
    if (row!.unsealed === 0 && (!checkpointed || row!.checkpoints > 0)) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail('the records were not sealed');
}

test('one audited commit after another: the waiting checkpointer is not woken by each seal, and no batch is read back for nothing', async () => {
  const database = await createTestDatabase();
  const counts = counted(database.db);
  // A checkpoint interval far longer than the test: after the first checkpoint, the checkpointer only waits.
  const server = await startTestServer({ database: { ...database, db: counts.db }, env: { AUDIT_CHECKPOINT_INTERVAL_MS: '600000' } });
  try {
    const admin = await loginAdmin(server);
    // The first checkpoint is signed at once (there is none to wait for); from then on the next is 10 minutes away.
    await sealedAll(server, { checkpointed: true });

    const commits = 12;
    counts.reset();
    const started = Date.now();
    for (let i = 0; i < commits; i++) {
      const res = await admin.client.post('/api/v1/projects', { name: `Project ${i}` }, { token: admin.token });
      assert.equal(res.status, 201, res.text);
      // Sealed before the next: one seal batch per commit, each followed by the sealer's wake-ups.
      await sealedAll(server);
    }
    // The NOTIFYs of the last batches, and anything they would wake, have arrived.
    await new Promise((r) => setTimeout(r, 300));
    // Each loop polls once a second as a safety net: those rounds are the only ones allowed.
    const polls = Math.ceil((Date.now() - started) / 1000) + 1;
    assert.ok(counts.sent('evidence.insertBatch') >= commits, 'the sealer sealed each commit in a round of its own');

    const checkpointRounds = counts.sent('evidence.latestCheckpoint');
    assert.ok(checkpointRounds <= polls, `${checkpointRounds} checkpointer rounds for ${commits} seals in ${polls - 1} s: only its polls may run while it waits`);

    const emptyReads = counts.empty('outbox.after');
    assert.ok(emptyReads <= polls, `${emptyReads} reads of events that found nothing for ${commits} batches in ${polls - 1} s`);
    if (onPostgres) {
      // The events reached this instance's dispatcher from its relay, not from a read.
      assert.ok(counts.sent('outbox.after') - emptyReads < commits, 'the batches were handed over, not read back');
    }
  } finally {
    await server.close();
    await database.drop();
  }
});
