// The OpenAPI document as tools and people use it (issue 13): Spectral with spectral:oas and
// the OWASP API ruleset finds no error in it (.spectral.yaml says which rules are off and why);
// every operation has an operationId and tags; request and response bodies are named
// components with examples; errors are application/problem+json; the contract's headers are
// declared, and every one the server actually sends is declared where it sends it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { Client, type Response } from './helpers/client.js';
import { createProject } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();

interface Doc {
  openapi: string;
  info: { title: string };
  tags: Array<{ name: string }>;
  paths: Record<string, Record<string, any>>;
  components: Record<string, Record<string, any>>;
}

let doc: Doc;
h.before(async () => {
  const res = await new Client(h.server).get('/api/v1/openapi.json');
  assert.equal(res.status, 200);
  doc = res.body;
});

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
const operations = () =>
  Object.entries(doc.paths).flatMap(([p, item]) => METHODS.filter((m) => item[m]).map((m) => ({ method: m, path: p, op: item[m], name: `${m.toUpperCase()} ${p}` })));

/** A `#/components/...` reference resolved, or the object itself. */
function resolve(node: any): any {
  if (!node?.$ref) return node;
  const [, , kind, name] = node.$ref.split('/');
  const target = doc.components[kind]?.[name];
  assert.ok(target, `${node.$ref} resolves`);
  return target;
}

const responsesOf = (op: any): Array<[string, any]> => Object.entries(op.responses ?? {}).map(([s, r]) => [s, resolve(r)]);
const headerNames = (response: any) => Object.keys(response.headers ?? {}).map((n) => n.toLowerCase());
const paramNames = (op: any) => (op.parameters ?? []).map((p: any) => `${resolve(p).in}:${resolve(p).name.toLowerCase()}`);

describe('Spectral (spectral:oas and the OWASP API ruleset)', () => {
  test('finds no error in the document the app serves', (t) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'teamlog-openapi-'));
    try {
      const file = path.join(dir, 'openapi.json');
      writeFileSync(file, JSON.stringify(doc, null, 2));
      const cli = createRequire(import.meta.url).resolve('@stoplight/spectral-cli/dist/index.js');
      const run = spawnSync(process.execPath, [cli, 'lint', file, '--ruleset', path.resolve('.spectral.yaml'), '--format', 'json', '--fail-severity', 'error'], {
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
      });
      const start = run.stdout.indexOf('[');
      assert.ok(start >= 0, `Spectral printed no results (exit ${run.status}): ${run.stdout.slice(0, 500)} ${run.stderr.slice(0, 2000)}`);
      const results = JSON.parse(run.stdout.slice(start)) as Array<{ code: string; message: string; path: string[]; severity: number }>;
      const show = (r: (typeof results)[number]) => `${r.code} at ${r.path.join(' › ')}: ${r.message}`;
      const errors = results.filter((r) => r.severity === 0);
      const warnings = results.filter((r) => r.severity === 1);
      t.diagnostic(`Spectral: ${errors.length} error(s), ${warnings.length} warning(s)`);
      for (const w of warnings) t.diagnostic(`warning: ${show(w)}`);
      assert.deepEqual(errors.map(show), [], `Spectral found ${errors.length} error(s)`);
      assert.equal(run.status, 0, run.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('operations', () => {
  test('every operation has a unique operationId, tags declared at the top, a summary and a description', () => {
    const ids = new Map<string, string>();
    const declared = new Set(doc.tags.map((t) => t.name));
    for (const { op, name } of operations()) {
      assert.match(op.operationId ?? '', /^[a-z][A-Za-z0-9]+$/, `${name}: operationId`);
      assert.ok(!ids.has(op.operationId), `${name}: operationId ${op.operationId} is also ${ids.get(op.operationId)}`);
      ids.set(op.operationId, name);
      assert.ok(op.tags?.length > 0 && op.tags.every((t: string) => declared.has(t)), `${name}: tags ${op.tags} declared`);
      assert.ok(op.summary, `${name}: summary`);
      assert.ok(op.description, `${name}: description`);
    }
    assert.equal(ids.get('login'), 'POST /api/v1/auth/login');
    assert.equal(ids.get('createProject'), 'POST /api/v1/projects');
    assert.equal(ids.get('listTasks'), 'GET /api/v1/tasks');
  });

  test('the docs page is titled Teamlog API and no response reads "Default Response"', () => {
    assert.equal(doc.info.title, 'Teamlog API');
    for (const { op, name } of operations()) {
      for (const [status, response] of responsesOf(op)) {
        assert.ok(response.description && response.description !== 'Default Response', `${name} ${status}: ${response.description}`);
      }
    }
  });

  test('a route that needs no token says so (an empty security requirement); every other one names the bearer scheme', () => {
    for (const { op, name, path: p } of operations()) {
      const open = ['/api/v1/auth/login', '/api/v1/auth/refresh', '/api/v1/version', '/health/live', '/health/ready'].includes(p);
      assert.deepEqual(op.security, open ? [{}] : [{ bearer: [] }], name);
    }
    assert.match(doc.components.securitySchemes!.bearer.description, /RFC8725/);
  });
});

describe('bodies', () => {
  test('request and response bodies are named components, referenced with $ref', () => {
    for (const name of ['User', 'UserPage', 'LoginRequest', 'LoginResponse', 'TokenPair', 'Project', 'ProjectPage', 'ProjectMember', 'Task', 'TaskPage', 'TaskStatus',
      'CreateTaskRequest', 'Post', 'Message', 'Notification', 'AuditRecord', 'AuditRecordPage', 'Problem', 'AuditCheckpoint']) {
      assert.ok(doc.components.schemas![name], `components.schemas.${name}`);
    }
    const body = (method: string, p: string) => doc.paths[p]![method];
    assert.deepEqual(body('post', '/api/v1/tasks').requestBody.content['application/json'].schema, { $ref: '#/components/schemas/CreateTaskRequest' });
    assert.deepEqual(body('post', '/api/v1/tasks').responses['201'].content['application/json'].schema, { $ref: '#/components/schemas/Task' });
    assert.deepEqual(body('get', '/api/v1/tasks').responses['200'].content['application/json'].schema, { $ref: '#/components/schemas/TaskPage' });
    assert.deepEqual(doc.components.schemas!.TaskPage.properties.data.items, { $ref: '#/components/schemas/Task' });
    assert.deepEqual(doc.components.schemas!.LoginResponse.properties.user, { $ref: '#/components/schemas/User' });
    // Every JSON body under /api (but the export's streams and the version route's) is a named one.
    for (const { op, name, path: p } of operations()) {
      if (!p.startsWith('/api/v1/') || p === '/api/v1/version') continue;
      const media = [op.requestBody?.content?.['application/json'], ...responsesOf(op).map(([, r]) => r.content?.['application/json'])].filter(Boolean);
      for (const m of media) assert.match(m.schema.$ref ?? m.schema.items?.$ref ?? '', /^#\/components\/schemas\//, `${name}: a $ref`);
    }
  });

  test('every request and response body has a realistic example', () => {
    for (const { op, name } of operations()) {
      const bodies = [['request', op.requestBody], ...responsesOf(op)] as Array<[string, any]>;
      for (const [which, part] of bodies) {
        for (const [type, media] of Object.entries<any>(part?.content ?? {})) {
          assert.ok(media.example !== undefined || media.examples !== undefined, `${name} ${which} ${type}: an example`);
        }
      }
    }
    assert.equal(doc.paths['/api/v1/auth/login']!.post.requestBody.content['application/json'].example.email, 'ada@example.com');
  });

  test('every error response is application/problem+json with the Problem schema', () => {
    let count = 0;
    for (const { op, name } of operations()) {
      for (const [status, response] of responsesOf(op)) {
        if (Number(status) < 400) continue;
        count++;
        assert.deepEqual(Object.keys(response.content ?? {}), ['application/problem+json'], `${name} ${status}`);
        assert.deepEqual(response.content['application/problem+json'].schema, { $ref: '#/components/schemas/Problem' }, `${name} ${status}`);
        assert.equal(response.content['application/problem+json'].example.status, Number(status), `${name} ${status}: example`);
      }
    }
    assert.ok(count > 100, `${count} error responses`);
  });
});

describe('headers (docs/api.md section 1)', () => {
  test('API-Version and X-Request-Id on every response; RateLimit-* on every /api one; Retry-After on 429 and 503', () => {
    for (const { op, name, path: p } of operations()) {
      for (const [status, response] of responsesOf(op)) {
        const names = headerNames(response);
        assert.ok(names.includes('api-version') && names.includes('x-request-id'), `${name} ${status}: ${names}`);
        if (p.startsWith('/api/')) {
          for (const h of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) assert.ok(names.includes(h), `${name} ${status}: ${h}`);
        }
        if (status === '429' || status === '503') assert.ok(names.includes('retry-after'), `${name} ${status}: Retry-After`);
      }
    }
  });

  test('GETs take If-None-Match and answer ETag (and 304); lists answer Link; POSTs take Idempotency-Key; If-Match where a PUT takes it', () => {
    for (const { op, name, method, path: p } of operations()) {
      if (!p.startsWith('/api/v1/')) continue;
      const params = paramNames(op);
      assert.ok(params.includes('header:x-request-id'), `${name}: X-Request-Id`);
      // A streamed answer (the export) is never whole in memory: no ETag, so no 304 either.
      const streamed = Object.keys(resolve(op.responses['200'])?.content ?? {}).some((t) => t === 'application/x-ndjson' || t === 'text/csv');
      if (method === 'get' && streamed) {
        assert.ok(!params.includes('header:if-none-match') && !op.responses['304'], `${name}: no If-None-Match, no 304`);
      } else if (method === 'get') {
        assert.ok(params.includes('header:if-none-match'), `${name}: If-None-Match`);
        assert.ok(headerNames(resolve(op.responses['200'])).includes('etag'), `${name}: ETag`);
        assert.ok(op.responses['304'], `${name}: 304`);
      }
      if (method === 'post') assert.equal(params.includes('header:idempotency-key'), !p.startsWith('/api/v1/auth/'), `${name}: Idempotency-Key`);
    }
    for (const p of ['/api/v1/tasks', '/api/v1/users', '/api/v1/projects/{id}/members', '/api/v1/audit-logs']) {
      assert.ok(headerNames(doc.paths[p]!.get.responses['200']).includes('link'), `GET ${p}: Link`);
    }
    for (const [method, p] of [['put', '/api/v1/tasks/{id}/status'], ['put', '/api/v1/users/{id}'], ['put', '/api/v1/projects/{id}/members/{userId}'], ['delete', '/api/v1/posts/{id}/like']]) {
      const op = doc.paths[p!]![method!];
      assert.ok(paramNames(op).includes('header:if-match'), `${method} ${p}: If-Match`);
      assert.ok(headerNames(op.responses['200']).includes('etag'), `${method} ${p}: ETag`);
      assert.ok(op.responses['412'], `${method} ${p}: 412`);
    }
  });

  test('a problem\'s code is the enum of the contract\'s codes, and its extensions are typed (issue 25)', () => {
    const problem = doc.components.schemas!.Problem;
    const codes: string[] = problem.properties.code.enum;
    for (const code of ['VALIDATION_FAILED', 'INVALID_QUERY', 'TOKEN_EXPIRED', 'TOKEN_REVOKED', 'INVALID_TRANSITION', 'LAST_OWNER', 'IDEMPOTENCY_KEY_REUSED', 'PRECONDITION_FAILED', 'RATE_LIMITED', 'UNAVAILABLE', 'INTERNAL']) {
      assert.ok(codes.includes(code), code);
    }
    assert.equal(new Set(codes).size, codes.length, 'each code once');
    assert.deepEqual(problem.properties.allowed_transitions.items.enum, ['TODO', 'IN_PROGRESS', 'IN_REVIEW', 'DONE', 'CANCELED']);
    assert.equal(problem.properties.errors.items.properties.field.type, 'string');
    assert.deepEqual(Object.keys(problem.properties.projects.items.properties), ['id', 'name']);
  });

  test('a page\'s next_cursor can be passed back as ?cursor= as it is: the parameter takes a string or null (issue 25)', () => {
    for (const { op, name } of operations()) {
      for (const p of (op.parameters ?? []).map(resolve)) {
        if (p.in === 'query' && p.name === 'cursor') assert.deepEqual(p.schema.type, ['string', 'null'], name);
      }
    }
    assert.deepEqual(doc.components.schemas!.TaskPage.properties.next_cursor.type, ['string', 'null']);
  });

  // The contract's headers that the server sent on a response: each must be declared there.
  const CONTRACT_HEADERS = [
    'api-version', 'x-request-id', 'etag', 'link', 'location', 'retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'cache-control', 'idempotent-replayed',
  ];

  function assertDeclared(method: string, templatePath: string, res: Response) {
    const op = doc.paths[templatePath]?.[method];
    assert.ok(op, `${method} ${templatePath} is documented`);
    const response = resolve(op.responses[String(res.status)]);
    assert.ok(response, `${method} ${templatePath} documents ${res.status}`);
    const declared = headerNames(response);
    const sent = CONTRACT_HEADERS.filter((name) => res.headers.has(name));
    assert.deepEqual(sent.filter((name) => !declared.includes(name)), [], `${method.toUpperCase()} ${templatePath} ${res.status}: sent but not declared`);
    if (res.status >= 400) assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
  }

  test('every contract header the server sends on a response is declared for that operation and status', async () => {
    const c = new Client(h.server);
    const token = h.admin.token;
    assertDeclared('post', '/api/v1/auth/login', await c.post('/api/v1/auth/login', { email: 'nobody@example.com', password: 'wrong password' }));
    const first = await createProject(h.admin);
    await createProject(h.admin);
    const key = { 'idempotency-key': `k-${Date.now()}` };
    const created = await c.post('/api/v1/projects', { name: 'Documented headers' }, { token, headers: key });
    assertDeclared('post', '/api/v1/projects', created);
    assert.ok(created.headers.get('location') && created.headers.get('etag'));
    const replayed = await c.post('/api/v1/projects', { name: 'Documented headers' }, { token, headers: key });
    assert.equal(replayed.headers.get('idempotent-replayed'), 'true');
    assertDeclared('post', '/api/v1/projects', replayed);
    const list = await c.get('/api/v1/projects?limit=1', { token });
    assert.ok(list.headers.get('link'), 'a first page of one has a next page');
    assertDeclared('get', '/api/v1/projects', list);
    const got = await c.get(`/api/v1/projects/${first.id}`, { token });
    assertDeclared('get', '/api/v1/projects/{id}', got);
    assertDeclared('get', '/api/v1/projects/{id}', await c.get(`/api/v1/projects/${first.id}`, { token, headers: { 'if-none-match': got.headers.get('etag')! } }));
    const put = await c.put(`/api/v1/projects/${first.id}`, { description: 'Changed' }, { token, headers: { 'if-match': got.headers.get('etag')! } });
    assertDeclared('put', '/api/v1/projects/{id}', put);
    assertDeclared('put', '/api/v1/projects/{id}', await c.put(`/api/v1/projects/${first.id}`, { description: 'Again' }, { token, headers: { 'if-match': got.headers.get('etag')! } }));
    const task = await c.post('/api/v1/tasks', { project_id: first.id, title: 'Check the headers' }, { token });
    assertDeclared('post', '/api/v1/tasks', task);
    assertDeclared('put', '/api/v1/tasks/{id}/status', await c.put(`/api/v1/tasks/${task.body.id}/status`, { status: 'DONE' }, { token }));
    assertDeclared('get', '/api/v1/tasks/{id}', await c.get('/api/v1/tasks/999999', { token }));
    assertDeclared('get', '/api/v1/tasks', await c.get('/api/v1/tasks'));
    assertDeclared('get', '/api/v1/tasks', await c.get('/api/v1/tasks?limit=0', { token }));
    assertDeclared('delete', '/api/v1/tasks/{id}', await c.delete(`/api/v1/tasks/${task.body.id}`, { token }));
    assertDeclared('get', '/health/ready', await c.get('/health/ready'));
  });
});
