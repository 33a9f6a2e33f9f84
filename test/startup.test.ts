// The real server process: first start, restart, configuration errors, graceful shutdown,
// and the first ADMIN created once when instances start together.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.js';
import { APP_ROLE, createPostgresDatabase } from '../src/db/postgres.js';
import { ensureFirstAdmin } from '../src/first-admin.js';
import { createLogger } from '../src/logger.js';
import { DataDirLockedError, LOCK_FILE, lockDataDir } from '../src/ops/data-dir-lock.js';
import { createDeps } from '../src/runtime.js';
import { loadSecrets } from '../src/secrets.js';
import { ROOT, spawnServer, type ServerProcess } from './helpers/process.js';
import { createTestDatabase, needsPostgres, onPostgres, type TestDatabase } from './helpers/server.js';


async function postJson(url: string, body: unknown, token?: string) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

async function getJson(url: string, token: string) {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

/** One request sent in two halves: `sent` resolves once the server has the headers, `finish()` sends the body. */
function halfSentLogin(url: string, body: string) {
  const agent = new http.Agent({ keepAlive: true });
  const { hostname, port } = new URL(url);
  const req = http.request({
    host: hostname,
    port,
    method: 'POST',
    path: '/api/v1/auth/login',
    agent,
    // With Expect: 100-continue the server confirms it has the headers (the request is routed) before the body is sent.
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), expect: '100-continue' },
  });
  const sent = new Promise<void>((resolve) => req.on('continue', () => resolve()));
  const response = new Promise<{ status: number; body: Record<string, any> }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, any> }));
    });
    req.on('error', reject);
  });
  req.flushHeaders();
  return { sent, finish: () => req.end(body), response, close: () => agent.destroy() };
}

describe('a first start on an empty DATA_DIR without ADMIN_PASSWORD', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-startup-'));
  let database: TestDatabase | undefined;
  let env: Record<string, string>;
  let first: ServerProcess;
  let password: string;

  before(async () => {
    // On the PostgreSQL pass the server runs in server mode; DATA_DIR then holds only its files.
    if (onPostgres) database = await createTestDatabase();
    env = { DATA_DIR: dataDir, ...(database ? { DATABASE_URL: database.databaseUrl! } : {}) };
    first = await spawnServer(env);
    await first.waitReady();
    await first.waitForOutput('/docs');
    password = readFileSync(path.join(dataDir, 'initial-admin-password'), 'utf8').trim();
  });

  after(async () => {
    await first?.stop();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('creates admin@localhost, whose password is in DATA_DIR/initial-admin-password (mode 0600) and logs in', async () => {
    assert.equal(statSync(path.join(dataDir, 'initial-admin-password')).mode & 0o777, 0o600);
    assert.ok(password.length >= 10);
    const res = await postJson(`${first.url}/api/v1/auth/login`, { email: 'admin@localhost', password });
    assert.equal(res.status, 200);
    assert.equal(res.body.user.role, 'ADMIN');
  });

  test('generates DATA_DIR/jwt-secret with mode 0600', () => {
    const file = path.join(dataDir, 'jwt-secret');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.ok(readFileSync(file, 'utf8').trim().length >= 32);
  });

  test('logs the /docs address and where the password is, never the password itself', () => {
    const output = first.output();
    assert.ok(output.includes(`${first.url}/docs`), `no /docs address in:\n${output}`);
    assert.ok(output.includes(path.join(dataDir, 'initial-admin-password')), 'the log does not say where the password is');
    assert.ok(!output.includes(password), 'the password was written to the output');
  });

  test('holds its embedded database: a CLI command on the same DATA_DIR is refused while it runs', { skip: onPostgres && 'PostgreSQL takes its own locks' }, async () => {
    assert.equal(readFileSync(path.join(dataDir, LOCK_FILE), 'utf8').trim(), String(first.child.pid));
    const cli = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'migrate'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATA_DIR: dataDir },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    cli.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise((resolve) => cli.on('close', resolve));
    assert.equal(code, 1);
    assert.match(stderr, new RegExp(`in use by another Teamlog process \\(pid ${first.child.pid}\\)`));
    assert.equal((await fetch(`${first.url}/health/ready`)).status, 200);
  });

  test('on SIGTERM finishes the request in flight, then exits 0', async () => {
    const login = halfSentLogin(first.url, JSON.stringify({ email: 'admin@localhost', password }));
    try {
      await login.sent;
      first.child.kill('SIGTERM');
      await first.waitForOutput('SIGTERM');
      login.finish();
      const res = await login.response;
      assert.equal(res.status, 200);
      assert.equal(typeof res.body.access_token, 'string');
      // The server's own deadline exits 1 after 10 s, so 0 also means "in time".
      assert.equal(await first.exited, 0);
      assert.ok(!existsSync(path.join(dataDir, LOCK_FILE)), 'the lock outlived the process');
    } finally {
      login.close();
    }
  });

  test('a second start on the same DATA_DIR creates no second ADMIN', async () => {
    await first.stop();
    const second = await spawnServer(env);
    try {
      await second.waitReady();
      await second.waitForOutput('/docs');
      assert.equal(readFileSync(path.join(dataDir, 'initial-admin-password'), 'utf8').trim(), password);
      assert.ok(!second.output().includes('First ADMIN created'));
      assert.ok(!second.output().includes(password), 'the password was written to the output');
      const login = await postJson(`${second.url}/api/v1/auth/login`, { email: 'admin@localhost', password });
      assert.equal(login.status, 200);
      const token = login.body.access_token as string;
      const admins = await getJson(`${second.url}/api/v1/users?role=ADMIN`, token);
      assert.equal(admins.status, 200);
      assert.deepEqual(admins.body.data.map((u: { email: string }) => u.email), ['admin@localhost']);
      const created = await getJson(`${second.url}/api/v1/audit-logs?action=CREATE_USER`, token);
      assert.equal(created.status, 200);
      assert.equal(created.body.data.length, 1);
      assert.equal(created.body.data[0].actor_id, null);
      assert.equal(created.body.data[0].ip, null);
    } finally {
      assert.equal(await second.stop(), 0);
    }
  });
});

describe('an invalid configuration', { concurrency: true }, () => {
  for (const [name, value] of [['PORT', 'abc'], ['TRUST_PROXY', 'not-a-cidr']] as const) {
    test(`${name}=${value} stops the start with a non-zero exit and a message naming ${name}`, async () => {
      const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-badconfig-'));
      try {
        const proc = await spawnServer({ DATA_DIR: dataDir, [name]: value });
        const code = await proc.exited;
        assert.notEqual(code, 0);
        assert.notEqual(code, null);
        assert.match(proc.output(), new RegExp(`\\b${name}\\b`));
        assert.ok(!existsSync(path.join(dataDir, 'initial-admin-password')), 'it went on to create an ADMIN');
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  }
});

test('two instances starting together on one PostgreSQL database create exactly one ADMIN and one CREATE_USER record', { skip: needsPostgres }, async () => {
  const database = await createTestDatabase();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-race-'));
  const log = createLogger('silent');
  // Each "instance" has its own connection pool; neither sees the other's transaction until it commits.
  const pools = [0, 1].map(() => createPostgresDatabase({ url: database.databaseUrl!, poolSize: 2, role: APP_ROLE, onError: () => {} }));
  try {
    const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', JWT_SECRET: 'startup-test-secret-'.padEnd(48, 'x') });
    const outcomes = await Promise.all(pools.map((db) => ensureFirstAdmin(createDeps(config, db, log))));
    assert.deepEqual(outcomes.map((o) => o.created).sort(), [false, true]);
    const admins = await database.owner.query<{ email: string }>(`SELECT email FROM users WHERE role = 'ADMIN'`);
    assert.deepEqual(admins.map((a) => a.email), ['admin@localhost']);
    const records = await database.owner.query<{ actor_id: number | null; ip: string | null }>(`SELECT actor_id, ip FROM audit_log WHERE action = 'CREATE_USER'`);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.actor_id, null);
    assert.equal(records[0]!.ip, null);
  } finally {
    await Promise.all(pools.map((db) => db.close()));
    await database.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('the embedded-database lock is refused while its holder runs and taken over once the holder is gone', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-lock-'));
  const holder = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  try {
    writeFileSync(path.join(dataDir, LOCK_FILE), `${holder.pid}\n`);
    assert.throws(() => lockDataDir(dataDir), (err: Error) => err instanceof DataDirLockedError && err.message.includes(`pid ${holder.pid}`));
    holder.kill('SIGKILL');
    await new Promise((resolve) => holder.on('exit', resolve));
    const release = lockDataDir(dataDir);
    assert.equal(readFileSync(path.join(dataDir, LOCK_FILE), 'utf8').trim(), String(process.pid));
    release();
    assert.ok(!existsSync(path.join(dataDir, LOCK_FILE)));
  } finally {
    holder.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('refuses a DATA_DIR/jwt-secret shorter than 32 characters, naming the file', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-secret-'));
  try {
    writeFileSync(path.join(dataDir, 'jwt-secret'), 'too-short\n', { mode: 0o600 });
    assert.throws(
      () => loadSecrets(loadConfig({ DATA_DIR: dataDir }), () => {}),
      (err: Error) => err instanceof ConfigError && err.message.includes(path.join(dataDir, 'jwt-secret')),
    );
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
