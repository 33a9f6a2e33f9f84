#!/usr/bin/env node
// npm test: typecheck, lint, then the whole suite twice: on embedded PGlite, and on PostgreSQL
// with Redis, as several instances run in production (each test file creates and drops its
// own database). Where no PostgreSQL answers, the PostgreSQL pass is skipped; where no Redis
// answers, the tests that need it are; the summary says so plainly.
//   --only pglite|postgres   run one pass
//   --no-checks              skip typecheck and lint
//   any other argument       test files to run instead of all of them
import { spawnSync, spawn } from 'node:child_process';
import net from 'node:net';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';

const args = process.argv.slice(2);
const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;
const checks = !args.includes('--no-checks');
const named = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--only');
const PG_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

function findTests(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    if (name === 'node_modules' || name === 'helpers') return [];
    if (statSync(p).isDirectory()) return findTests(p);
    return name.endsWith('.test.ts') ? [p] : [];
  });
}

function step(title, cmd, cmdArgs) {
  console.log(`\n▶ ${title}`);
  const r = spawnSync(cmd, cmdArgs, { stdio: 'inherit' });
  if (r.status !== 0) {
    console.log(`✖ ${title} failed`);
    process.exit(r.status ?? 1);
  }
}

async function postgresAnswers() {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    await c.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => {});
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

function runPass(kind, files, env = {}) {
  return new Promise((resolve) => {
    console.log(`\n▶ test suite on ${kind === 'postgres' ? 'PostgreSQL' : 'embedded PGlite'} (${files.length} files)`);
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=180000', '--test-reporter=spec', ...files],
      { env: { ...process.env, ...env, TEST_DB: kind }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const counts = { pass: 0, fail: 0, skipped: 0 };
    let buffer = '';
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk);
      buffer += chunk.toString();
    });
    child.on('close', (code) => {
      for (const key of Object.keys(counts)) {
        const m = buffer.match(new RegExp(`^ℹ ${key} (\\d+)$`, 'm'));
        if (m) counts[key] = Number(m[1]);
      }
      resolve({ code: code ?? 1, ...counts });
    });
  });
}

const files = named.length > 0 ? named : findTests('test').concat(findTests('src')).sort();
if (checks) {
  step('typecheck (tsc --noEmit)', process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json', '--noEmit']);
  step('lint (eslint)', process.execPath, ['node_modules/eslint/bin/eslint.js', '.']);
}

const results = [];
if (only !== 'postgres') results.push(['PGlite', await runPass('pglite', files)]);
let skippedPostgres = false;
let withoutRedis = false;
if (only !== 'pglite') {
  if (await postgresAnswers()) {
    withoutRedis = !(await redisAnswers());
    results.push(['PostgreSQL', await runPass('postgres', files, { TEST_REDIS_URL: withoutRedis ? '' : REDIS_URL })]);
  } else skippedPostgres = true;
}

console.log('\n── summary ──');
for (const [name, r] of results) console.log(`${name}: ${r.pass} passed, ${r.fail} failed, ${r.skipped} skipped (exit ${r.code})`);
if (skippedPostgres) console.log(`PostgreSQL pass SKIPPED: no PostgreSQL answers at ${PG_URL.replace(/\/\/[^@]*@/, '//')}`);
if (withoutRedis) console.log(`The PostgreSQL pass ran WITHOUT Redis (none answers at ${REDIS_URL}): the tests that need it were skipped`);
const total = results.reduce((t, [, r]) => ({ pass: t.pass + r.pass, fail: t.fail + r.fail, skipped: t.skipped + r.skipped }), { pass: 0, fail: 0, skipped: 0 });
const failed = results.some(([, r]) => r.code !== 0) || total.fail > 0;
console.log(`${total.pass} passed, ${total.fail} failed, ${total.skipped} skipped`);
process.exit(failed ? 1 : 0);
