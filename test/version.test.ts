// GET /api/v1/version and `teamlog --version`: what is running, without logging in.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { useTestServer } from './helpers/harness.js';
import { entryArgs, ROOT } from './helpers/paths.js';

const COMMIT = '1c49ad4f0b5e2d7a9c3e8f6a1b2c3d4e5f6a7b8c';
const h = useTestServer({ env: { TEAMLOG_COMMIT: COMMIT } });
const packageVersion = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

test('GET /api/v1/version answers without authentication: version, commit and the process start', async () => {
  const before = Date.now();
  const res = await fetch(`${h.server.url}/api/v1/version`);
  assert.equal(res.status, 200);
  const body = (await res.json()) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ['commit', 'started_at', 'version']);
  assert.equal(body.version, packageVersion);
  assert.equal(body.commit, COMMIT);
  assert.match(String(body.started_at), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  const started = Date.parse(String(body.started_at));
  assert.ok(started <= before && before - started < 24 * 3600_000, `started_at ${String(body.started_at)}`);
  // The alias without the version segment is the same route.
  assert.equal((await fetch(`${h.server.url}/api/version`)).status, 200);
});

test('the route is documented: operationId getVersion, tag operations, an example, no security', async () => {
  const doc = (await (await fetch(`${h.server.url}/api/v1/openapi.json`)).json()) as any;
  const op = doc.paths['/api/v1/version']?.get;
  assert.ok(op, 'GET /api/v1/version is not in the document');
  assert.equal(op.operationId, 'getVersion');
  assert.deepEqual(op.tags, ['operations']);
  assert.ok(!op.security || op.security.length === 0 || op.security.some((s: object) => Object.keys(s).length === 0));
  assert.ok(JSON.stringify(op.responses['200']).includes('"examples"'), 'no example on the 200 response');
});

test('npx teamlog --version prints the version (and the commit from TEAMLOG_COMMIT)', () => {
  const run = (env: Record<string, string>) =>
    spawnSync(process.execPath, [...entryArgs('src/cli'), '--version'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' });
  const plain = run({});
  assert.equal(plain.status, 0, plain.stderr);
  assert.match(plain.stdout, new RegExp(`^teamlog ${packageVersion.replaceAll('.', '\\.')}( \\(commit [0-9a-f]+\\))?\\n$`));
  const withCommit = run({ TEAMLOG_COMMIT: COMMIT });
  assert.equal(withCommit.stdout, `teamlog ${packageVersion} (commit ${COMMIT})\n`);
});
