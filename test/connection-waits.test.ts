// How long a statement may wait for a connection (db/postgres.ts, waitForConnections). The
// service's pool answers a statement that waits over 3 s for a free connection with an error,
// which the API answers 503: an overloaded database is said so, not queued behind. An audit
// scan's thread and the sealer's have pools of two, and their own reads are all that wait there:
// an export reads two blocks ahead, and on a loaded CI machine a block's read took over 3 s, so
// an export that nothing was wrong with was answered 503. Their statements wait as long as it
// takes; opening a connection stays bounded, and its failure (node-postgres's `timeout expired`,
// which a lookup lane met too) is answered 503 like any other lost database.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { isUnavailableError } from '../src/db/database.js';
import { createPostgresDatabase } from '../src/db/postgres.js';
import { useTestDatabase } from './helpers/harness.js';
import { TcpProxy } from './helpers/tcp-proxy.js';
import { needsPostgres } from './helpers/server.js';

const h = useTestDatabase();

/** Three statements of 3.2 s each on a pool of two: the third waits for a connection longer than 3 s. */
async function threeSlowStatements(waitForConnections: boolean) {
  const db = createPostgresDatabase({ url: h.database.databaseUrl!, poolSize: 2, onError: () => {}, waitForConnections });
  try {
    const started = Date.now();
    const outcomes = await Promise.allSettled([1, 2, 3].map((i) => db.query<{ i: number }>('SELECT $1::int AS i, pg_sleep(3.2)', [i], { prepareAs: 'slow_statement' })));
    return { outcomes, ms: Date.now() - started };
  } finally {
    await db.close();
  }
}

describe('a statement waiting for a free connection', { skip: needsPostgres }, () => {
  test("the service's pool: the third fails after 3 s with an error answered 503; the scans' and the sealer's: it waits and is answered", async () => {
    const [bounded, waiting] = await Promise.all([threeSlowStatements(false), threeSlowStatements(true)]);

    const [a, b, c] = bounded.outcomes;
    assert.equal(a!.status, 'fulfilled');
    assert.equal(b!.status, 'fulfilled');
    assert.equal(c!.status, 'rejected', 'the control: the pool bounds the wait');
    const reason = (c as PromiseRejectedResult).reason as Error;
    assert.match(reason.message, /timeout exceeded when trying to connect/);
    assert.equal(isUnavailableError(reason), true, 'the API answers it 503');

    assert.deepEqual(waiting.outcomes.map((o) => (o.status === 'fulfilled' ? o.value[0]!.i : (o.reason as Error).message)), [1, 2, 3]);
    assert.ok(waiting.ms >= 6000, `the third ran after one of the first two (${waiting.ms} ms)`);
  });

  describe('opening a connection stays bounded when statements may wait', () => {
    /** The test database behind a relay gone silent: connections are accepted, and PostgreSQL's startup never completes. */
    let silent: TcpProxy;
    let port: number;
    before(async () => {
      const target = new URL(h.database.databaseUrl!);
      silent = new TcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
      silent.silent = true;
      port = await silent.start();
    });
    after(() => silent.stop());

    /** How a statement on a connection that never opens fails, and after how long. */
    async function neverOpened(options: { waitForConnections?: boolean; lookup?: boolean }) {
      const url = Object.assign(new URL(h.database.databaseUrl!), { hostname: '127.0.0.1', port: String(port) }).toString();
      const db = createPostgresDatabase({ url, poolSize: 2, onError: () => {}, waitForConnections: options.waitForConnections });
      try {
        const started = Date.now();
        const err = await db.query('SELECT 1', [], { prepareAs: 'never_answered', lookup: options.lookup }).then(() => undefined, (e: unknown) => e as Error);
        return { err, ms: Date.now() - started };
      } finally {
        await db.close();
      }
    }

    test("a pool's connection that does not open within 3 s, and a lookup lane's, fail the statement, answered 503", async () => {
      const outcomes = await Promise.all([neverOpened({ waitForConnections: true }), neverOpened({ lookup: true })]);
      for (const [what, { err, ms }] of [['the waiting pool', outcomes[0]], ['a lookup lane', outcomes[1]]] as const) {
        assert.ok(err, `${what}: the statement failed`);
        assert.equal(isUnavailableError(err), true, `${what}: ${err.message}: answered 503`);
        // Not refused at once (the server accepted): it gave up at the bound. A hang would be caught by the file's timeout.
        assert.ok(ms >= 2900, `${what}: it failed at the 3 s bound, not before (${ms} ms)`);
      }
    });
  });
});
