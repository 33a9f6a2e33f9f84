// A .env whose variable no setting reads: a typo there would otherwise be a silent default.
// The server and the CLI warn at start, naming the setting that was probably meant.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
      assert.equal(await proc.stop(), 0);
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
