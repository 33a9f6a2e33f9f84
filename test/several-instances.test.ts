// README "Several instances", as written: deploy/several-instances.sh makes the database, the
// migrations and the restricted login as the owner, then starts two instances that log in as
// that login alone (no right to change the schema), on one PostgreSQL and one Redis. Both must
// serve, share sessions and the first ADMIN, and keep one verifiable audit log. Around it, what
// an operator gets wrong: pending migrations and no owner URL, and a signing key that differs
// from the one the log trusts. Each start refuses with a message naming the setting to fix.
// Last, the recipe is run a second time on what the first made, as an operator re-runs it.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { generateEd25519PrivateKeyPem } from '../src/tlog/signed-note.js';
import { entryFile, NODE_ARGS, ROOT } from './helpers/paths.js';
import { spawnServer } from './helpers/process.js';
import { adminQuery } from './helpers/postgres.js';
import { needsRedis, PG_BASE_URL, TEST_REDIS_URL } from './helpers/server.js';
import { sleep } from './helpers/sockets.js';

const SCRIPT = path.join(ROOT, 'deploy/several-instances.sh');
const LOGIN = 'teamlog_recipe_test';

const urlOf = (database: string, user = 'postgres', password = '') => {
  const u = new URL(PG_BASE_URL);
  u.pathname = `/${database}`;
  u.username = user;
  u.password = password;
  return u.href;
};

/** Two consecutive free ports (the script gives instance i the port FIRST_PORT + i). */
async function twoFreePorts(): Promise<number> {
  const taken = (port: number) =>
    new Promise<boolean>((resolve) => {
      const probe = net.createServer();
      probe.once('error', () => resolve(true));
      probe.listen({ port, host: '127.0.0.1', exclusive: true }, () => probe.close(() => resolve(false)));
    });
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 30_000);
    if (!(await taken(port)) && !(await taken(port + 1))) return port;
  }
}

async function waitReady(url: string, script: { output(): string; exited: boolean }): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (script.exited) throw new Error(`the recipe exited before ${url} was ready:\n${script.output()}`);
    try {
      if ((await fetch(`${url}/health/ready`)).status === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  throw new Error(`${url} did not become ready:\n${script.output()}`);
}

async function api<T = Record<string, unknown>>(url: string, method: string, route: string, body?: unknown, token?: string): Promise<{ status: number; body: T }> {
  const res = await fetch(`${url}/api/v1${route}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

function readEnvFile(file: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(file, 'utf8').trim().split('\n').map((line) => {
      const i = line.indexOf('=');
      return [line.slice(0, i), JSON.parse(line.slice(i + 1)) as string];
    }),
  );
}

/** One run of the recipe, as the README shows it, with its instances on `port` and `port + 1`. */
interface RecipeRun {
  script: ChildProcess;
  urls: string[];
  output(): string;
  readonly exited: boolean;
}

function runRecipe(database: string, stateDir: string, port: number): RecipeRun {
  const script = spawn('bash', [SCRIPT], {
    cwd: stateDir,
    env: {
      PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '',
      OWNER_URL: urlOf(database), REDIS_URL: TEST_REDIS_URL, REDIS_KEY_PREFIX: `${database}:`, FIRST_PORT: String(port),
      STATE_DIR: path.join(stateDir, 'state'), TEAMLOG_LOGIN: LOGIN, ADMIN_EMAIL: 'ops@recipe.test',
      NODE_ARGS: NODE_ARGS.join(' '), SERVER_JS: entryFile('src/server'), CLI_JS: entryFile('src/cli'),
      TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json'), AUDIT_CHECKPOINT_INTERVAL_MS: '200', LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let exited = false;
  script.stdout!.on('data', (d) => (output += d));
  script.stderr!.on('data', (d) => (output += d));
  script.on('exit', () => (exited = true));
  return { script, urls: [port, port + 1].map((p) => `http://127.0.0.1:${p}`), output: () => output, get exited() { return exited; } };
}

/** Stops a run (SIGTERM, as Ctrl-C would) and waits for it. */
async function stopRecipe(run: RecipeRun): Promise<void> {
  if (run.exited) return;
  const done = new Promise((resolve) => run.script.once('exit', resolve));
  run.script.kill('SIGTERM');
  await done;
}

describe('the several-instances recipe (deploy/several-instances.sh)', { skip: needsRedis }, () => {
  const database = `teamlog_recipe_${process.pid}`;
  const stateDir = mkdtempSync(path.join(tmpdir(), 'teamlog-recipe-'));
  let run: RecipeRun;
  let output = () => '';
  let urls: string[] = [];
  let shared: Record<string, string>;
  let again: RecipeRun | undefined;

  before(async () => {
    await adminQuery(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    run = runRecipe(database, stateDir, await twoFreePorts());
    ({ urls, output } = run);
    for (const url of urls) await waitReady(url, run);
    shared = readEnvFile(path.join(stateDir, 'state', 'shared.env'));
  });

  after(async () => {
    for (const r of [run, again]) if (r) await stopRecipe(r);
    await adminQuery(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {});
    rmSync(stateDir, { recursive: true, force: true });
  });

  test('both instances serve as the restricted login, with no owner URL and no right to change the schema', async () => {
    const logins = await adminQuery<{ usename: string; superuser: boolean; owner: boolean }>(
      `SELECT DISTINCT a.usename, r.rolsuper AS superuser, pg_has_role(a.usename, 'teamlog_app', 'MEMBER') AS member,
              has_schema_privilege(a.usename, 'public', 'CREATE') AS owner
         FROM pg_stat_activity a JOIN pg_roles r ON r.rolname = a.usename
        WHERE a.datname = $1 AND a.usename <> 'postgres'`,
      [database],
      database,
    );
    assert.deepEqual(logins.map((l) => [l.usename, l.superuser, l.owner]), [[LOGIN, false, false]]);
    for (let i = 0; i < 2; i++) {
      const log = readFileSync(path.join(stateDir, 'state', `instance-${i + 1}`, 'teamlog.log'), 'utf8');
      assert.match(log, /Teamlog is serving/);
      assert.doesNotMatch(log, /superuser|permission denied/i);
    }
  });

  test('one first ADMIN, one session store and one audit log across both, and the evidence verifies on each', async () => {
    const [a, b] = urls as [string, string];
    const login = await api<{ access_token: string }>(b, 'POST', '/auth/login', { email: 'ops@recipe.test', password: shared.ADMIN_PASSWORD });
    assert.equal(login.status, 200, 'the first ADMIN (created by whichever instance came first) logs in on the other one');
    const token = login.body.access_token;
    const project = await api<{ id: number }>(a, 'POST', '/projects', { name: 'Recipe' }, token);
    assert.equal(project.status, 201);
    const task = await api<{ id: number }>(b, 'POST', '/tasks', { project_id: project.body.id, title: 'made on B' }, token);
    assert.equal(task.status, 201);
    assert.equal((await api(a, 'GET', `/tasks/${task.body.id}`, undefined, token)).status, 200);
    // Both instances sign with the one shared key: a checkpoint covering everything, verified from each.
    for (let i = 0; ; i++) {
      const verdicts = await Promise.all(urls.map((u) => api<{ ok: boolean; head?: { tree_size: number } | null }>(u, 'GET', '/audit-logs/verify', undefined, token)));
      const records = await adminQuery<{ n: number }>('SELECT count(*)::int AS n FROM audit_log', [], database);
      if (verdicts.every((v) => v.status === 200 && v.body.ok && (v.body.head?.tree_size ?? 0) >= records[0]!.n)) break;
      assert.ok(i < 100, `the evidence did not verify on both instances: ${JSON.stringify(verdicts.map((v) => v.body))}`);
      await sleep(200);
    }
  });

  test('an instance whose signing key is not the one the log trusts refuses to start, naming AUDIT_SIGNING_KEY', async () => {
    // Without a key (one is generated into its DATA_DIR), and with a key of its own: side by side.
    const dataDirs = [0, 1].map(() => mkdtempSync(path.join(tmpdir(), 'teamlog-recipe-other-')));
    try {
      await Promise.all(
        ([{}, { AUDIT_SIGNING_KEY: generateEd25519PrivateKeyPem() }] as Array<Record<string, string>>).map(async (key, i) => {
          const other = await spawnServer({
            DATABASE_URL: urlOf(database, LOGIN, shared.TEAMLOG_DB_PASSWORD), REDIS_URL: TEST_REDIS_URL, REDIS_KEY_PREFIX: `${database}:`,
            JWT_SECRET: shared.JWT_SECRET!, DATA_DIR: dataDirs[i]!, ...key,
          });
          const code = await other.exited;
          assert.notEqual(code, 0, other.output());
          assert.match(other.output(), /AUDIT_SIGNING_KEY: this instance would sign the audit log's checkpoints with key "[^"]+", but the log's newest checkpoint/);
          assert.match(other.output(), /AUDIT_PREVIOUS_VERIFIER_KEYS=/);
        }),
      );
    } finally {
      for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
    }
    const keys = await adminQuery<{ n: number }>('SELECT count(*)::int AS n FROM audit_signing_keys', [], database);
    assert.equal(keys[0]!.n, 1, 'the refused keys were not registered');
    // The two instances were not disturbed.
    for (const url of urls) assert.equal((await fetch(`${url}/health/ready`)).status, 200);
  });

  test('a start with pending migrations and no owner URL stops with a message naming MIGRATION_DATABASE_URL; with it, it starts', async () => {
    const fresh = `${database}_fresh`;
    await adminQuery(`DROP DATABASE IF EXISTS ${fresh} WITH (FORCE)`);
    await adminQuery(`CREATE DATABASE ${fresh}`);
    const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-recipe-fresh-'));
    const env = {
      DATABASE_URL: urlOf(fresh, LOGIN, shared.TEAMLOG_DB_PASSWORD), JWT_SECRET: shared.JWT_SECRET!, AUDIT_SIGNING_KEY: generateEd25519PrivateKeyPem(), DATA_DIR: dataDir,
    };
    try {
      const refused = await spawnServer(env);
      assert.equal(await refused.exited, 1, refused.output());
      assert.match(refused.output(), /migrations are pending \(0001_foundation, .*R__privileges\) and the login of DATABASE_URL may not apply them/);
      assert.match(refused.output(), /MIGRATION_DATABASE_URL/);
      assert.deepEqual(await adminQuery(`SELECT to_regclass('schema_migrations') AS t`, [], fresh), [{ t: null }], 'nothing was half-applied');

      const owned = await spawnServer({ ...env, MIGRATION_DATABASE_URL: urlOf(fresh) });
      await owned.waitReady();
      assert.equal(await owned.stop(), 0);
      // Current now: the restricted login alone starts, and changes nothing on the way.
      const before = await adminQuery<{ version: string; applied_at: string }>('SELECT version, applied_at::text FROM schema_migrations ORDER BY version', [], fresh);
      const restricted = await spawnServer(env);
      await restricted.waitReady();
      assert.equal(await restricted.stop(), 0);
      assert.deepEqual(await adminQuery('SELECT version, applied_at::text FROM schema_migrations ORDER BY version', [], fresh), before);
    } finally {
      await adminQuery(`DROP DATABASE IF EXISTS ${fresh} WITH (FORCE)`).catch(() => {});
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('the recipe stops every instance on SIGTERM', async () => {
    const pids = [...output().matchAll(/\(pid (\d+),/g)].map((m) => Number(m[1]));
    assert.equal(pids.length, 2, output());
    await stopRecipe(run);
    for (const pid of pids) {
      let alive = true;
      for (let i = 0; i < 50 && alive; i++) {
        try {
          process.kill(pid, 0);
          await sleep(100);
        } catch {
          alive = false;
        }
      }
      assert.equal(alive, false, `instance pid ${pid} outlived the recipe`);
    }
  });

  test('run again on the same state, it finds the database, the login and the secrets it made, and serves the same log', async () => {
    assert.ok(run.exited, 'the first run still runs');
    again = runRecipe(database, stateDir, await twoFreePorts());
    for (const url of again.urls) await waitReady(url, again);
    assert.match(again.output(), new RegExp(`the database ${database} exists`));
    assert.doesNotMatch(again.output(), /creating the database|already exists|generating the shared secrets/, again.output());
    assert.deepEqual(readEnvFile(path.join(stateDir, 'state', 'shared.env')), shared, 'the shared secrets were made again');
    // The first run's ADMIN, project and evidence, served by the second run's instances.
    const [a, b] = again.urls as [string, string];
    const login = await api<{ access_token: string }>(a, 'POST', '/auth/login', { email: 'ops@recipe.test', password: shared.ADMIN_PASSWORD });
    assert.equal(login.status, 200, JSON.stringify(login.body));
    const projects = await api<{ data: Array<{ name: string }> }>(b, 'GET', '/projects', undefined, login.body.access_token);
    assert.deepEqual(projects.body.data.map((p) => p.name), ['Recipe']);
    const verdict = await api<{ ok: boolean }>(b, 'GET', '/audit-logs/verify', undefined, login.body.access_token);
    assert.equal(verdict.body.ok, true, JSON.stringify(verdict.body));
    await stopRecipe(again);
  });
});
