#!/usr/bin/env node
// npm test: typecheck, lint, then the whole suite twice: on embedded PGlite and on
// PostgreSQL (each test file creates and drops its own database). Where no PostgreSQL
// answers, the PostgreSQL pass is skipped and the summary says so plainly.
//   --only pglite|postgres   run one pass
//   --no-checks              skip typecheck and lint
//   any other argument       test files to run instead of all of them
import { spawnSync, spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';

const args = process.argv.slice(2);
const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;
const checks = !args.includes('--no-checks');
const named = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--only');
const PG_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

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

function runPass(kind, files) {
  return new Promise((resolve) => {
    console.log(`\n▶ test suite on ${kind === 'postgres' ? 'PostgreSQL' : 'embedded PGlite'} (${files.length} files)`);
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=180000', '--test-reporter=spec', ...files],
      { env: { ...process.env, TEST_DB: kind }, stdio: ['ignore', 'pipe', 'inherit'] },
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
if (only !== 'pglite') {
  if (await postgresAnswers()) results.push(['PostgreSQL', await runPass('postgres', files)]);
  else skippedPostgres = true;
}

console.log('\n── summary ──');
for (const [name, r] of results) console.log(`${name}: ${r.pass} passed, ${r.fail} failed, ${r.skipped} skipped (exit ${r.code})`);
if (skippedPostgres) console.log(`PostgreSQL pass SKIPPED: no PostgreSQL answers at ${PG_URL.replace(/\/\/[^@]*@/, '//')}`);
const total = results.reduce((t, [, r]) => ({ pass: t.pass + r.pass, fail: t.fail + r.fail, skipped: t.skipped + r.skipped }), { pass: 0, fail: 0, skipped: 0 });
const failed = results.some(([, r]) => r.code !== 0) || total.fail > 0;
console.log(`${total.pass} passed, ${total.fail} failed, ${total.skipped} skipped`);
process.exit(failed ? 1 : 0);
