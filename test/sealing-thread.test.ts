// On PostgreSQL the sealer and the checkpointer run in a worker thread of their own, on
// connections of their own (src/modules/audit/evidence/sealing.thread.ts, issue 39): a real
// server process, whose log must still carry the thread's lines (through the main logger), whose
// sealing must go on when the thread's connection is lost, and whose stop must end the thread.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { spawnServer, type ServerProcess } from './helpers/process.js';
import { adminQuery } from './helpers/postgres.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, createTestDatabase, needsPostgres, TEST_SIGNING_KEY, type TestDatabase } from './helpers/server.js';
import { sleep } from './helpers/sockets.js';

const SEALER = 'teamlog-audit-sealer';

describe('the sealer in a thread of its own (PostgreSQL)', { skip: needsPostgres }, () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let dataDir: string;

  before(async () => {
    database = await createTestDatabase();
    dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-sealing-thread-'));
    server = await spawnServer({
      DATA_DIR: dataDir, DATABASE_URL: database.databaseUrl!, JWT_SECRET: 'sealing-thread-'.padEnd(48, 'x'),
      AUDIT_SIGNING_KEY: TEST_SIGNING_KEY, ADMIN_EMAIL, ADMIN_PASSWORD, RATE_LIMIT_PER_MINUTE: '0',
      AUDIT_CHECKPOINT_INTERVAL_MS: '200', LOG_LEVEL: 'info',
    });
    await server.waitReady();
  });
  after(async () => {
    await server?.stop();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const login = async () => {
    const res = await fetch(`${server.url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD }) });
    assert.equal(res.status, 200, await res.text());
  };
  /** Every record sealed and under a checkpoint, read by the superuser. */
  const allSealed = async () => {
    const [row] = await adminQuery<{ records: number; sealed: number; signed: number }>(
      `SELECT (SELECT count(*) FROM audit_log)::int AS records,
              (SELECT coalesce(max(next_seq), 0) FROM audit_seal_batches)::int AS sealed,
              (SELECT coalesce(max(tree_size), 0) FROM audit_checkpoints)::int AS signed`,
      [], database.name,
    );
    return row!.records > 0 && row!.sealed === row!.records && row!.signed === row!.records;
  };
  const waitSealed = async (what: string) => {
    for (let i = 0; i < 150 && !(await allSealed()); i++) await sleep(100);
    assert.ok(await allSealed(), `${what}: not every record was sealed and signed within 15 s:\n${server.output()}`);
  };
  const sealerBackends = () =>
    adminQuery<{ pid: number; query: string }>('SELECT pid, query FROM pg_stat_activity WHERE datname = $1 AND application_name = $2', [database.name, SEALER]);

  test('records are sealed and signed, by a thread with connections of its own (teamlog-audit-sealer)', async () => {
    await login();
    await waitSealed('after a login');
    const backends = await sealerBackends();
    assert.ok(backends.length >= 1, 'no connection of the sealer\'s thread');
    assert.ok(backends.every((b) => b.query !== ''), 'a connection of the thread that never ran a statement');
  });

  test('a lost connection of the thread is logged by the server (its level, its message, the error) and sealing goes on', async () => {
    const [victim] = await sealerBackends();
    assert.ok(victim, 'no connection of the sealer\'s thread to end');
    await adminQuery('SELECT pg_terminate_backend($1)', [victim.pid]);
    // Idle, the pool reports the loss; in a round, the round fails and is retried.
    const lost = /audit (sealer: a database connection failed|sealer: round failed|checkpointer: round failed)/;
    for (let i = 0; i < 100 && !lost.test(server.output()); i++) await sleep(100);
    const line = server.output().split('\n').find((l) => lost.test(l));
    assert.ok(line, `nothing logged of the lost connection:\n${server.output()}`);
    const entry = JSON.parse(line) as { level: number; msg: string; err?: { message?: string } };
    assert.equal(entry.level, 40, 'a warning, written by the main logger as pino JSON');
    // PostgreSQL's FATAL "terminating connection" usually arrives first; when the
    // socket's reset wins the race the error is ECONNRESET. Either names the cause.
    assert.match(entry.err?.message ?? '', /terminat|ECONNRESET/i, line);
    await login();
    await waitSealed('after the connection was lost');
  });

  test('a stop ends the thread with the server: exit code 0, no thread left to end by force', async () => {
    assert.equal(await server.stop(), 0, server.output());
    assert.doesNotMatch(server.output(), /its thread (did not stop in time|ended unasked|failed)/);
    assert.equal((await sealerBackends()).length, 0, 'a connection of the sealer outlived the server');
  });
});
