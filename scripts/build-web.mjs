#!/usr/bin/env node
// The audit console's browser files (GET /console, src/modules/audit/console.routes.ts): bundles
// web/console/main.ts (Preact, htm, socket.io-client and the page's own code) and its styles
// with esbuild into dist/web/console/, each file named by a hash of its content, and writes
// index.html naming them. The HTML is served no-cache and the hashed files immutable, so that a
// browser never runs the script of an older release against a newer server (nor the reverse).
//
//   node scripts/build-web.mjs [--if-changed]   (scripts/build.mjs runs it after tsc)
//
// Fails when the shipped JavaScript is over its budget, 60 KB gzipped: the page must load fast
// on a slow connection, when an incident is under way.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SOURCE = path.join(ROOT, 'web/console');
export const WEB_OUT = path.join(ROOT, 'dist/web/console');
const STAMP = path.join(WEB_OUT, '.build-stamp');
/** What the bundle depends on: its sources and the client library's (client/src/, through tsconfig.web.json's paths), this script, its tsconfig, the installed packages. */
const INPUTS = ['web', 'client/src', 'scripts/build-web.mjs', 'tsconfig.web.json', 'package-lock.json'];
const JS_BUDGET_GZIP = 60 * 1024;

function listFiles(p) {
  if (!existsSync(p)) return [];
  if (!statSync(p).isDirectory()) return [p];
  return readdirSync(p)
    .sort()
    .flatMap((name) => listFiles(path.join(p, name)));
}

function inputsHash() {
  const hash = createHash('sha256');
  for (const file of INPUTS.flatMap((input) => listFiles(path.join(ROOT, input)))) {
    hash.update(path.relative(ROOT, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex');
}

/** Builds dist/web/console/; answers the gzipped size of the JavaScript shipped, in bytes. */
export async function buildWeb({ ifChanged = false, quiet = false } = {}) {
  const hash = inputsHash();
  const index = path.join(WEB_OUT, 'index.html');
  if (ifChanged && existsSync(index) && existsSync(STAMP) && readFileSync(STAMP, 'utf8').trim() === hash) {
    return { gzipBytes: Number(JSON.parse(readFileSync(path.join(WEB_OUT, 'build.json'), 'utf8')).gzipBytes), built: false };
  }
  const esbuild = await import('esbuild');
  rmSync(WEB_OUT, { recursive: true, force: true });
  mkdirSync(WEB_OUT, { recursive: true });
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: { console: path.join(SOURCE, 'main.ts'), 'console-style': path.join(SOURCE, 'console.css') },
    outdir: WEB_OUT,
    entryNames: '[name]-[hash]',
    bundle: true,
    format: 'esm',
    platform: 'browser',
    // Web Crypto's Ed25519 is newer than any of these; the page says so where it is missing.
    target: ['es2022', 'chrome109', 'firefox115', 'safari16'],
    minify: true,
    sourcemap: 'linked',
    legalComments: 'linked',
    tsconfig: path.join(ROOT, 'tsconfig.web.json'),
    metafile: true,
    logLevel: 'warning',
  });
  const outputs = Object.entries(result.metafile.outputs).map(([file, meta]) => ({ file: path.basename(file), entry: meta.entryPoint }));
  const script = outputs.find((o) => o.entry?.endsWith('main.ts'))?.file;
  const style = outputs.find((o) => o.entry?.endsWith('console.css'))?.file;
  if (!script || !style) throw new Error('build-web: esbuild wrote no script or no stylesheet');
  const gzipBytes = outputs
    .filter((o) => o.file.endsWith('.js'))
    .reduce((sum, o) => sum + gzipSync(readFileSync(path.join(WEB_OUT, o.file)), { level: 9 }).length, 0);
  if (gzipBytes >= JS_BUDGET_GZIP) throw new Error(`build-web: the console's JavaScript is ${gzipBytes} bytes gzipped, over its ${JS_BUDGET_GZIP}-byte budget`);
  const html = readFileSync(path.join(SOURCE, 'index.html'), 'utf8').replaceAll('{{script}}', script).replaceAll('{{style}}', style);
  writeFileSync(index, html);
  writeFileSync(path.join(WEB_OUT, 'build.json'), `${JSON.stringify({ script, style, gzipBytes })}\n`);
  // Written last: an interrupted build leaves no stamp claiming it succeeded.
  writeFileSync(STAMP, `${hash}\n`);
  if (!quiet) console.log(`Built dist/web/console/ (${script}: ${(gzipBytes / 1024).toFixed(1)} KB of JavaScript gzipped)`);
  return { gzipBytes, built: true };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await buildWeb({ ifChanged: process.argv.includes('--if-changed') });
}
