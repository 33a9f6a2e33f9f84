// The `teamlog` CLI as a child process (`node --import tsx src/cli.ts`, so no build is needed)
// against a fresh database: embedded PGlite under DATA_DIR, or a new, empty PostgreSQL
// database on the PostgreSQL pass.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { LOCK_FILE } from '../src/ops/data-dir-lock.js';
import { runTeamlog, useCliDatabase, type CliResult } from './helpers/cli.js';
import { ROOT } from './helpers/paths.js';
import { auditRows, Client, login } from './helpers/client.js';

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

/** An empty database (the CLI migrates it) and a data directory, shared by the CLI and the file's test servers. */
const world = useCliDatabase({ prefix: 'teamlog-cli-', database: 'empty' });
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
      const verify = await runTeamlog(['audit', 'verify'], { DATA_DIR: held });
      assert.equal(verify.code, 1, verify.stderr);
      assert.match(verify.stderr, new RegExp(`in use by another Teamlog process \\(pid ${process.pid}\\)`));
      assert.match(verify.stderr, /^To verify while it runs, verify an export of the running server instead/m);
      assert.match(verify.stderr, /-H "Authorization: Bearer <an ADMIN's access token>" <server>\/api\/v1\/audit-logs\/export -o export\.ndjson$/m);
      assert.match(verify.stderr, /GET \/api\/v1\/audit-logs\/public-keys/);
      assert.ok(!/--url|--token/.test(verify.stderr), `it names a flag the CLI does not have:\n${verify.stderr}`);
      // The command it shows is one the CLI takes: run as shown, it fails on the missing export (1), not on its usage (2).
      const shown = /^ {2}teamlog (audit verify .+)$/m.exec(verify.stderr)?.[1];
      assert.equal(shown, 'audit verify --file export.ndjson --public-key key.pem');
      const asShown = await runTeamlog(shown.split(' '), { DATA_DIR: held });
      assert.equal(asShown.code, 1, asShown.stderr);
      assert.match(asShown.stderr, /cannot read the export export\.ndjson: ENOENT/);

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
});
