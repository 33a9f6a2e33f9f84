// Request ids (docs/api.md §1): the caller's X-Request-Id when sane, else a UUIDv7 of ours,
// ordered by time so that the audit log's request_id index grows at its end (migrations/0011,
// docs/audit-search.md), and audit search's request:<id> is served by that index.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { uuidv7 } from '../src/http/conventions.js';
import { Client } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();
const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('uuidv7: version 7, variant 10, the time in its first 48 bits, so later ids sort after earlier ones', () => {
  const at = Date.UTC(2026, 10, 26, 9, 30);
  const id = uuidv7(at);
  assert.match(id, V7);
  assert.equal(parseInt(id.replace(/-/g, '').slice(0, 12), 16), at);
  assert.ok(uuidv7(at) < uuidv7(at + 1), 'a millisecond later sorts after');
  assert.notEqual(uuidv7(at), uuidv7(at), 'random within a millisecond');
});

test('a request without X-Request-Id gets a UUIDv7 of ours; a sane one sent is kept', async () => {
  const c = new Client(h.server);
  const ours = (await c.get('/health/live')).headers.get('x-request-id');
  assert.match(ours ?? '', V7);
  assert.equal((await c.get('/health/live', { headers: { 'x-request-id': 'trace-42' } })).headers.get('x-request-id'), 'trace-42');
});

test("request:<id> can be served by the audit log's request_id index", async () => {
  const plan = await h.server.owner.transaction(async (tx) => {
    await tx.query('SET LOCAL enable_seqscan = off');
    return tx.query<{ 'QUERY PLAN': string }>("EXPLAIN SELECT id FROM audit_log WHERE request_id = 'x' ORDER BY id DESC LIMIT 50");
  });
  assert.match(plan.map((r) => r['QUERY PLAN']).join('\n'), /audit_log_request_idx/);
});
