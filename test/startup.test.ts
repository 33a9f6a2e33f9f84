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
import { DatabaseUnavailableError, waitForPostgres } from '../src/db/wait.js';
import { APP_ROLE, createPostgresDatabase } from '../src/db/postgres.js';
import { ensureFirstAdmin } from '../src/first-admin.js';
import { createLogger } from '../src/logger.js';
import { DataDirLockedError, LOCK_FILE, lockDataDir } from '../src/ops/data-dir-lock.js';
import { createDeps } from '../src/runtime.js';
import { loadSecrets, secretsDir } from '../src/secrets.js';
import net from 'node:net';
import { entryArgs, ROOT } from './helpers/paths.js';
import { freePort, spawnServer, type ServerProcess } from './helpers/process.js';
import { adminQuery } from './helpers/postgres.js';
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
  /** Where its generated files go: DATA_DIR, or in server mode the directory named for its database (secrets.ts). */
  let secrets: string;

  before(async () => {
    // On the PostgreSQL pass the server runs in server mode; DATA_DIR then holds only its files.
    if (onPostgres) database = await createTestDatabase();
    env = { DATA_DIR: dataDir, ...(database ? { DATABASE_URL: database.databaseUrl! } : {}) };
    secrets = secretsDir(loadConfig(env));
    first = await spawnServer(env);
    await first.waitReady();
    await first.waitForOutput('/docs');
    password = readFileSync(path.join(secrets, 'initial-admin-password'), 'utf8').trim();
  });

  after(async () => {
    await first?.stop();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('creates admin@localhost, whose password is in DATA_DIR/initial-admin-password (mode 0600) and logs in', async () => {
    assert.equal(statSync(path.join(secrets, 'initial-admin-password')).mode & 0o777, 0o600);
    if (database) assert.ok(!existsSync(path.join(dataDir, 'initial-admin-password')), 'server mode wrote the embedded database\'s password file');
    assert.ok(password.length >= 10);
    const res = await postJson(`${first.url}/api/v1/auth/login`, { email: 'admin@localhost', password });
    assert.equal(res.status, 200);
    assert.equal(res.body.user.role, 'ADMIN');
  });

  test('generates DATA_DIR/jwt-secret with mode 0600', () => {
    const file = path.join(secrets, 'jwt-secret');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.ok(readFileSync(file, 'utf8').trim().length >= 32);
  });

  test('logs the /docs and /console addresses and where the password is, never the password itself', () => {
    const output = first.output();
    assert.ok(output.includes(`${first.url}/docs`), `no /docs address in:\n${output}`);
    assert.ok(output.includes(`${first.url}/console`), `no /console address in:\n${output}`);
    assert.ok(output.includes(path.join(secrets, 'initial-admin-password')), 'the log does not say where the password is');
    assert.ok(!output.includes(password), 'the password was written to the output');
  });

  test('holds its embedded database: a CLI command on the same DATA_DIR is refused while it runs', { skip: onPostgres && 'PostgreSQL takes its own locks' }, async () => {
    assert.equal(readFileSync(path.join(dataDir, LOCK_FILE), 'utf8').trim(), String(first.child.pid));
    const cli = spawn(process.execPath, [...entryArgs('src/cli'), 'migrate'], {
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
      assert.equal(readFileSync(path.join(secrets, 'initial-admin-password'), 'utf8').trim(), password);
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

describe('a DATABASE_URL start on the DATA_DIR of an embedded database (trying PostgreSQL in a checkout that runs on the embedded one)', { skip: needsPostgres }, () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-both-'));
  const files = ['initial-admin-password', 'jwt-secret', 'audit-signing-key.pem'];
  let database: TestDatabase | undefined;
  let before: Record<string, string> = {};

  after(async () => {
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('leaves the embedded database\'s keys and its ADMIN\'s password file alone, keeps its own in a directory named for its database, and names the files it does not use', async () => {
    database = await createTestDatabase();
    const embedded = await spawnServer({ DATA_DIR: dataDir });
    await embedded.waitReady();
    await embedded.waitForOutput('/docs');
    assert.equal(await embedded.stop(), 0);
    before = Object.fromEntries(files.map((f) => [f, readFileSync(path.join(dataDir, f), 'utf8')]));

    // As docs/operations.md shows it, in the same checkout: DATABASE_URL, and nothing else changed.
    const env = { DATA_DIR: dataDir, DATABASE_URL: database.databaseUrl! };
    const server = await spawnServer(env);
    await server.waitReady();
    await server.waitForOutput('/docs');
    assert.equal(await server.stop(), 0);
    for (const f of files) assert.equal(readFileSync(path.join(dataDir, f), 'utf8'), before[f], `server mode rewrote ${f}`);
    const own = secretsDir(loadConfig(env));
    assert.match(own, /\/postgres\/[^/]+-\d+-teamlog_test_\w+$/);
    for (const f of files) assert.ok(existsSync(path.join(own, f)), `${f} is not in ${own}`);
    assert.ok(server.output().includes(`First ADMIN created: admin@localhost; the password is in ${path.join(own, 'initial-admin-password')}`), server.output());
    assert.match(server.output(), /jwt-secret and \S+audit-signing-key\.pem belong to the embedded database; this DATABASE_URL deployment keeps its own in /);
  });

  test('back on the embedded database, its log points at its own password file, whose password still logs in', async () => {
    assert.ok(before['initial-admin-password'], 'the first test made the embedded database');
    const again = await spawnServer({ DATA_DIR: dataDir });
    try {
      await again.waitReady();
      await again.waitForOutput('/docs');
      assert.ok(again.output().includes(`generated password is in ${path.join(dataDir, 'initial-admin-password')}`), again.output());
      const login = await postJson(`${again.url}/api/v1/auth/login`, { email: 'admin@localhost', password: before['initial-admin-password']!.trim() });
      assert.equal(login.status, 200);
    } finally {
      assert.equal(await again.stop(), 0);
    }
  });
});

test('a DATABASE_URL login that is not a member of teamlog_app is refused at start, naming the grant and the docs section', { skip: needsPostgres }, async () => {
  const database = await createTestDatabase();
  const login = `teamlog_not_member_${process.pid}`; // generated here, never input
  const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-not-member-'));
  await adminQuery(`DROP ROLE IF EXISTS ${login}`);
  await adminQuery(`CREATE ROLE ${login} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`);
  try {
    const url = Object.assign(new URL(database.databaseUrl!), { username: login }).href;
    const proc = await spawnServer({ DATA_DIR: dataDir, DATABASE_URL: url, JWT_SECRET: 'not-member-secret-'.padEnd(48, 'n') });
    assert.equal(await proc.exited, 1, proc.output());
    assert.match(
      proc.output(),
      new RegExp(`^Teamlog cannot start: the login of DATABASE_URL \\("${login}"\\) was refused: permission denied for table schema_migrations\\. ` +
        `The service's login must be a member of teamlog_app: as the database's owner, run GRANT teamlog_app TO "${login}"; then start again ` +
        '\\(docs/operations\\.md, "Running on PostgreSQL"\\)', 'm'),
    );
    // The section it names is there.
    assert.match(readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8'), /^## Running on PostgreSQL$/m);
  } finally {
    await database.drop();
    await adminQuery(`DROP ROLE IF EXISTS ${login}`);
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

describe('configuration that helps', { concurrency: true }, () => {
  test('several invalid variables are reported at once, in one message naming each, with exit code 2', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-badconfig-'));
    try {
      const proc = await spawnServer({
        DATA_DIR: dataDir, LOG_LEVEL: 'loud', TRUST_PROXY: 'not-a-cidr', CORS_ORIGINS: 'app.example.com', DATABASE_POOL_SIZE: '0', JWT_SECRET: 'short',
      });
      assert.equal(await proc.exited, 2);
      const output = proc.output();
      assert.match(output, /Configuration error: 5 settings are invalid:/);
      for (const name of ['LOG_LEVEL', 'TRUST_PROXY', 'CORS_ORIGINS', 'DATABASE_POOL_SIZE', 'JWT_SECRET']) {
        assert.match(output, new RegExp(`^  - ${name}\\b`, 'm'), `${name} is not listed in:\n${output}`);
      }
      assert.ok(!existsSync(path.join(dataDir, 'pglite')), 'it went on to open the database');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('loadConfig collects every problem in ConfigError.problems, DATABASE_URL once', () => {
    assert.throws(
      () => loadConfig({ PORT: '70000', DATABASE_URL: 'mysql://db/teamlog', REDIS_URL: 'http://redis', ADMIN_EMAIL: 'nobody' }),
      (err: Error) => {
        assert.ok(err instanceof ConfigError);
        assert.deepEqual(err.problems.map((p) => p.split(' ')[0]), ['PORT', 'DATABASE_URL', 'REDIS_URL', 'ADMIN_EMAIL']);
        return true;
      },
    );
  });

  test('the audit personal-data secrets: each at least 32 characters, previous ones comma-separated', () => {
    const long = 'p'.repeat(32);
    const config = loadConfig({ AUDIT_PERSONAL_DATA_SECRET: long, AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS: ` ${'a'.repeat(40)} ,${'b'.repeat(32)},` });
    assert.equal(config.auditPersonalDataSecret, long);
    assert.deepEqual(config.auditPersonalDataPreviousSecrets, ['a'.repeat(40), 'b'.repeat(32)]);
    assert.deepEqual(loadConfig({}).auditPersonalDataPreviousSecrets, []);
    assert.throws(
      () => loadConfig({ AUDIT_PERSONAL_DATA_SECRET: 'short', AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS: `${long},short` }),
      (err: Error) => {
        assert.ok(err instanceof ConfigError);
        assert.deepEqual(err.problems.map((p) => p.split(' ')[0]), ['AUDIT_PERSONAL_DATA_SECRET', 'AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS']);
        assert.ok(!err.message.includes(long), 'a secret is never echoed');
        return true;
      },
    );
  });

  test('an unreachable DATABASE_URL is retried, then the start stops naming DATABASE_URL and never the password', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-nodb-'));
    const closedPort = await freePort(); // nothing listens there
    const password = 'hunter2-very-secret';
    try {
      const proc = await spawnServer({
        DATA_DIR: dataDir,
        DATABASE_URL: `postgres://teamlog:${password}@127.0.0.1:${closedPort}/teamlog`,
        DATABASE_STARTUP_TIMEOUT_MS: '3000',
      });
      assert.equal(await proc.exited, 1);
      const gaveUp = Date.now();
      const output = proc.output();
      // From the first attempt's warning (its log time) to the exit: the 3 s window, all of it
      // (the first attempt itself came before the warning), and no more.
      const firstRetry = output.split('\n').find((line) => line.includes('does not answer yet'));
      assert.ok(firstRetry, `no retry was logged:\n${output}`);
      const waited = gaveUp - (JSON.parse(firstRetry) as { time: number }).time;
      assert.ok(waited >= 3000 - 250, `it gave up ${waited} ms after the first attempt, before its 3 s were up`);
      assert.ok(waited < 3000 + 3000, `it gave up ${waited} ms after the first attempt`);
      assert.match(output, new RegExp(`PostgreSQL at DATABASE_URL \\(postgres://teamlog@127\\.0\\.0\\.1:${closedPort}/teamlog\\) does not answer yet`));
      // The time DATABASE_STARTUP_TIMEOUT_MS gave it (it once said "within 2 s" for 3000, giving up early).
      assert.match(output, new RegExp(`Teamlog cannot start: PostgreSQL at DATABASE_URL \\(postgres://teamlog@127\\.0\\.0\\.1:${closedPort}/teamlog\\) did not answer within 3 s \\(\\d+ attempts\\): connect ECONNREFUSED 127\\.0\\.0\\.1:${closedPort}\\. Check that it runs and that DATABASE_URL points at it\\.$`, 'm'));
      assert.ok(!output.includes(password), `the password was written:\n${output}`);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('a port already in use is reported before any database work, with exit code 1', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-busyport-'));
    const busy = net.createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const port = (busy.address() as net.AddressInfo).port;
    try {
      // Embedded: the database under DATA_DIR is never opened (nor locked).
      const embedded = await spawnServer({ DATA_DIR: dataDir, PORT: String(port) });
      assert.equal(await embedded.exited, 1);
      assert.match(embedded.output(), new RegExp(`Teamlog cannot start: PORT ${port} is already in use on 127\\.0\\.0\\.1`));
      assert.ok(!existsSync(path.join(dataDir, 'pglite')), 'the embedded database was opened');
      assert.ok(!existsSync(path.join(dataDir, LOCK_FILE)), 'DATA_DIR was locked');
      // PostgreSQL: said at once, not after waiting 30 s for a database that does not answer.
      const server = await spawnServer({ DATA_DIR: dataDir, PORT: String(port), DATABASE_URL: `postgres://teamlog@127.0.0.1:${await freePort()}/teamlog` });
      assert.equal(await server.exited, 1);
      assert.match(server.output(), /is already in use/);
      assert.ok(!server.output().includes('does not answer'), 'it tried the database first');
    } finally {
      busy.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('a .env in the working directory is loaded, and never overrides a variable already set', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'teamlog-dotenv-'));
    let database: TestDatabase | undefined;
    try {
      if (onPostgres) database = await createTestDatabase();
      const dataDir = path.join(dir, 'data');
      writeFileSync(
        path.join(dir, '.env'),
        [
          '# a comment',
          'ADMIN_EMAIL=dotenv-admin@example.com',
          "ADMIN_PASSWORD='from the .env file'",
          `DATA_DIR=${dataDir}`,
          ...(database ? [`DATABASE_URL=${database.databaseUrl!}`] : []),
          'PORT=1', // set in the environment too: the environment's wins, or the start would fail
          'LOG_LEVEL=silent', // likewise
          '',
        ].join('\n'),
      );
      const proc = await spawnServer({ LOG_LEVEL: 'info' }, { cwd: dir });
      try {
        await proc.waitReady();
        await proc.waitForOutput('/docs');
        assert.match(proc.output(), new RegExp(`Environment read from ${path.join(dir, '.env').replaceAll('.', '\\.')}`));
        assert.match(proc.output(), /First ADMIN created: dotenv-admin@example\.com with the password from ADMIN_PASSWORD/);
        assert.ok(existsSync(path.join(secretsDir(loadConfig({ DATA_DIR: dataDir, DATABASE_URL: database?.databaseUrl })), 'jwt-secret')), 'DATA_DIR from .env was not used');
        const login = await postJson(`${proc.url}/api/v1/auth/login`, { email: 'dotenv-admin@example.com', password: 'from the .env file' });
        assert.equal(login.status, 200);
      } finally {
        assert.equal(await proc.stop(), 0);
      }
    } finally {
      await database?.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('.env.example lists every variable config.ts reads, and loads as a valid configuration', () => {
    const source = readFileSync(path.join(ROOT, 'src/config.ts'), 'utf8');
    const read = new Set([...source.matchAll(/\benv(?:, '|\.)([A-Z][A-Z0-9_]+)/g)].map((m) => m[1]!));
    const example = readFileSync(path.join(ROOT, '.env.example'), 'utf8');
    const listed = [...example.matchAll(/^([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]!);
    assert.deepEqual([...read].filter((name) => !listed.includes(name)), [], 'variables missing from .env.example');
    assert.deepEqual(listed.filter((name) => !read.has(name)), [], 'variables in .env.example that config.ts does not read');
    for (const name of listed) assert.match(example, new RegExp(`^# .+\\n(?:#.*\\n)*(?:[A-Z_]+=.*\\n)*${name}=`, 'm'), `${name} has no comment`);
    const env = Object.fromEntries(listed.map((name) => [name, example.match(new RegExp(`^${name}=(.*)$`, 'm'))![1]!]));
    assert.doesNotThrow(() => loadConfig(env));
  });
});

test('waitForPostgres retries a server that does not answer yet, and fails at once on a refusal', async () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  let attempts = 0;
  const retries: string[] = [];
  await waitForPostgres('postgres://u:secret@db:5432/teamlog', {
    name: 'DATABASE_URL',
    timeoutMs: 10_000,
    onRetry: (m) => retries.push(m),
    probe: async () => {
      if (++attempts < 3) throw refused;
    },
  });
  assert.equal(attempts, 3);
  assert.equal(retries.length, 2);
  assert.match(retries[0]!, /^PostgreSQL at DATABASE_URL \(postgres:\/\/u@db:5432\/teamlog\) does not answer yet \(connect ECONNREFUSED 127\.0\.0\.1:5432\); trying again in 250 ms$/);
  assert.ok(!retries.join('').includes('secret'));

  const badPassword = Object.assign(new Error('password authentication failed for user "u"'), { code: '28P01' });
  let tries = 0;
  await assert.rejects(
    waitForPostgres('postgres://u:secret@db:5432/teamlog', { name: 'MIGRATION_DATABASE_URL', timeoutMs: 10_000, probe: async () => {
      tries++;
      throw badPassword;
    } }),
    (err: Error) => err instanceof DatabaseUnavailableError && /^MIGRATION_DATABASE_URL \(postgres:\/\/u@db:5432\/teamlog\) refused the connection: 28P01/.test(err.message),
  );
  assert.equal(tries, 1);
});

test('waitForPostgres tries until its whole timeout has passed, the last attempt at the deadline, and says that timeout', async () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  for (const [timeoutMs, said] of [[3000, '3 s'], [1500, '1.5 s']] as const) {
    const attempts: number[] = [];
    const retries: string[] = [];
    const started = Date.now();
    await assert.rejects(
      waitForPostgres('postgres://u@db:5432/teamlog', {
        name: 'DATABASE_URL',
        timeoutMs,
        onRetry: (m) => retries.push(m),
        probe: async () => {
          attempts.push(Date.now() - started);
          throw refused;
        },
      }),
      (err: Error) => {
        assert.ok(err instanceof DatabaseUnavailableError);
        assert.match(err.message, new RegExp(`did not answer within ${said.replace('.', '\\.')} \\(${attempts.length} attempts\\): connect ECONNREFUSED`));
        return true;
      },
    );
    // 250 ms, 500 ms, 1 s, … and the last wait cut to end at the deadline: the last attempt is made then, not a wait early.
    assert.ok(attempts.at(-1)! >= timeoutMs - 5, `the last attempt came ${attempts.at(-1)} ms in, before the ${timeoutMs} ms were up`);
    assert.ok(Date.now() - started < timeoutMs + 1000, `it went on for ${Date.now() - started} ms`);
    assert.match(retries[0]!, /trying again in 250 ms$/);
    assert.match(retries[1]!, /trying again in 500 ms$/);
  }
});
