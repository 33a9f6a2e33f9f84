// The README's "Try it", run as a reader runs it: its shell blocks, as written, in bash, in a
// directory whose data/ is a real server's DATA_DIR (the server the test starts; only the port
// in the README's address is the test's own). In order: log in, a project and a task, a socket
// that receives an event, the audit log's verification and a saved checkpoint; the CLI against
// that checkpoint; then `npm run seed` and Alice's examples, whose status change answers 409.
// A login that fails stops the block there, with curl's reason, instead of going on with no token.
// It runs the embedded database, as `npm start` and the README do (its data/initial-admin-password).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { outcomeOf, runTeamlog, type CliResult } from './helpers/cli.js';
import { entryFile, NODE_ARGS, ROOT } from './helpers/paths.js';
import { spawnServer, type ServerProcess } from './helpers/process.js';
import { migratedDataDir, onPostgres } from './helpers/server.js';

const README_ADDRESS = 'http://127.0.0.1:3000';

/** The ```sh blocks of the README's "Try it" section, in order. */
function tryItBlocks(): string[] {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('\n## Try it\n');
  assert.ok(start >= 0, 'the README has no "Try it" section');
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

type Run = CliResult;

/** A script in bash, in `cwd`, with the README's address made the test server's. */
function bash(script: string, cwd: string, url: string, flags: string[] = []): Promise<Run> {
  const child = spawn('bash', [...flags, '-c', script.replaceAll(README_ADDRESS, url)], {
    cwd,
    // The node that runs the suite first: the one `npm install` would have put on a reader's PATH.
    env: { PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`, HOME: process.env.HOME ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return outcomeOf(child);
}

/** `npm run seed`'s program (dist/seed.js), in the suite's own form, on `dataDir`. */
function seed(dataDir: string): Promise<Run> {
  const file = entryFile('src/server').replace(/server\.(js|ts)$/, 'seed.$1');
  const child = spawn(process.execPath, [...NODE_ARGS, file], {
    cwd: path.dirname(dataDir),
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATA_DIR: dataDir, TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('the README\'s "Try it", as written', { skip: onPostgres && 'the README tries the embedded database (PGlite pass)' }, () => {
  // A reader's project directory: data/ (the server's DATA_DIR) and the packages `npm install` brought.
  const home = mkdtempSync(path.join(tmpdir(), 'teamlog-readme-'));
  const dataDir = path.join(home, 'data');
  let blocks: string[];
  /** Every server started, so that none outlives the file, whatever failed. */
  const servers: ServerProcess[] = [];

  /** A server on the reader's data/, for the length of fn (stopped, exit 0, whatever fn did). */
  const withServer = async (fn: (url: string) => Promise<void>) => {
    const server = await spawnServer({ DATA_DIR: dataDir, AUDIT_CHECKPOINT_INTERVAL_MS: '200' }, { cwd: home });
    servers.push(server);
    try {
      await server.waitReady();
      await server.waitForOutput('/docs');
      await fn(server.url);
    } finally {
      assert.equal(await server.stop(), 0);
    }
  };

  before(async () => {
    // The embedded database migrated already (the suite's template), as a first start finds
    // it after initdb: the start itself, the first ADMIN and its password file, is the server's.
    renameSync(await migratedDataDir('teamlog-readme-data-'), dataDir);
    blocks = tryItBlocks();
    assert.equal(blocks.length, 5, 'the Try-it blocks: login, socket, verify, CLI, demo team');
    // As `npm install` left a reader's checkout: the packages beside data/ (the socket block imports socket.io-client).
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(home, 'node_modules'), 'dir');
  });

  after(async () => {
    for (const server of servers) await server.stop();
    rmSync(home, { recursive: true, force: true });
  });

  test('logs in, creates a project and tasks, receives the socket event, verifies the log and saves a checkpoint', async () => {
    await withServer(async (url) => {
      // The socket block's listener runs in the background: wait for it, with its own status.
      const run = await bash(`${blocks[0]}\n${blocks[1]}\n${blocks[2]}\nwait $!\n`, home, url, ['-e', '-o', 'pipefail']);
      assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
      assert.match(run.stdout, /"title":"Write the README"/);
      assert.match(run.stdout, /"next_cursor":null/);
      assert.match(run.stdout, /task-created \{\n {2}id: \d+,/);
      assert.match(run.stdout, /"action":"CREATE_TASK"/);
      assert.match(run.stdout, /\{"ok":true,"records_checked":/);
      const note = readFileSync(path.join(home, 'saved.note'), 'utf8');
      assert.match(note, /^\S+\n\d+\n\S+\n(?:.+\n)*\n— \S+ \S+\n$/);
    });
  });

  test('"stop the server first": the CLI checks the log against the checkpoint saved outside it', async () => {
    assert.match(blocks[3]!, /^npx teamlog audit verify --checkpoint saved\.note /m);
    const cli = await runTeamlog(['audit', 'verify', '--checkpoint', path.join(home, 'saved.note')], { DATA_DIR: dataDir });
    assert.equal(cli.code, 0, cli.stdout + cli.stderr);
    assert.match(cli.stdout, /^OK: .*the log extends the saved checkpoint/);
  });

  test('a login that fails stops the block there, saying why, and nothing after it runs', async () => {
    await withServer(async (url) => {
      // A reader in another directory, whose data/initial-admin-password is not this server's.
      const elsewhere = path.join(home, 'elsewhere');
      mkdirSync(path.join(elsewhere, 'data'), { recursive: true });
      writeFileSync(path.join(elsewhere, 'data', 'initial-admin-password'), 'not-the-password\n');
      // Plain bash, as a script runs it: no -e. The check after the login stops it.
      const run = await bash(blocks[0]!, elsewhere, url);
      assert.notEqual(run.code, 0);
      assert.match(run.stderr, /curl: \(22\)[^\n]*401/);
      assert.match(run.stderr, /TOKEN: the login failed \(curl says why\)/);
      assert.doesNotMatch(run.stdout + run.stderr, /Bearer undefined|"title"/);
    });
  });

  test('npm run seed (the server stopped) fills the reader\'s database with the demo team', async () => {
    const seeded = await seed(dataDir);
    assert.equal(seeded.code, 0, seeded.stdout + seeded.stderr);
    assert.match(seeded.stdout, /^Seeded: 5 users, 3 projects, 60 tasks/m);
  });

  test('then Alice\'s examples answer as the README says: her TODO task refused DONE with 409 INVALID_TRANSITION', async () => {
    await withServer(async (url) => {
      // "in the same shell (`API` as above)": the first block's first line.
      const api = blocks[0]!.split('\n')[0]!;
      assert.match(api, /^API=/);
      const run = await bash(`${api}\n${blocks[4]}`, home, url, ['-e', '-o', 'pipefail']);
      assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
      assert.match(run.stdout, /"code":"INVALID_TRANSITION"/);
      assert.match(run.stdout, /"allowed_transitions":\["IN_PROGRESS","CANCELED"\]/);
      assert.match(run.stdout, /"content":"Hello team"/);
      assert.doesNotMatch(run.stdout, /"code":"NOT_FOUND"/);
    });
  });
});
