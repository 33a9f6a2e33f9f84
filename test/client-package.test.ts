// @teamlog/client as a package (issues 25 and 41): its committed REST types are what
// openapi-typescript makes of the document the service serves now (regenerate with `npm run
// generate -w @teamlog/client` when this fails); it compiles with the browser's library and no
// Node types (no Node-only import); it bundles for the browser, and the bundle without socket.io-client
// stays under 10 KB gzipped, the figure its README states. And it installs like a library: the
// root's `npm install` builds it; `npm pack -w @teamlog/client` makes a tarball of its built ESM,
// type declarations and README only, with `exports`; a fresh project installs that tarball
// (socket.io-client comes with it), type-checks against it, and runs the quickstart,
// client/examples/quickstart.mjs as the README shows it, with plain Node against a real server.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bundleSize } from '../client/scripts/size.js';
import { TYPES_FILE, typesFrom } from '../client/scripts/types.js';
import { Client } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { ROOT } from './helpers/paths.js';

const h = useTestServer();

test('the committed REST types are generated from the document the service serves (else: npm run generate -w @teamlog/client)', async () => {
  const doc = (await new Client(h.server).get('/api/v1/openapi.json')).body;
  const fresh = await typesFrom(doc);
  const committed = readFileSync(fileURLToPath(TYPES_FILE), 'utf8');
  assert.ok(committed === fresh, 'client/src/generated/teamlog-api.ts is stale: run `npm run generate -w @teamlog/client` and commit it');
});

test('the library compiles with the DOM library and without Node types: nothing in it needs Node', () => {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', 'client/tsconfig.json', '--noEmit'], { encoding: 'utf8' });
  assert.equal(run.status, 0, `tsc:\n${run.stdout}${run.stderr}`);
});

test('it bundles for the browser; without socket.io-client it is under 10 KB gzipped, as client/README.md says', async () => {
  const { gzipped } = await bundleSize();
  assert.ok(gzipped < 10 * 1024, `${gzipped} bytes gzipped`);
  const readme = readFileSync('client/README.md', 'utf8');
  const stated = /(\d+\.\d) KB gzipped without socket\.io-client/.exec(readme);
  assert.ok(stated, 'the README states the size');
  assert.ok(Math.abs(Number(stated[1]) * 1024 - gzipped) <= 512, `README says ${stated[1]} KB, the bundle is ${(gzipped / 1024).toFixed(1)} KB`);
  // With socket.io-client too: the browser build of it, no Node built-in anywhere.
  assert.ok((await bundleSize({ withSocketIo: true })).gzipped < 40 * 1024);
});

test("the root's npm install builds the library; the package has no install script of its own", () => {
  const root = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  assert.match(root.scripts.prepare ?? '', /\bnode client\/scripts\/build\.mjs\b/, 'the root prepare (npm install, npm ci) compiles client/dist');
  // A prepare of the package's own would be packed, and npm lists it to whoever installs the
  // tarball as a script waiting for approval, although it never runs there. prepack builds for npm pack.
  const client = JSON.parse(readFileSync(path.join(ROOT, 'client/package.json'), 'utf8')) as { scripts: Record<string, string> };
  for (const script of ['preinstall', 'install', 'postinstall', 'prepare']) assert.equal(client.scripts[script], undefined, `client/package.json has a ${script} script`);
  assert.match(client.scripts.prepack ?? '', /scripts\/build\.mjs/);
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command in `cwd` with PATH and HOME only (npm's cache is HOME's; nothing of this test
 * process's npm or node:test environment), and `env`. Asynchronous: the test server answers from
 * this very process. Killed after `timeoutMs`.
 */
function runCommand(command: string, args: string[], cwd: string, env: Record<string, string> = {}, timeoutMs = 120_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const said = (r: Run) => `exit ${r.code}\n${r.stdout}${r.stderr}`;

/** The temporary directory of the tests below: the tarball, and the fresh project beside it. */
const work = mkdtempSync(path.join(tmpdir(), 'teamlog-client-pack-'));
const app = path.join(work, 'app');
after(() => rmSync(work, { recursive: true, force: true }));
/** Set by the first of the tests below, which the next ones follow: the tarball's path. */
let tarball: string | undefined;
const packed = () => tarball ?? assert.fail('the package was not packed (see the test before)');

test('npm pack -w @teamlog/client packs the built ESM, its .d.ts and the README, and no source, test, map or tsconfig', async () => {
  const pack = await runCommand('npm', ['pack', '-w', '@teamlog/client', '--pack-destination', work, '--json'], ROOT);
  assert.equal(pack.code, 0, said(pack));
  const [answer] = JSON.parse(pack.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  assert.ok(answer);
  const files = answer.files.map((f) => f.path).sort();
  const unexpected = files.filter((f) => !/^(?:package\.json|README\.md|dist\/[\w/.-]+\.(?:js|d\.ts))$/.test(f));
  assert.deepEqual(unexpected, [], 'only package.json, README.md and dist/ (.js and .d.ts) are packed');
  for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/realtime.js', 'README.md']) assert.ok(files.includes(f), `${f} is not packed`);
  // Each module with its declarations, and nothing of dist/ that src/ no longer has (the build empties dist/ first).
  const js = files.filter((f) => f.endsWith('.js'));
  assert.deepEqual(js.map((f) => f.replace(/\.js$/, '.d.ts')), files.filter((f) => f.endsWith('.d.ts')));
  for (const f of js) assert.ok(existsSync(path.join(ROOT, 'client/src', f.slice('dist/'.length).replace(/\.js$/, '.ts'))), `${f} has no source in client/src`);
  tarball = path.join(work, answer.filename);
});

test('a fresh project installs the tarball, socket.io-client with it, from npm\'s cache where it can, and finds ESM and types through exports', async () => {
  mkdirSync(app);
  writeFileSync(path.join(app, 'package.json'), `${JSON.stringify({ name: 'teamlog-client-user', private: true, type: 'module' }, null, 2)}\n`);
  const install = await runCommand('npm', ['install', packed(), '--prefer-offline', '--no-audit', '--no-fund'], app);
  assert.equal(install.code, 0, said(install));
  assert.doesNotMatch(install.stderr, /@teamlog\/client\S* \((?:preinstall|install|postinstall|prepare):/, 'npm lists an install script of the package');
  const dir = path.join(app, 'node_modules/@teamlog/client');
  const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { type: string; exports: { '.': { types: string; default: string } } };
  assert.equal(manifest.type, 'module');
  assert.ok(existsSync(path.join(dir, manifest.exports['.'].types)) && existsSync(path.join(dir, manifest.exports['.'].default)), 'exports names files that are there');
  assert.ok(existsSync(path.join(app, 'node_modules/socket.io-client/package.json')), 'socket.io-client, its peer dependency, is installed with it');
  // Imported by its name with plain Node, as ESM (a deep import is refused: exports is the API).
  const imported = await runCommand(process.execPath, ['--input-type=module', '-e', `
    const client = await import('@teamlog/client');
    console.log(Object.keys(client).sort().join(' '));
    await import('@teamlog/client/dist/auth.js').then(() => console.log('deep import allowed'), (err) => console.log(err.code));`], app);
  assert.equal(imported.code, 0, said(imported));
  for (const name of ['createClient', 'TeamlogError', 'memoryStore']) assert.match(imported.stdout, new RegExp(`\\b${name}\\b`), `${name} is not exported`);
  assert.match(imported.stdout, /ERR_PACKAGE_PATH_NOT_EXPORTED/);
});

test("a TypeScript project finds the installed package's types through exports, and the quickstart type-checks against them", async () => {
  // As a user's project resolves them (NodeNext), checking the quickstart too: it is // @ts-check
  // JavaScript. @ts-expect-error proves that they are not any: an option that does not exist is refused.
  packed();
  copyFileSync(path.join(ROOT, 'client/examples/quickstart.mjs'), path.join(app, 'quickstart.mjs'));
  writeFileSync(path.join(app, 'check.ts'), [
    "import { createClient, TeamlogError, type Task } from '@teamlog/client';",
    "const status: Task['status'] = 'IN_REVIEW';",
    "// @ts-expect-error: no such option",
    "createClient({ baseUrl: 'http://127.0.0.1:3000', nope: true });",
    'export const used = [status, TeamlogError];',
    '',
  ].join('\n'));
  writeFileSync(path.join(app, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, allowJs: true, checkJs: true,
      skipLibCheck: true, types: ['node'], typeRoots: [path.join(ROOT, 'node_modules/@types')],
    },
    files: ['check.ts', 'quickstart.mjs'],
  }));
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const checked = await runCommand(process.execPath, [tsc, '-p', 'tsconfig.json'], app);
  assert.equal(checked.code, 0, said(checked));
});

test('client/README.md shows examples/quickstart.mjs, and that script runs with plain Node from the installed tarball against a real server', async () => {
  const example = readFileSync(path.join(ROOT, 'client/examples/quickstart.mjs'), 'utf8');
  const readme = readFileSync(path.join(ROOT, 'client/README.md'), 'utf8');
  assert.ok(readme.includes(`\`\`\`js\n${example}\`\`\``), 'client/README.md shows examples/quickstart.mjs verbatim');
  packed();
  const me = await h.newUser();
  const run = await runCommand(process.execPath, ['quickstart.mjs'], app, { TEAMLOG_URL: h.server.url, TEAMLOG_EMAIL: me.email, TEAMLOG_PASSWORD: me.password }, 60_000);
  assert.equal(run.code, 0, said(run));
  assert.match(run.stdout, new RegExp(`^logged in as ${me.email.replace(/[.+]/g, '\\$&')}$`, 'm'));
  assert.match(run.stdout, /task-updated: Write the announcement is IN_PROGRESS\n(?:.*\n)*task-updated: Write the announcement is CANCELED\n/, 'both moves arrive over the socket, in order');
  assert.match(run.stdout, /^allowed from CANCELED: /m, 'the refused move is a TeamlogError with its allowed transitions');
  assert.match(run.stdout, /^\d+ Write the announcement CANCELED$/m, 'the list');
  assert.match(run.stdout, /^signed out: logout$/m);
  // Without an account to use, it says what to set, and exits 2.
  const bare = await runCommand(process.execPath, ['quickstart.mjs'], app);
  assert.equal(bare.code, 2, said(bare));
  assert.match(bare.stderr, /TEAMLOG_EMAIL and TEAMLOG_PASSWORD/);
});
