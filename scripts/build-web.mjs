#!/usr/bin/env node
// The service's browser pages, each bundled by esbuild (TypeScript, resolving @teamlog/client to
// client/src/ through tsconfig.web.json, and taking the transparency log's runtime-neutral code
// from src/tlog/, which the console's Verify shares with the server) into dist/web/<page>/, its
// script and styles named by a hash of their content, and an index.html naming them:
//   console  web/console/ -> dist/web/console/   the audit console, GET /console (src/modules/audit/console.routes.ts)
//   demo     web/demo/    -> dist/web/demo/      the real-time demo, GET /realtime-demo (src/realtime/demo-page.ts)
// The HTML is served uncached and the hashed files immutable, so that a browser never runs the
// script of an older release against a newer server (nor the reverse).
//
//   node scripts/build-web.mjs [--if-changed]   (scripts/build.mjs runs it after tsc)
//
// Fails when a page's shipped JavaScript is over its budget, 60 KB gzipped: the console must
// load fast on a slow connection, when an incident is under way.
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { inputsHash } from './inputs-hash.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const WEB_OUT = path.join(ROOT, 'dist/web');
const STAMP = path.join(WEB_OUT, '.build-stamp');
/** What the bundles depend on: their sources, the client library's (client/src/, through tsconfig.web.json's paths) and src/tlog/'s (imported by web/console/verify.ts), this script, its tsconfig, the installed packages. */
const INPUTS = ['web', 'client/src', 'src/tlog', 'scripts/build-web.mjs', 'tsconfig.web.json', 'package-lock.json'];
const JS_BUDGET_GZIP = 60 * 1024;

/**
 * Each page: its sources, its entry points, and the format of its script. The demo's is a
 * classic script at the end of its body (an IIFE), the console's a module.
 */
const PAGES = [
  { name: 'console', script: 'main.ts', style: 'console.css', format: 'esm' },
  { name: 'demo', script: 'main.ts', style: 'demo.css', format: 'iife' },
];
/** Builds one page into dist/web/<name>/; answers the gzipped size of its JavaScript, in bytes. */
async function buildPage(esbuild, page, quiet) {
  const source = path.join(ROOT, 'web', page.name);
  const out = path.join(WEB_OUT, page.name);
  mkdirSync(out, { recursive: true });
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: { [page.name]: path.join(source, page.script), [`${page.name}-style`]: path.join(source, page.style) },
    outdir: out,
    entryNames: '[name]-[hash]',
    bundle: true,
    format: page.format,
    platform: 'browser',
    // Web Crypto's Ed25519 is newer than any of these; the console says so where it is missing.
    target: ['es2022', 'chrome109', 'firefox115', 'safari16'],
    minify: true,
    sourcemap: 'linked',
    legalComments: 'linked',
    tsconfig: path.join(ROOT, 'tsconfig.web.json'),
    metafile: true,
    logLevel: 'warning',
  });
  const outputs = Object.entries(result.metafile.outputs).map(([file, meta]) => ({ file: path.basename(file), entry: meta.entryPoint }));
  const script = outputs.find((o) => o.entry?.endsWith(page.script))?.file;
  const style = outputs.find((o) => o.entry?.endsWith(page.style))?.file;
  if (!script || !style) throw new Error(`build-web: esbuild wrote no script or no stylesheet for web/${page.name}/`);
  const gzipBytes = outputs
    .filter((o) => o.file.endsWith('.js'))
    .reduce((sum, o) => sum + gzipSync(readFileSync(path.join(out, o.file)), { level: 9 }).length, 0);
  if (gzipBytes >= JS_BUDGET_GZIP) throw new Error(`build-web: web/${page.name}/'s JavaScript is ${gzipBytes} bytes gzipped, over its ${JS_BUDGET_GZIP}-byte budget`);
  const html = readFileSync(path.join(source, 'index.html'), 'utf8').replaceAll('{{script}}', script).replaceAll('{{style}}', style);
  writeFileSync(path.join(out, 'index.html'), html);
  writeFileSync(path.join(out, 'build.json'), `${JSON.stringify({ script, style, gzipBytes })}\n`);
  if (!quiet) console.log(`Built dist/web/${page.name}/ (${script}: ${(gzipBytes / 1024).toFixed(1)} KB of JavaScript gzipped)`);
  return gzipBytes;
}

/** The sizes of the build in dist/web/ when it is of these inputs, else undefined. */
function current(hash) {
  const built = PAGES.every((page) => existsSync(path.join(WEB_OUT, page.name, 'build.json')));
  if (!built || !existsSync(STAMP) || readFileSync(STAMP, 'utf8').trim() !== hash) return undefined;
  return Object.fromEntries(PAGES.map((page) => [page.name, Number(JSON.parse(readFileSync(path.join(WEB_OUT, page.name, 'build.json'), 'utf8')).gzipBytes)]));
}

/**
 * One build at a time: test files started together (each builds the page it drives) wait for
 * the first, then find its build current, instead of deleting the files it is writing.
 */
async function locked(fn) {
  const lock = path.join(ROOT, 'dist/.build-web.lock');
  mkdirSync(path.dirname(lock), { recursive: true });
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      // Left by a build that died: older than a build ever takes.
      const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 120_000) rmSync(lock, { recursive: true, force: true });
      else await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Builds dist/web/; answers the gzipped size of each page's JavaScript, in bytes, by page name. */
export async function buildWeb({ ifChanged = false, quiet = false } = {}) {
  const hash = inputsHash(INPUTS);
  const ready = ifChanged ? current(hash) : undefined;
  if (ready) return { gzipBytes: ready, built: false };
  return locked(async () => {
    // Built meanwhile by the holder of the lock.
    const done = ifChanged ? current(hash) : undefined;
    if (done) return { gzipBytes: done, built: false };
    const esbuild = await import('esbuild');
    rmSync(WEB_OUT, { recursive: true, force: true });
    const gzipBytes = {};
    for (const page of PAGES) gzipBytes[page.name] = await buildPage(esbuild, page, quiet);
    // Written last: an interrupted build leaves no stamp claiming it succeeded.
    writeFileSync(STAMP, `${hash}\n`);
    return { gzipBytes, built: true };
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await buildWeb({ ifChanged: process.argv.includes('--if-changed') });
}
