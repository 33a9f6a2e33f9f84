// A typed client comes out of the OpenAPI document (issue 13): openapi-typescript generates
// types with named schemas and operations from the document the app serves, the example client
// in test/typed-client/client.ts type-checks against them (a schema change that breaks it fails
// here), misuses of the API do not, and the client works against a live server.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import openapiTS, { astToString } from 'openapi-typescript';
import { Client } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD } from './helpers/server.js';
import { tryTeamlog } from './typed-client/client.js';

const h = useTestServer();
const dir = mkdtempSync(path.join(tmpdir(), 'teamlog-typed-client-'));
after(() => rmSync(dir, { recursive: true, force: true }));

let generated = '';
h.before(async () => {
  const doc = (await new Client(h.server).get('/api/v1/openapi.json')).body;
  generated = astToString(await openapiTS(doc));
  writeFileSync(path.join(dir, 'teamlog-api.d.ts'), generated);
});

// Each line below must not compile against the generated types: were they loose (any, or
// unnamed), the @ts-expect-error directives would be unused, and that is an error too.
const MISUSE = `
import createClient from 'openapi-fetch';
import type { components, operations, paths } from './teamlog-api.js';

const api = createClient<paths>({ baseUrl: 'http://localhost' });
export async function misuse(): Promise<void> {
  // @ts-expect-error: a task needs a title
  await api.POST('/api/v1/tasks', { body: { project_id: 1 } });
  // @ts-expect-error: FINISHED is no status
  await api.PUT('/api/v1/tasks/{id}/status', { params: { path: { id: 1 } }, body: { status: 'FINISHED' } });
  // @ts-expect-error: the path parameter is required
  await api.GET('/api/v1/tasks/{id}', {});
  // @ts-expect-error: no such route
  await api.GET('/api/v1/taskz');
  const { data } = await api.GET('/api/v1/projects/{id}', { params: { path: { id: 1 } } });
  // @ts-expect-error: a project has no owner field
  console.log(data?.owner);
}
// @ts-expect-error: a problem's code is one of the contract's codes (issue 25)
const code: components['schemas']['Problem']['code'] = 'NO_SUCH_CODE';
// @ts-expect-error: allowed_transitions lists task statuses (issue 25)
const allowed: components['schemas']['Problem']['allowed_transitions'] = ['FINISHED'];
console.log(code, allowed);
const status: components['schemas']['TaskStatus'] = 'IN_REVIEW';
// @ts-expect-error: the login operation takes a body, not nothing
const body: operations['login']['requestBody'] = undefined;
console.log(status, body);
`;

test('openapi-typescript generates named schemas and operations', () => {
  for (const name of ['User', 'Project', 'Task', 'TaskPage', 'TaskStatus', 'Problem', 'LoginRequest', 'LoginResponse', 'CreateTaskRequest']) {
    assert.match(generated, new RegExp(`\\n        ${name}: `), `components.schemas.${name}`);
  }
  for (const op of ['login', 'createProject', 'listTasks', 'setTaskStatus', 'getProfile', 'exportAuditLog']) {
    assert.match(generated, new RegExp(`\\n    ${op}: \\{`), `operations.${op}`);
  }
  assert.match(generated, /"application\/problem\+json": components\["schemas"\]\["Problem"\]/);
});

test('the example client type-checks against the generated types, and misuses of the API do not', () => {
  copyFileSync(path.resolve('test/typed-client/client.ts'), path.join(dir, 'client.ts'));
  writeFileSync(path.join(dir, 'misuse.ts'), MISUSE);
  symlinkSync(path.resolve('node_modules'), path.join(dir, 'node_modules'), 'dir');
  writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022', 'DOM'], types: [],
        strict: true, noUncheckedIndexedAccess: true, noEmit: true, skipLibCheck: true,
      },
      files: ['client.ts', 'misuse.ts'],
    }),
  );
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', path.join(dir, 'tsconfig.json')], { encoding: 'utf8' });
  assert.equal(run.status, 0, `tsc:\n${run.stdout}${run.stderr}`);
});

test('the example client logs in, creates a project and a task, and lists the tasks', async () => {
  const { project, tasks } = await tryTeamlog(h.server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
  assert.match(project.name, /^Launch plan of /);
  assert.deepEqual(tasks.map((t) => [t.project_id, t.title, t.status]), [[project.id, 'Write the launch announcement', 'IN_PROGRESS']]);
});
