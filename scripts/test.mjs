#!/usr/bin/env node
// npm test: typecheck, lint, then the whole suite twice: on embedded PGlite, and on PostgreSQL
// with Redis, as several instances run in production (each test file creates and drops its
// own database). Where no PostgreSQL answers, the PostgreSQL pass is skipped, unless
// --require-postgres or CI=true makes that a failure; where no Redis answers, the tests that need
// it are skipped (under CI=true, a failure too: they are the several-instances guarantees); the
// summary says so plainly. A developer may still run `npm run test:pglite` on purpose. A test that takes more than 60 s fails the run, as
// does a cancelled one (cut short when its file ran out of time) and a failed one.
// The suite runs compiled (scripts/build-tests.mjs: every process it starts loads JavaScript,
// not TypeScript through tsx) and with V8's baseline WebAssembly compiler only (--liftoff-only:
// each PGlite starts a second sooner than when V8 also optimizes its 9 MB of WebAssembly, and
// the suite's queries are too few to repay that), each cutting the CPU a PGlite test file takes
// by about a fifth on the 2-core VM.
//   --only pglite|postgres   run one pass
//   --no-checks              skip typecheck and lint
//   --require-postgres       fail, before running anything, when no PostgreSQL answers (.ci/run;
//                            CI=true in the environment does the same, and requires Redis too)
//   --record-order           write each file's wall and CPU time in this run to scripts/test-order.json
//   any other argument       test files to run instead of all of them
import { spawnSync, spawn } from 'node:child_process';
import net from 'node:net';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { buildTests } from './build-tests.mjs';

/**
 * The most one test may take on the 2-core development VM. Held after the fact, from each test's
 * duration (scripts/test-durations.mjs): Node 20's --test-timeout bounds a whole file, not a
 * test in it, and giving each test() a timeout by wrapping it would name the wrapper, not the
 * test file, as the place of every failure.
 */
const TEST_LIMIT_MS = 60_000;
/**
 * What a whole file may take (--test-timeout, on Node 20): only for a file stuck (a test that
 * never ends, a handle left open); a file that runs out of it is killed, its tests unreported
 * and the file counted cancelled. The slowest files take under a minute on the idle VM, and
 * about 3 minutes when other suites run beside them (load 15-20).
 */
const FILE_TIMEOUT_MS = 10 * 60_000;
const FLAGS = ['--only', '--no-checks', '--require-postgres', '--record-order'];

const args = process.argv.slice(2);
const unknown = args.filter((a) => a.startsWith('--') && !FLAGS.includes(a));
const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;
if (unknown.length > 0 || (args.includes('--only') && only !== 'pglite' && only !== 'postgres')) {
  console.error(`scripts/test.mjs: ${unknown.length > 0 ? `unknown option ${unknown.join(', ')}` : '--only takes pglite or postgres'}`);
  console.error('Usage: node scripts/test.mjs [--only pglite|postgres] [--no-checks] [--require-postgres] [--record-order] [test files…]');
  process.exit(2);
}
const checks = !args.includes('--no-checks');
const recordOrder = args.includes('--record-order');
/** Under CI a green run must include the races and the several-instances tests: no pass may be skipped. */
const CI = /^(1|true)$/i.test(process.env.CI ?? '');
const requirePostgres = (args.includes('--require-postgres') || CI) && only !== 'pglite';
const requireRedis = CI && only !== 'pglite';
const named = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--only');
const PG_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PG_SHOWN = PG_URL.replace(/\/\/[^@]*@/, '//');
/** The compiled mirror the passes run from (scripts/build-tests.mjs), removed at the end. */
const BUILD = path.join(tmpdir(), `teamlog-tests-${process.pid}`);
/** Node's options for every test process (and, through test/helpers/paths.ts, the processes they start). */
const NODE_OPTIONS = ['--liftoff-only', '--enable-source-maps'];
/**
 * Test files run at once in a pass (TEST_CONCURRENCY overrides). Four on two cores: many files
 * spend much of their time waiting on a timer (a token's expiry, a seal, a server's start), and
 * the others use the cores meanwhile. Measured on the 2-core VM, with the files longest first:
 * the PGlite pass took 332 s at three (in file-name order) and 221 s at four, with the cores idle
 * 2% of the time; the PostgreSQL pass, already busy at three, 216 s and 213 s.
 */
const CONCURRENCY = Number(process.env.TEST_CONCURRENCY || 4);
/**
 * Each file's wall and CPU seconds in a recorded run, by pass (--record-order writes it). A pass
 * starts its files longest first: node --test starts them in the order given, and a long file
 * started near the end would run on alone while the other slots stay empty. A file not in the
 * table (a new one) starts first, since it may be long; the table need not be exact, only
 * rerecorded when a file's time changes a lot.
 */
const ORDER_FILE = 'scripts/test-order.json';
const order = existsSync(ORDER_FILE) ? JSON.parse(readFileSync(ORDER_FILE, 'utf8')) : {};
const longestFirst = (kind, files) => {
  const wall = (file) => order[kind]?.[path.relative(process.cwd(), path.resolve(file))]?.wall ?? Infinity;
  return [...files].sort((a, b) => wall(b) - wall(a));
};
/** A test file's compiled form in the mirror, and back: runs are shown by their TypeScript names. */
const compiledFile = (file) => path.join(BUILD, file.replace(/\.ts$/, '.js'));
const sourceFile = (file) => (file.startsWith(BUILD) ? path.relative(BUILD, file).replace(/\.js$/, '.ts') : path.relative(process.cwd(), file));

function findTests(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    if (name === 'node_modules' || name === 'helpers') return [];
    if (statSync(p).isDirectory()) return findTests(p);
    return name.endsWith('.test.ts') ? [p] : [];
  });
}

/** Runs the checks side by side (each is one thread), then prints each one's output in turn; exits on the first that failed. */
async function checksSideBySide(checks) {
  const runs = checks.map(({ title, args }) => new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('close', (code) => resolve({ title, code, output }));
  }));
  const results = await Promise.all(runs);
  for (const { title, code, output } of results) {
    console.log(`\n▶ ${title}`);
    process.stdout.write(output);
    if (code !== 0) {
      console.log(`✖ ${title} failed`);
      process.exit(code ?? 1);
    }
  }
}

/** The rows of one statement at PG_URL, on a connection of its own; undefined when PostgreSQL does not answer it (within 3 s to connect). */
async function askPostgres(sql) {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    return (await c.query(sql)).rows;
  } catch {
    return undefined;
  } finally {
    await c.end().catch(() => {});
  }
}

const postgresAnswers = async () => (await askPostgres('SELECT 1')) !== undefined;

/**
 * Connections a PostgreSQL pass may hold at once, per file running: a test server keeps up to
 * about 15 in its pools, its lookup lanes, LISTEN, the sealer's and a scan's threads, and some
 * files run two or three. Four files at once peaked at 67 on the 2-core VM.
 */
const CONNECTIONS_PER_FILE = 20;

/**
 * Warns, before the PostgreSQL pass, when the server has fewer connection slots free than the
 * pass may take: past them the tests' servers are refused connections, and their requests are
 * answered 503 in tests that have nothing to do with it.
 */
async function warnOfFewConnections() {
  const [row] = (await askPostgres(
    `SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int
            - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int AS free`,
  )) ?? [];
  // No answer: the pass reports a database that does not answer.
  const wanted = CONCURRENCY * CONNECTIONS_PER_FILE;
  if (row && row.free < wanted) {
    console.log(`⚠ PostgreSQL at ${PG_SHOWN} has ${row.free} connection slots free; ${CONCURRENCY} test files at once may need about ${wanted}. ` +
      'Raise max_connections, or lower TEST_CONCURRENCY, if tests are answered 503 (UNAVAILABLE).');
  }
}

/** Whether Redis answers PING at REDIS_URL (within 2 s). */
function redisAnswers() {
  const { hostname, port } = new URL(REDIS_URL);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port || 6379) });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}

/** The spec reporter's closing counts ("ℹ pass 12"); a count it did not print is missing, not 0. */
const COUNTS = ['tests', 'pass', 'fail', 'cancelled', 'skipped', 'todo'];

function runPass(kind, files, env = {}) {
  return new Promise((resolve) => {
    console.log(`\n▶ test suite on ${kind === 'postgres' ? 'PostgreSQL' : 'embedded PGlite'} (${files.length} files)`);
    const durationsFile = path.join(tmpdir(), `teamlog-test-durations-${process.pid}-${kind}.jsonl`);
    // Each file's time, from its own process (scripts/test-clock.mjs), only when recording.
    const clockFile = path.join(tmpdir(), `teamlog-test-clock-${process.pid}-${kind}.jsonl`);
    const clock = recordOrder ? ['--import', pathToFileURL(path.resolve('scripts/test-clock.mjs')).href] : [];
    const child = spawn(
      process.execPath,
      [
        ...NODE_OPTIONS, ...clock, '--test', `--test-concurrency=${CONCURRENCY}`, `--test-timeout=${FILE_TIMEOUT_MS}`,
        '--test-reporter=spec', '--test-reporter-destination=stdout',
        `--test-reporter=${pathToFileURL(path.resolve('scripts/test-durations.mjs')).href}`, `--test-reporter-destination=${durationsFile}`,
        ...longestFirst(kind, files).map(compiledFile),
      ],
      { env: { ...process.env, ...env, TEST_DB: kind, TEST_NODE_OPTIONS: NODE_OPTIONS.join(' '), ...(recordOrder ? { TEST_CLOCK_FILE: clockFile } : {}) }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let buffer = '';
    child.stdout.setEncoding('utf8'); // "ℹ" is three bytes, which two chunks may share
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk);
      buffer += chunk;
    });
    child.on('close', (code) => {
      const counts = {};
      for (const key of COUNTS) {
        // The last one: the summary comes at the very end, after anything a test printed.
        const all = [...buffer.matchAll(new RegExp(`^ℹ ${key} (\\d+)$`, 'gm'))];
        counts[key] = all.length > 0 ? Number(all.at(-1)[1]) : undefined;
      }
      const tests = existsSync(durationsFile)
        ? readFileSync(durationsFile, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line))
        : [];
      rmSync(durationsFile, { force: true });
      const clocked = existsSync(clockFile)
        ? readFileSync(clockFile, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line))
        : [];
      rmSync(clockFile, { force: true });
      const slow = tests.filter((t) => !t.suite && t.ms > TEST_LIMIT_MS).sort((a, b) => b.ms - a.ms);
      // Those cut short with their file are counted apart ("cancelled"), not repeated here.
      const failed = tests.filter((t) => t.failure !== undefined && t.failureType !== 'cancelledByParent');
      resolve({ kind, code: code ?? 1, counts, slow, failed, clocked });
    });
  });
}

// No line: the reporter's lines are the compiled file's.
const where = (t) => `${t.file ? sourceFile(t.file) : '?'} "${t.name}" (${t.suite ? 'a hook of this suite' : `${(t.ms / 1000).toFixed(1)} s`})`;

/** Why a pass failed, in words; none: it passed. */
function problems(r) {
  const c = r.counts;
  const found = [];
  if (COUNTS.some((key) => c[key] === undefined)) found.push('the test runner printed no complete summary (it crashed or was killed): see its output above');
  if (c.fail > 0) found.push(`${c.fail} failed`);
  if (c.cancelled > 0) found.push(`${c.cancelled} cancelled: cut short, a file that ran out of its ${FILE_TIMEOUT_MS / 60_000} min counting as one (see "failing tests" above)`);
  for (const t of r.slow) found.push(`over the ${TEST_LIMIT_MS / 1000} s a test may take: ${where(t)}`);
  if (r.code !== 0 && found.length === 0) found.push(`the test runner exited ${r.code} with no failed or cancelled test counted: a file failed outside its tests, see the output above`);
  return found;
}

const files = named.length > 0 ? named : findTests('test').concat(findTests('src')).sort();
// Said before the first minute is spent: CI without its PostgreSQL pass is not a green run.
if (requirePostgres && !(await postgresAnswers())) {
  console.error(`✖ ${CI ? 'CI=true' : '--require-postgres'}: no PostgreSQL answers at ${PG_SHOWN} (TEST_DATABASE_URL); the PostgreSQL pass cannot run, so the run fails. Start PostgreSQL, or run \`npm run test:pglite\` to run the PGlite pass alone.`);
  process.exit(1);
}
if (requireRedis && !(await redisAnswers())) {
  console.error(`✖ CI=true: no Redis answers at ${REDIS_URL} (TEST_REDIS_URL); the tests of several instances cannot run, so the run fails. Start Redis.`);
  process.exit(1);
}
if (checks) {
  await checksSideBySide([
    { title: 'typecheck (tsc --noEmit)', args: ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json', '--noEmit'] },
    { title: 'lint (eslint)', args: ['node_modules/eslint/bin/eslint.js', '.'] },
  ]);
}

/**
 * A migrated template for the pass (test/helpers/template.ts): each test file's database starts
 * as a copy of it instead of running every migration again. Undefined (each file migrates) when
 * it cannot be made: the pass then says why in its own failures.
 */
function makeTemplate(kind) {
  const target = kind === 'pglite' ? path.join(tmpdir(), `teamlog-test-template-${process.pid}.tar`) : `teamlog_test_template_${process.pid}`;
  const started = Date.now();
  const r = spawnSync(process.execPath, [...NODE_OPTIONS, compiledFile('test/helpers/template.ts'), kind, target], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) {
    console.log(`(no migrated template for ${kind}: each test file migrates its own database)`);
    return { env: {}, drop: () => {} };
  }
  console.log(`\n▶ migrated template for ${kind} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  return kind === 'pglite'
    ? { env: { TEST_PGLITE_TEMPLATE: target }, drop: () => rmSync(target, { force: true }) }
    : { env: { TEST_POSTGRES_TEMPLATE: target }, drop: () => spawnSync(process.execPath, [compiledFile('test/helpers/template.ts'), 'drop-postgres', target], { stdio: 'inherit' }) };
}

/**
 * Writes the files' times in `passes` into ORDER_FILE, keeping those of files this run did not
 * run and dropping those of files that are gone; one line a file, so that a change reads in a diff.
 */
function writeOrder(passes) {
  const all = new Set(findTests('test').concat(findTests('src')));
  const table = {};
  for (const kind of ['pglite', 'postgres']) {
    const times = { ...order[kind] };
    for (const { file, wall, cpu } of passes.find((r) => r.kind === kind)?.clocked ?? []) {
      times[sourceFile(file)] = { wall: Number(wall.toFixed(1)), cpu: cpu === null ? null : Number(cpu.toFixed(1)) };
    }
    const kept = Object.keys(times).filter((file) => all.has(file)).sort();
    if (kept.length > 0) table[kind] = Object.fromEntries(kept.map((file) => [file, times[file]]));
  }
  const lines = Object.entries(table).map(([kind, times]) =>
    `  ${JSON.stringify(kind)}: {\n${Object.entries(times).map(([file, t]) => `    ${JSON.stringify(file)}: ${JSON.stringify(t)}`).join(',\n')}\n  }`);
  writeFileSync(ORDER_FILE, `{\n${lines.join(',\n')}\n}\n`);
  console.log(`\n▶ wrote each file's time in this run to ${ORDER_FILE}`);
}

async function runPassFromTemplate(kind, env = {}) {
  const template = makeTemplate(kind);
  try {
    return await runPass(kind, files, { ...env, ...template.env });
  } finally {
    template.drop();
  }
}

{
  const started = Date.now();
  const count = await buildTests(BUILD);
  console.log(`\n▶ compiled ${count} TypeScript files for the suite into ${BUILD} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
}
const results = [];
if (only !== 'postgres') results.push(['PGlite', await runPassFromTemplate('pglite')]);
let skippedPostgres = false;
let withoutRedis = false;
if (only !== 'pglite') {
  if (await postgresAnswers()) {
    withoutRedis = !(await redisAnswers());
    await warnOfFewConnections();
    results.push(['PostgreSQL', await runPassFromTemplate('postgres', { TEST_REDIS_URL: withoutRedis ? '' : REDIS_URL })]);
  } else skippedPostgres = true;
}

rmSync(BUILD, { recursive: true, force: true });
if (recordOrder) writeOrder(results.map(([, r]) => r));
console.log('\n── summary ──');
const shown = (n) => (n === undefined ? '?' : n);
for (const [name, r] of results) {
  const c = r.counts;
  const slow = r.slow.length > 0 ? `, ${r.slow.length} over ${TEST_LIMIT_MS / 1000} s` : '';
  console.log(`${name}: ${shown(c.pass)} passed, ${shown(c.fail)} failed, ${shown(c.cancelled)} cancelled, ${shown(c.skipped)} skipped${c.todo ? `, ${c.todo} todo` : ''}${slow} (exit ${r.code})`);
}
// Each failed test again, with what it failed with: a CI log may keep only its end.
for (const [name, r] of results) {
  for (const t of r.failed) console.log(`✖ ${name}: ${where(t)}\n${t.failure.replace(/^/gm, '    ')}`);
}
const failures = results.flatMap(([name, r]) => problems(r).map((p) => `${name}: ${p}`));
if (skippedPostgres) {
  console.log(`PostgreSQL pass SKIPPED: no PostgreSQL answers at ${PG_SHOWN}`);
  // It answered at the start, then stopped.
  if (requirePostgres) failures.push(`--require-postgres: the PostgreSQL pass did not run (no PostgreSQL answers at ${PG_SHOWN})`);
}
if (withoutRedis) {
  console.log(`The PostgreSQL pass ran WITHOUT Redis (none answers at ${REDIS_URL}): the tests that need it were skipped`);
  if (requireRedis) failures.push(`CI=true: Redis stopped answering at ${REDIS_URL}; the tests that need it were skipped`);
}
const total = (key) => results.reduce((sum, [, r]) => sum + (r.counts[key] ?? 0), 0);
console.log(`${total('pass')} passed, ${total('fail')} failed, ${total('cancelled')} cancelled, ${total('skipped')} skipped`);
if (results.length === 0) failures.push('no pass ran');
if (failures.length > 0) {
  console.log(`✖ FAILED:\n${failures.map((f) => `  - ${f}`).join('\n')}`);
  process.exit(1);
}
console.log('✔ passed');
process.exit(0);
