// @teamlog/client as a package (issue 25): its committed REST types are what openapi-typescript
// makes of the document the service serves now (regenerate with `npm run generate -w
// @teamlog/client` when this fails); it compiles with the browser's library and no Node types
// (no Node-only import); it bundles for the browser, and the bundle without socket.io-client
// stays under 10 KB gzipped, the figure its README states.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bundleSize } from '../client/scripts/size.js';
import { TYPES_FILE, typesFrom } from '../client/scripts/types.js';
import { Client } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';

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
