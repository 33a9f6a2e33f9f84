#!/usr/bin/env node
// Compiles src/ into dist/ (ESM and .d.ts, tsc -p tsconfig.json). Run by `npm run build -w
// @teamlog/client`, by the root's `prepare` (so that `npm install` and `npm ci` build the library)
// and by this package's `prepack` (so that `npm pack -w @teamlog/client` packs it built). Not a
// `prepare` of this package: that would ship in the tarball's package.json, and npm would list it
// to whoever installs the tarball as an install script waiting for approval, though it never runs
// there (scripts/ is not packed).
// It does not regenerate the REST types: the committed src/generated/teamlog-api.ts is compiled as
// it is (`npm run generate` rewrites it; test/client-package.test.ts fails while it is stale), so
// that installing needs no service. Plain JavaScript: it runs before anything else is built.
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const CLIENT = fileURLToPath(new URL('..', import.meta.url));
const started = performance.now();
// dist/ emptied first: a file whose source was removed or renamed would otherwise be packed.
rmSync(path.join(CLIENT, 'dist'), { recursive: true, force: true });
// typescript is the repository's dev dependency (hoisted to its node_modules), found from here.
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
// Everything it says goes to stderr (tsc's stdout too): `npm pack --json` answers on stdout.
const run = spawnSync(process.execPath, [tsc, '-p', path.join(CLIENT, 'tsconfig.json')], { cwd: CLIENT, stdio: ['ignore', 2, 2] });
if (run.status !== 0) process.exit(run.status ?? 1);
console.error(`@teamlog/client: built dist/ in ${((performance.now() - started) / 1000).toFixed(1)} s`);
