// Operations endpoints: liveness, readiness (and its recovery after a database outage),
// Prometheus metrics, the interactive reference and the OpenAPI document.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { APP_ROLE, createPostgresDatabase } from '../src/db/postgres.js';
import { runMaintenance } from '../src/ops/maintenance.js';
import { Client, loginAdmin } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { createTestDatabase, needsPostgres, startTestServer, type TestServer } from './helpers/server.js';
import { pathOfRoute, routeOfPath, servedRoutes } from './helpers/routes.js';
import { sleep } from './helpers/sockets.js';
import { TcpProxy } from './helpers/tcp-proxy.js';

const h = useTestServer();

/** The /api/v1 routes the app serves, as [METHOD, path] pairs, read from Fastify's route tree. */
function servedApiRoutes(app: TestServer['app']): Array<[string, string]> {
  return servedRoutes(app).filter((r) => r.url.startsWith('/api/v1/')).map((r) => [r.method, r.url]);
}

describe('health', () => {
  test('/health/live answers 200', async () => {
    const res = await new Client(h.server).get('/health/live');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ok' });
    assert.equal(res.headers.get('cache-control'), 'no-store');
  });

  test('/health/ready answers 200 while the database is up', async () => {
    const res = await new Client(h.server).get('/health/ready');
    assert.equal(res.status, 200);
    assert.equal(res.body.status, 'ready');
    assert.equal(res.body.database, h.server.db.kind);
  });

  test('answers 503 UNAVAILABLE with Retry-After while PostgreSQL is unreachable, and becomes ready again by itself', { skip: needsPostgres }, async () => {
    const database = await createTestDatabase();
    const target = new URL(database.databaseUrl!);
    const proxy = new TcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const port = await proxy.start();
    const proxied = new URL(database.databaseUrl!);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(port);
    const appDb = createPostgresDatabase({ url: proxied.toString(), poolSize: 4, role: APP_ROLE, onError: () => {} });
    const cut = await startTestServer({ database: { ...database, db: appDb, drop: async () => {} } });
    try {
      const admin = await loginAdmin(cut);
      const client = admin.client;
      assert.equal((await client.get('/health/ready')).status, 200);

      await proxy.stop();

      const ready = await client.get('/health/ready');
      assert.equal(ready.status, 503);
      assert.match(ready.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.equal(ready.body.code, 'UNAVAILABLE');
      assert.match(ready.headers.get('retry-after') ?? '', /^[1-9]\d*$/);

      const read = await client.get(`/api/v1/users/${admin.id}`, { token: admin.token });
      assert.equal(read.status, 503);
      assert.equal(read.body.code, 'UNAVAILABLE');
      assert.match(read.headers.get('retry-after') ?? '', /^[1-9]\d*$/);

      const projectName = `outage-${port}`;
      const write = await client.post('/api/v1/projects', { name: projectName }, { token: admin.token });
      assert.equal(write.status, 503);
      assert.equal(write.body.code, 'UNAVAILABLE');

      await proxy.start(port);

      let status = 0;
      for (let attempt = 0; attempt < 100 && status !== 200; attempt++) {
        if (attempt > 0) await sleep(100);
        status = (await client.get('/health/ready')).status;
      }
      assert.equal(status, 200, 'readiness did not recover after the database came back');
      assert.equal((await client.get(`/api/v1/users/${admin.id}`, { token: admin.token })).status, 200);
      // The refused write left nothing behind.
      const rows = await database.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM projects WHERE name = $1', [projectName]);
      assert.equal(rows[0]!.n, 0);
    } finally {
      await cut.close();
      await appDb.close();
      await proxy.stop();
      await database.drop();
    }
  });
});

describe('metrics', () => {
  test('/metrics counts requests by route pattern, never by raw id, with a latency histogram and pool gauges', async () => {
    const user = await h.newUser();
    assert.equal((await user.client.get(`/api/v1/users/${user.id}`, { token: user.token })).status, 200);
    assert.equal((await user.client.get(`/api/users/${h.admin.id}`, { token: user.token })).status, 200);
    const unknownPath = `/api/v1/no-such-route-${user.id}`;
    assert.equal((await user.client.get(unknownPath, { token: user.token })).status, 404);

    const res = await new Client(h.server).get('/metrics');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    const lines = res.text.split('\n');

    const counted = lines.find((l) => /^http_requests_total\{/.test(l) && l.includes('method="GET"') && l.includes('route="/api/v1/users/:id"') && l.includes('status_code="200"'));
    assert.ok(counted, 'no http_requests_total series for GET /api/v1/users/:id 200');
    assert.ok(Number(counted.split(' ').pop()) >= 2);
    assert.ok(!res.text.includes(`/users/${user.id}"`), 'a raw user id became a label');
    assert.ok(!res.text.includes(`/users/${h.admin.id}"`), 'a raw user id became a label');
    assert.ok(!res.text.includes('no-such-route'), 'an unmatched URL became a label');

    assert.ok(lines.some((l) => /^http_request_duration_seconds_bucket\{/.test(l) && l.includes('route="/api/v1/users/:id"') && l.includes('le="+Inf"')));
    assert.ok(lines.some((l) => /^http_request_duration_seconds_bucket\{/.test(l) && /le="0\.\d+"/.test(l)));
    for (const state of ['total', 'idle', 'waiting']) {
      assert.ok(lines.some((l) => new RegExp(`^db_pool_connections\\{state="${state}"\\} \\d+$`).test(l)), `no db_pool_connections{state="${state}"}`);
    }
  });
});

describe('API reference', () => {
  test('/docs serves the interactive reference as HTML', async () => {
    const res = await new Client(h.server).request('GET', '/docs', { headers: { accept: 'text/html' } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(res.text, /<html/i);
  });

  test('/api/v1/openapi.json is OpenAPI 3.1, publicly cacheable for 5 minutes, and documents every /api/v1 route the app serves', async () => {
    const res = await new Client(h.server).get('/api/v1/openapi.json');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'public, max-age=300');
    const doc = res.body as { openapi: string; paths: Record<string, Record<string, unknown>> };
    assert.match(doc.openapi, /^3\.1\./);

    const served = servedApiRoutes(h.server.app).filter(([method, path]) => method !== 'HEAD' && path !== '/api/v1/openapi.json');
    assert.ok(served.length >= 25, `only ${served.length} routes found in the route tree`);
    const undocumented = served
      .filter(([method, path]) => !doc.paths[pathOfRoute(path)]?.[method.toLowerCase()])
      .map(([method, path]) => `${method} ${path}`);
    assert.deepEqual(undocumented, []);

    // And nothing is documented that the app does not serve.
    const phantom: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const method of Object.keys(ops).filter((k) => ['get', 'post', 'put', 'delete', 'patch'].includes(k))) {
        if (!h.server.app.hasRoute({ method: method.toUpperCase() as 'GET', url: routeOfPath(path) })) phantom.push(`${method} ${path}`);
      }
    }
    assert.deepEqual(phantom, []);
  });
});

describe('housekeeping', () => {
  test('removes outbox events and idempotency keys older than 24 hours and spent login failures, and keeps the rest', async () => {
    const tag = `housekeeping-${Date.now()}`;
    // Two events through the service, each numbered in its own batch; the first batch is then aged past the retention.
    const admin = h.admin;
    const numbered = async (text: string) => {
      const res = await admin.client.post('/api/v1/messages', { text }, { token: admin.token });
      assert.equal(res.status, 201, res.text);
      for (let i = 0; i < 200; i++) {
        const [b] = await h.server.owner.query<{ last_event_id: number }>(
          `SELECT b.last_event_id FROM outbox_batches b, outbox_events e WHERE e.row_id = ANY (b.row_ids) AND e.payload->>'text' = $1`,
          [text],
        );
        if (b) return b.last_event_id;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('the event was not numbered');
    };
    const oldBatch = await numbered(`${tag} old`);
    await numbered(`${tag} fresh`);
    await h.server.owner.query(`UPDATE outbox_batches SET created_at = now() - interval '25 hours' WHERE last_event_id = $1`, [oldBatch]);
    await h.server.owner.query(
      `INSERT INTO idempotency_keys (scope, method, path, key, request_hash, created_at) VALUES
         ($1, 'POST', '/old', 'k', 'h', now() - interval '25 hours'), ($1, 'POST', '/fresh', 'k', 'h', now())`,
      [tag],
    );
    await h.server.owner.query(
      `INSERT INTO login_failures (email, ip, created_at) VALUES ($1, '10.0.0.1', now() - interval '16 minutes'), ($1, '10.0.0.1', now())`,
      [`${tag}@test.local`],
    );

    await runMaintenance(h.server.db, 24); // as the service's own (restricted) role

    const events = await h.server.owner.query<{ text: string }>(`SELECT payload->>'text' AS text FROM outbox_events WHERE payload->>'text' LIKE $1 ORDER BY row_id`, [`${tag}%`]);
    assert.deepEqual(events.map((e) => e.text), [`${tag} fresh`], 'the aged batch went with its rows');
    assert.equal((await h.server.owner.query('SELECT 1 FROM outbox_batches WHERE last_event_id = $1', [oldBatch])).length, 0);
    const keys = await h.server.owner.query<{ path: string }>('SELECT path FROM idempotency_keys WHERE scope = $1', [tag]);
    assert.deepEqual(keys.map((k) => k.path), ['/fresh']);
    const failures = await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM login_failures WHERE email = $1', [`${tag}@test.local`]);
    assert.equal(failures[0]!.n, 1);
  });
});
