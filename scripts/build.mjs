#!/usr/bin/env node
// npm run build: compiles src/ into dist/ (tsc -p tsconfig.build.json), then writes beside it
//   dist/.build-stamp     a hash of everything the compiled output depends on
//   dist/build-info.json  the commit it was built from (git rev-parse HEAD), for /api/v1/version
//   dist/web/             the browser pages: the audit console and the real-time demo (scripts/build-web.mjs, from web/)
//
//   --if-changed   compile only when the inputs' hash differs from the stamp, or dist/ lacks an
//                  entry point (what `npm start` runs, so that a second start does not recompile)
//                  (the hash: scripts/inputs-hash.mjs)
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { buildWeb } from './build-web.mjs';
import { inputsHash } from './inputs-hash.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = path.join(ROOT, 'dist');
const STAMP = path.join(DIST, '.build-stamp');
const BUILD_INFO = path.join(DIST, 'build-info.json');
/** What tsc and esbuild read: the sources, their configuration, and the installed packages' versions. */
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json', 'web', 'client/src', 'tsconfig.web.json', 'scripts/build-web.mjs'];
const ENTRY_POINTS = ['server.js', 'cli.js', 'seed.js', 'web/console/index.html', 'web/demo/index.html'];

function currentCommit() {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  } catch {
    return undefined; // no git, or not a checkout (a container build): TEAMLOG_COMMIT can say it
  }
}

/** Rewritten only when it changes, so that an unchanged tree leaves dist/ as it was. */
function writeBuildInfo() {
  const commit = currentCommit();
  const text = `${JSON.stringify(commit ? { commit } : {})}\n`;
  const old = existsSync(BUILD_INFO) ? readFileSync(BUILD_INFO, 'utf8') : undefined;
  if (old !== text) writeFileSync(BUILD_INFO, text);
}

const ifChanged = process.argv.includes('--if-changed');
const started = performance.now();
const hash = inputsHash(INPUTS);
const upToDate =
  existsSync(STAMP) && readFileSync(STAMP, 'utf8').trim() === hash && ENTRY_POINTS.every((f) => existsSync(path.join(DIST, f)));

if (ifChanged && upToDate) {
  writeBuildInfo();
  console.log(`dist/ is up to date with src/ (checked in ${Math.round(performance.now() - started)} ms)`);
} else {
  if (ifChanged) console.log('src/ changed since the last build: compiling into dist/');
  const tsc = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', path.join(ROOT, 'tsconfig.build.json')], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  if (tsc.status !== 0) process.exit(tsc.status ?? 1);
  await buildWeb();
  mkdirSync(DIST, { recursive: true });
  writeBuildInfo();
  // Written last: an interrupted or failed compile leaves no stamp claiming it succeeded.
  writeFileSync(STAMP, `${hash}\n`);
  console.log(`Built dist/ in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
