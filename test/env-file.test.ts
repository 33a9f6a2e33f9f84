// A .env whose variable no setting reads: a typo there would otherwise be a silent default.
// The server and the CLI warn at start, naming the setting that was probably meant. And the
// .env is the server's alone: compose's secrets live in deploy/.env.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { settingNames, unknownEnvFileKeys } from '../src/config.js';
import { entryArgs, ROOT } from './helpers/paths.js';
import { spawnServer } from './helpers/process.js';

const ENV_FILE = [
  '# a comment, and a blank line after it',
  '',
  'LOG_LEVL=debug',
  'DATABSE_URL=postgres://teamlog@db:5432/teamlog',
  'jwt_secret=lower-case-is-another-name',
  'SOMETHING_ELSE_ENTIRELY=1',
  // Read by others than Teamlog: compose.yaml, and the PostgreSQL driver.
  'POSTGRES_PASSWORD=for-compose',
  'PGSSLMODE=prefer',
  'ADMIN_EMAIL=env-file@example.com',
  '',
].join('\n');

const EXPECTED = [
  'LOG_LEVL in .env is not a setting Teamlog reads; did you mean LOG_LEVEL?',
  'DATABSE_URL in .env is not a setting Teamlog reads; did you mean DATABASE_URL?',
  'jwt_secret in .env is not a setting Teamlog reads; did you mean JWT_SECRET?',
  'SOMETHING_ELSE_ENTIRELY in .env is not a setting Teamlog reads (.env.example lists every setting)',
];

let dir: string;

before(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'teamlog-env-file-'));
  writeFileSync(path.join(dir, '.env'), ENV_FILE);
});

after(() => rmSync(dir, { recursive: true, force: true }));

describe('a .env variable that no setting reads', () => {
  test('is one warning each, naming the closest setting when one is near; a setting, compose.yaml\'s and the driver\'s PG* variables are not', () => {
    assert.deepEqual(unknownEnvFileKeys(path.join(dir, '.env')), EXPECTED);
  });

  test('the settings are exactly the variables config.ts reads, the newest included', () => {
    const source = readFileSync(path.join(ROOT, 'src/config.ts'), 'utf8');
    const read = new Set([...source.matchAll(/\benv(?:, '|\.)([A-Z][A-Z0-9_]+)/g)].map((m) => m[1]!));
    assert.deepEqual([...settingNames()].sort(), [...read].sort());
    for (const name of ['LOG_LEVEL', 'MAX_CONCURRENT_AUDIT_SCANS', 'METRICS_TOKEN', 'DATABASE_STARTUP_TIMEOUT_MS']) assert.ok(settingNames().includes(name), name);
  });

  test('is warned about in the server\'s log at start, and the server starts all the same', async () => {
    const dataDir = path.join(dir, 'server-data');
    const proc = await spawnServer({ DATA_DIR: dataDir }, { cwd: dir });
    try {
      await proc.waitReady();
      // The start's last lines come after the server answers (they name the address it listens on).
      await proc.waitForOutput('First ADMIN created: env-file@example.com');
      const lines = proc.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string });
      const warnings = lines.filter((l) => l.level === 40).map((l) => l.msg);
      for (const warning of EXPECTED) assert.ok(warnings.includes(warning), `no warning "${warning}" in:\n${proc.output()}`);
      assert.ok(!warnings.some((w) => /POSTGRES_PASSWORD|PGSSLMODE|ADMIN_EMAIL/.test(w)), `a warning for a variable that is read:\n${warnings.join('\n')}`);
      // The settings beside the typos were read.
      assert.ok(lines.some((l) => l.msg.startsWith('First ADMIN created: env-file@example.com')), proc.output());
    } finally {
      // A shutdown that fails or overruns its deadline exits 1: its log says which.
      const code = await proc.stop();
      assert.equal(code, 0, `the server exited with ${code} on SIGTERM:\n${proc.output()}`);
    }
  });

  test('is warned about by the CLI, on stderr, before the command runs', async () => {
    // create-admin without --email: a usage error, after the .env has been read.
    const child = spawn(process.execPath, [...entryArgs('src/cli'), 'create-admin'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json'), DATA_DIR: path.join(dir, 'cli-data') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise((resolve) => child.on('close', resolve));
    assert.equal(code, 2, stderr);
    assert.deepEqual(stderr.split('\n').filter((l) => l.includes(' in .env ')), EXPECTED.map((w) => `teamlog: ${w}`));
    assert.match(stderr, /--email is required/);
    assert.equal(stdout, '');
  });
});

// compose.yaml's secrets are compose's, in a file of its own: the .env that `npm start` reads is
// the embedded database's, and a signing key put there for compose made `npm start` refuse to
// start on its existing data (issue 41).
describe('compose\'s secrets file, deploy/.env', () => {
  const compose = readFileSync(path.join(ROOT, 'compose.yaml'), 'utf8');

  test('every secret compose.yaml requires names deploy/.env and --env-file in its message; none names the .env beside it', () => {
    const required = [...compose.replace(/^\s*#.*$/gm, '').matchAll(/\$\{([A-Z_]+):\?([^}]*)\}/g)].map((m) => ({ name: m[1]!, message: m[2]! }));
    assert.ok(required.length >= 5, 'compose.yaml requires no variable');
    for (const { name, message } of required) {
      assert.match(message, /deploy\/\.env/, `\${${name}}'s message does not name deploy/.env`);
      assert.match(message, /--env-file deploy\/\.env/, `\${${name}}'s message does not say --env-file`);
      assert.doesNotMatch(message, /in \.env\b/, `\${${name}}'s message names the .env that npm start reads`);
    }
  });

  test('docs/operations.md writes the secrets into deploy/.env and runs every compose command with it', () => {
    const docs = readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8');
    const containers = docs.slice(docs.indexOf('## Containers'), docs.indexOf('\n## ', docs.indexOf('## Containers') + 1));
    assert.match(containers, /> deploy\/\.env\)/);
    assert.doesNotMatch(containers, />>? \.env\b/);
    const commands = [...containers.matchAll(/^docker compose .*$/gm)].map((m) => m[0]);
    assert.ok(commands.length >= 3);
    for (const command of commands) assert.match(command, /^docker compose --env-file deploy\/\.env /);
  });

  test('git and the image\'s build context leave deploy/.env out', () => {
    const ignored = spawnSync('git', ['check-ignore', '-q', 'deploy/.env'], { cwd: ROOT });
    assert.equal(ignored.status, 0, 'git would commit deploy/.env');
    assert.match(readFileSync(path.join(ROOT, '.dockerignore'), 'utf8'), /^deploy\/\.env$/m);
  });

  test('a server started in the project reads ./.env, never deploy/.env: compose\'s keys do not reach the embedded database', async () => {
    const project = mkdtempSync(path.join(tmpdir(), 'teamlog-compose-env-'));
    try {
      mkdirSync(path.join(project, 'deploy'));
      // A key no server would accept (it is not a PEM): read, it would stop the start.
      writeFileSync(path.join(project, 'deploy', '.env'), 'AUDIT_SIGNING_KEY=not-a-key\nPOSTGRES_PASSWORD=for-compose\n');
      const proc = await spawnServer({ DATA_DIR: path.join(project, 'data') }, { cwd: project });
      try {
        await proc.waitReady();
        assert.doesNotMatch(proc.output(), /Environment read from|AUDIT_SIGNING_KEY:/);
      } finally {
        assert.equal(await proc.stop(), 0);
      }
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  });
});
