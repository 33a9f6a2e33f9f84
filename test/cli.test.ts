// The `teamlog` CLI as a child process (`node --import tsx src/cli.ts`, so no build is needed)
// against a fresh database: embedded PGlite under DATA_DIR, or a new, empty PostgreSQL
// database on the PostgreSQL pass.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { LOCK_FILE } from '../src/ops/data-dir-lock.js';
import { settled } from './helpers/audit-log.js';
import { runTeamlog, useCliDatabase, type CliResult } from './helpers/cli.js';
import { ROOT } from './helpers/paths.js';
import { freePort } from './helpers/process.js';
import { auditRows, Client, login } from './helpers/client.js';
import { onPostgres, TEST_SIGNING_KEY } from './helpers/server.js';

const VERSIONS = readdirSync(path.join(ROOT, 'migrations'))
  .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
  .map((f) => f.replace(/\.sql$/, ''))
  .sort();
/** Server mode also runs the repeatable scripts (the privileges) with the migrations, and reports them. */
const REPEATABLE = readdirSync(path.join(ROOT, 'migrations'))
  .filter((f) => /^R__[a-z0-9_]+\.sql$/.test(f))
  .map((f) => f.replace(/\.sql$/, ''))
  .sort();
const REQUEST_ID = /\bcli-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/;

/** The keys of the file's test servers (helpers/server.ts): the CLI runs as their deployment's operator would. */
const JWT_SECRET = 'test-secret-'.padEnd(48, 'x');
/** An empty database (the CLI migrates it) and a data directory, shared by the CLI and the file's test servers. */
const world = useCliDatabase({ prefix: 'teamlog-cli-', database: 'empty', env: { JWT_SECRET, AUDIT_SIGNING_KEY: TEST_SIGNING_KEY } });
const { runCli, withServer } = world;
/** Request ids printed by every successful create-admin of this file: the only CLI records there may be. */
const cliRequestIds = new Set<string>();

async function createAdmin(email: string, env: Record<string, string> = {}, name?: string): Promise<CliResult & { requestId: string }> {
  const r = await runCli(['create-admin', '--email', email, ...(name ? ['--name', name] : [])], env);
  assert.equal(r.code, 0, `create-admin failed:\n${r.stdout}${r.stderr}`);
  const requestId = REQUEST_ID.exec(r.stdout)?.[0];
  assert.ok(requestId, `no request id in:\n${r.stdout}`);
  cliRequestIds.add(requestId);
  return { ...r, requestId };
}

const unique = () => randomBytes(4).toString('hex');

// First in this file: it needs the database before anything else has migrated it.
test('migrate applies every migration to a fresh database, and a second run applies nothing', async () => {
  const applied = [...VERSIONS, ...(world.databaseUrl ? REPEATABLE : [])];
  const first = await runCli(['migrate']);
  assert.equal(first.code, 0, first.stderr);
  for (const v of applied) assert.ok(first.stdout.includes(v), `${v} not reported as applied:\n${first.stdout}`);
  assert.match(first.stdout, new RegExp(`Applied ${applied.length} migration`));

  const second = await runCli(['migrate']);
  assert.equal(second.code, 0, second.stderr);
  for (const v of applied) assert.ok(!second.stdout.includes(v), `${v} applied twice:\n${second.stdout}`);
  assert.match(second.stdout, /Nothing to apply/);
});

test('create-admin with ADMIN_PASSWORD creates an ADMIN who can log in, audited as CREATE_USER with no actor and no address, without printing the password', async () => {
  const email = `boss-${unique()}@example.com`;
  const password = `cli-password-${unique()}`;
  const r = await createAdmin(email.toUpperCase(), { ADMIN_PASSWORD: password }, 'The Boss');
  assert.ok(!r.stdout.includes(password) && !r.stderr.includes(password), 'the password was printed');
  assert.ok(r.stdout.includes(email), 'the email is not reported lower-cased');

  await withServer(async (server) => {
    const boss = await login(server, email, password);
    assert.equal(boss.role, 'ADMIN');
    const me = await boss.client.get(`/api/v1/users/${boss.id}`, { token: boss.token });
    assert.equal(me.body.name, 'The Boss');

    const rows = await auditRows(server, `action = 'CREATE_USER' AND resource_id = $1`, [boss.id]);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.actor_id, null);
    assert.equal(rows[0]!.ip, null);
    assert.equal(rows[0]!.result, 'SUCCESS');
    assert.equal(rows[0]!.resource_type, 'USER');
    assert.equal(rows[0]!.request_id, r.requestId);
    const record = await boss.client.get(`/api/v1/audit-logs/${rows[0]!.id}`, { token: boss.token });
    assert.equal(record.status, 200);
    assert.equal(record.body.metadata.email, email);
    assert.equal(record.body.metadata.role, 'ADMIN');
  });
});

test('create-admin without ADMIN_PASSWORD prints a generated password once; a second run for that email exits 1 and changes nothing', async () => {
  const email = `generated-${unique()}@example.com`;
  const r = await createAdmin(email);
  const password = /password[^:\n]*: (\S+)\s*$/m.exec(r.stdout)?.[1];
  assert.ok(password && password.length >= 10, `no generated password in:\n${r.stdout}`);
  assert.equal(r.stdout.split(password).length - 1, 1, 'the password is printed more than once');
  assert.ok(!r.stderr.includes(password));

  const otherPassword = `other-password-${unique()}`;
  const again = await runCli(['create-admin', '--email', email.toUpperCase()], { ADMIN_PASSWORD: otherPassword });
  assert.equal(again.code, 1);
  assert.match(again.stderr, /already exists/);
  assert.ok(again.stderr.includes(email));
  assert.ok(!again.stdout.includes('Created'));

  await withServer(async (server) => {
    const admin = await login(server, email, password);
    assert.equal(admin.role, 'ADMIN');
    const users = await server.owner.query<{ id: number }>('SELECT id FROM users WHERE email = $1', [email]);
    assert.deepEqual(users.map((u) => u.id), [admin.id]);
    // The refused run replaced nothing: its password does not log in.
    const refused = await new Client(server).post('/api/v1/auth/login', { email, password: otherPassword });
    assert.equal(refused.status, 401);
    // Every CLI record in the database is one that a successful run of this file reported.
    const cliRecords = await server.owner.query<{ request_id: string }>(`SELECT request_id FROM audit_log WHERE request_id LIKE 'cli-%'`);
    assert.deepEqual(cliRecords.map((row) => row.request_id).sort(), [...cliRequestIds].sort());
  });
});

test('audit verify without the deployment\'s key for personal values verifies the rest, says what it could not check, exits 3, and never calls a record FAILED', async () => {
  const email = `verifier-${unique()}@example.com`;
  const password = `verifier-password-${unique()}`;
  await createAdmin(email, { ADMIN_PASSWORD: password });
  // Sealed and signed by a server of this deployment: records naming emails (personal values) under a checkpoint.
  await withServer(async (server) => void (await settled(server, await login(server, email, password))), { env: { AUDIT_CHECKPOINT_INTERVAL_MS: '100' } });
  const notFailed = (r: CliResult) => assert.doesNotMatch(r.stdout + r.stderr, /FAILED|first bad record/, r.stdout + r.stderr);

  const right = await runCli(['audit', 'verify']);
  assert.equal(right.code, 0, right.stdout + right.stderr);
  assert.match(right.stdout, /^OK: \d+ records and [1-9]\d* checkpoints verified in .*; personal values: [1-9]\d* checked/);

  const none = await runCli(['audit', 'verify'], { JWT_SECRET: undefined });
  assert.equal(none.code, 3, none.stdout + none.stderr);
  assert.match(none.stdout, /^INCOMPLETE: \d+ records and [1-9]\d* checkpoints verified in /);
  assert.match(none.stdout, /^ {2}personal values: not checked: no key to check them with \(JWT_SECRET and AUDIT_PERSONAL_DATA_SECRET are unset/m);
  notFailed(none);

  // Another deployment's key: none of the stored values matches under it, so it cannot be this deployment's.
  const other = await runCli(['audit', 'verify'], { JWT_SECRET: 'another-deployment-secret-'.padEnd(48, 'o') });
  assert.equal(other.code, 3, other.stdout + other.stderr);
  assert.match(other.stdout, /personal values: not checked: none of the \d+ stored values looked at matches its ref under the key at hand \(JWT_SECRET\)/);
  notFailed(other);

  // No signing key held outside the database: the checkpoints are checked under the registered keys, and that much is said.
  const unanchored = await runCli(['audit', 'verify'], { AUDIT_SIGNING_KEY: undefined });
  assert.equal(unanchored.code, 3, unanchored.stdout + unanchored.stderr);
  assert.match(unanchored.stdout, /^ {2}the newest checkpoint: not checked: no key held outside the database to hold it to/m);
  assert.match(unanchored.stdout, /--public-key/);
  notFailed(unanchored);
});

test('DATABASE_URL=<deployment> audit verify never uses the embedded database\'s keys in DATA_DIR: it looks in the deployment\'s own directory', { skip: !onPostgres && 'server mode (the PostgreSQL pass)' }, async () => {
  // The embedded database's key, beside its files, as `npm start` generates it.
  writeFileSync(path.join(world.dataDir, 'jwt-secret'), `${'the-embedded-databases-secret-'.padEnd(48, 'e')}\n`, { mode: 0o600 });
  try {
    const r = await runCli(['audit', 'verify'], { JWT_SECRET: undefined });
    assert.equal(r.code, 3, r.stdout + r.stderr);
    const own = path.join(world.dataDir, 'postgres');
    assert.match(r.stdout, new RegExp(`personal values: not checked: no key to check them with .*${own.replaceAll('.', '\\.')}/[^/ ]+/jwt-secret does not exist`));
    assert.doesNotMatch(r.stdout + r.stderr, /FAILED/);
  } finally {
    rmSync(path.join(world.dataDir, 'jwt-secret'), { force: true });
  }
});

test('create-admin for a DATABASE_URL deployment without its key refuses, and changes nothing', { skip: !onPostgres && 'server mode (the PostgreSQL pass)' }, async () => {
  const email = `keyless-${unique()}@example.com`;
  const r = await runCli(['create-admin', '--email', email], { JWT_SECRET: undefined, ADMIN_PASSWORD: 'keyless-password' });
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /commits to its email under this deployment's key, and none is at hand: JWT_SECRET and AUDIT_PERSONAL_DATA_SECRET are unset.*Nothing was changed/);
  await withServer(async (server) => {
    assert.deepEqual(await server.owner.query('SELECT id FROM users WHERE email = $1', [email]), []);
  });
});

test('audit verify of a database that does not answer checks nothing, says so, and exits 3', async () => {
  const r = await runCli(['audit', 'verify'], { DATABASE_URL: `postgres://teamlog@127.0.0.1:${await freePort()}/teamlog`, MIGRATION_DATABASE_URL: undefined });
  assert.equal(r.code, 3, r.stdout + r.stderr);
  assert.match(r.stderr, /^teamlog audit verify: could not check: nothing was checked: PostgreSQL at DATABASE_URL \(postgres:\/\/teamlog@127\.0\.0\.1:\d+\/teamlog\) did not answer/);
  assert.doesNotMatch(r.stdout + r.stderr, /FAILED/);
});

test('the commands print none of the server\'s warnings about keys read or generated (JWT_SECRET, AUDIT_SIGNING_KEY)', async () => {
  const output = path.join(world.dataDir, `export-${unique()}.ndjson`);
  try {
    const r = await runCli(['audit', 'export', '--output', output], { JWT_SECRET: undefined });
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /JWT_SECRET|AUDIT_SIGNING_KEY|is not set/);
  } finally {
    rmSync(output, { force: true });
  }
});

test('audit verify with records committed after the last seal and no server to seal them: the rest verified, those not checked, exit 3', async () => {
  // create-admin writes a record, and no server runs to seal it.
  await createAdmin(`unsealed-${unique()}@example.com`, { ADMIN_PASSWORD: `unsealed-password-${unique()}` });
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const r = await runCli(['audit', 'verify'], { AUDIT_SEAL_STALL_MS: '1000' });
  assert.equal(r.code, 3, r.stdout + r.stderr);
  assert.match(r.stdout, /^INCOMPLETE: \d+ records and [1-9]\d* checkpoints verified in /);
  assert.match(r.stdout, /^ {2}record \d+ and those after it: not checked: committed but not sealed \(sealing has stopped: /m);
  assert.doesNotMatch(r.stdout + r.stderr, /FAILED/);
});

describe('the command line itself', { concurrency: true }, () => {
  test('create-admin refuses an invalid email with exit code 1', async () => {
    const r = await runCli(['create-admin', '--email', 'not-an-email'], { ADMIN_PASSWORD: 'long-enough-password' });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /not-an-email.*not an email address/);
    assert.equal(r.stdout, '');
  });

  test('create-admin without --email is a usage error (exit code 2) that shows the usage', async () => {
    const r = await runCli(['create-admin']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--email is required/);
    assert.match(r.stderr, /Usage: teamlog create-admin --email/);
  });

  test('audit verify and audit export, refused while a server holds the embedded database, say how to do it through that server instead', async () => {
    const held = mkdtempSync(path.join(tmpdir(), 'teamlog-cli-held-'));
    try {
      // The lock as a running server holds it: a live process's pid (this test's).
      writeFileSync(path.join(held, LOCK_FILE), `${process.pid}\n`);
      // Nothing could be checked: exit code 3, never a failure (docs/operations.md, "The command line").
      const verify = await runTeamlog(['audit', 'verify'], { DATA_DIR: held });
      assert.equal(verify.code, 3, verify.stderr);
      assert.match(verify.stderr, /^teamlog audit verify: could not check: /);
      assert.match(verify.stderr, new RegExp(`in use by another Teamlog process \\(pid ${process.pid}\\)`));
      assert.match(verify.stderr, /^To verify while it runs, verify an export of the running server instead/m);
      assert.match(verify.stderr, /-H "Authorization: Bearer <an ADMIN's access token>" <server>\/api\/v1\/audit-logs\/export -o export\.ndjson$/m);
      assert.match(verify.stderr, /GET \/api\/v1\/audit-logs\/public-keys/);
      assert.ok(!/--url|--token/.test(verify.stderr), `it names a flag the CLI does not have:\n${verify.stderr}`);
      // The command it shows is one the CLI takes: run as shown, it stops on the missing export (an
      // input it cannot read, exit 2, as for verify-proof), not on its options.
      const shown = /^ {2}teamlog (audit verify .+)$/m.exec(verify.stderr)?.[1];
      assert.equal(shown, 'audit verify --file export.ndjson --public-key key.pem');
      const asShown = await runTeamlog(shown.split(' '), { DATA_DIR: held });
      assert.equal(asShown.code, 2, asShown.stderr);
      assert.match(asShown.stderr, /cannot read the export export\.ndjson: ENOENT/);
      assert.doesNotMatch(asShown.stderr, /FAILED|unknown option/);

      const exported = await runTeamlog(['audit', 'export'], { DATA_DIR: held });
      assert.equal(exported.code, 1, exported.stderr);
      assert.match(exported.stderr, /in use by another Teamlog process/);
      assert.match(exported.stderr, /^To export while it runs, take the same export from the running server/m);
      assert.match(exported.stderr, /<server>\/api\/v1\/audit-logs\/export -o export\.ndjson$/m);
      assert.equal(exported.stdout, '');
      // Neither took the lock from its holder.
      assert.equal(readFileSync(path.join(held, LOCK_FILE), 'utf8').trim(), String(process.pid));
    } finally {
      rmSync(held, { recursive: true, force: true });
    }
  });

  test('--help lists the commands and exits 0', async () => {
    const r = await runCli(['--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^Usage: teamlog <command>/);
    assert.match(r.stdout, /^ {2}teamlog migrate\b/m);
    assert.match(r.stdout, /^ {2}teamlog create-admin --email/m);
  });

  test('--help fits in 100 columns, the list of commands and each command\'s own', async () => {
    const top = await runCli(['--help']);
    const commands = [...top.stdout.matchAll(/^ {2}teamlog ((?:[a-z][a-z-]* ?)+)/gm)].map((m) => m[1]!.trim().split(' '));
    assert.ok(commands.length >= 7, top.stdout);
    const helps = await Promise.all(commands.map((words) => runCli([...words, '--help'])));
    for (const [i, r] of [top, ...helps].entries()) {
      assert.equal(r.code, 0, r.stderr);
      const wide = r.stdout.split('\n').filter((line) => line.length > 100);
      assert.deepEqual(wide, [], `teamlog ${i === 0 ? '' : `${commands[i - 1]!.join(' ')} `}--help has lines wider than 100 columns`);
    }
  });

  test('npm install links node_modules/.bin/teamlog, so that npx runs the command without first reading the installed tree', () => {
    const scripts = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    assert.match(scripts.prepare!, /^node scripts\/link-bin\.mjs && /);
    // Run again (as every npm install does), it leaves the link as it is.
    for (let i = 0; i < 2; i++) assert.equal(spawnSync(process.execPath, [path.join(ROOT, 'scripts/link-bin.mjs')]).status, 0);
    assert.equal(realpathSync(path.join(ROOT, 'node_modules/.bin/teamlog')), realpathSync(path.join(ROOT, 'bin/teamlog.js')));
  });

  test('npm run seed compiles only what changed, as npm start does', () => {
    const scripts = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    assert.equal(scripts.seed, 'node scripts/build.mjs --if-changed && node dist/seed.js');
    assert.match(scripts.prestart!, /scripts\/build\.mjs --if-changed/);
  });
});
