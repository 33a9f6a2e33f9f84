// The suite as JavaScript, for scripts/test.mjs: a mirror of the repository in which every
// TypeScript file of src/, test/, scripts/ and client/ has its compiled .js beside it (esbuild,
// no type check: `npm test` runs tsc first), and every other file and folder is a symlink to the
// repository's own. Run from it, a test process, and every server and CLI process a test
// starts, loads plain JavaScript instead of compiling each module through tsx's loader: that
// was a second of CPU per process, and a run starts several hundred of them.
//
// A mirror rather than dist/: paths stay what the sources expect (`new URL('../../migrations/',
// import.meta.url)` finds the migrations, test/helpers/paths.ts finds the repository), and
// packages resolve through the mirror's node_modules symlink. The original .ts files are
// mirrored too, so that code reading a source file by its path still finds it.
import { build } from 'esbuild';
import { mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Folders whose TypeScript is compiled into the mirror; everything else is linked whole. */
const COMPILED = ['src', 'test', 'scripts', 'client'];
/** Never mirrored: build output and the mirror's own kind. */
const SKIPPED = new Set(['.git', 'client/dist', 'client/node_modules']);

/** Links `rel`'s entries into `out`, descending into the compiled folders; returns their TypeScript files. */
function mirror(rel, out, compiledHere) {
  const sources = [];
  mkdirSync(path.join(out, rel), { recursive: true });
  for (const entry of readdirSync(path.join(ROOT, rel), { withFileTypes: true })) {
    const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
    if (SKIPPED.has(child)) continue;
    const descend = entry.isDirectory() && (compiledHere || COMPILED.includes(child));
    if (descend) {
      sources.push(...mirror(child, out, true));
      continue;
    }
    symlinkSync(path.join(ROOT, child), path.join(out, child));
    if (compiledHere && entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) sources.push(child);
  }
  return sources;
}

/** Writes the mirror into `out` (replacing what is there) and returns how many files it compiled. */
export async function buildTests(out) {
  rmSync(out, { recursive: true, force: true });
  const sources = mirror('', out, false);
  await build({
    entryPoints: sources.map((rel) => path.join(ROOT, rel)),
    outdir: out,
    outbase: ROOT,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // Failures name the TypeScript line (node --enable-source-maps).
    sourcemap: 'inline',
    bundle: false,
    logLevel: 'warning',
  });
  return sources.length;
}
