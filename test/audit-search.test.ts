// GET /audit-logs?q= and GET /audit-logs/export?q= (docs/api.md 4, "Search syntax (`q=`)"): each
// key against the table itself (read through the owner connection), OR, AND and negation,
// quoted values, actors by email and none, networks, created ranges, q with the filters and
// with keyset pages, the export holding exactly the matching rows, and every refusal a
// 400 INVALID_QUERY that quotes its term and writes nothing.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { committed } from './helpers/audit-log.js';
import { assertProblem, auditCount, type Session } from './helpers/client.js';
import { createProject, createTask, type AuditRecordBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();
let alice: Session;
let bob: Session;
let carol: Session;
let taskId: number;
let projectId: number;

/** A record as the table holds it, its timestamp in microseconds since the epoch. */
interface Row {
  id: number;
  actor_id: number | null;
  action: string;
  resource_type: string;
  resource_id: number | null;
  result: string;
  ip: string | null;
  request_id: string;
  micros: number;
}

const us = (iso: string) => Date.parse(iso) * 1000;

/** Records written behind the service's back, for what requests cannot make: old timestamps, odd addresses. */
const PLANTED = [
  { at: '2020-03-01T00:00:00Z', ip: '198.51.100.7', actor: null, request: 'planted-1' },
  { at: '2020-03-01T23:59:59.999999Z', ip: '::ffff:198.51.100.8', actor: null, request: 'planted-2' },
  { at: '2020-03-02T00:00:00Z', ip: 'unknown', actor: null, request: 'planted-3' },
  { at: '2020-03-02T12:00:00.5Z', ip: null, actor: null, request: 'planted-4' },
  { at: '2021-07-15T08:00:00+02:00', ip: '2001:db8:1::9', actor: null, request: 'planted-5' },
];

h.before(async () => {
  alice = await h.newUser({ name: 'Alice' });
  bob = await h.newUser({ name: 'Bob' });
  carol = await h.newUser({ name: 'Carol' });
  const from = (ip: string, request: string) => ({ headers: { 'x-forwarded-for': ip, 'x-request-id': request } });
  const project = await alice.client.post('/api/v1/projects', { name: 'Search' }, { token: alice.token, ...from('192.0.2.10', 'search-project') });
  assert.equal(project.status, 201, project.text);
  projectId = project.body.id;
  const task = await alice.client.post('/api/v1/tasks', { project_id: projectId, title: 'Searched' }, { token: alice.token, ...from('192.0.2.11', 'search-task') });
  assert.equal(task.status, 201, task.text);
  taskId = task.body.id;
  await createTask(alice, projectId, { title: 'Another' });
  await createProject(bob, { name: 'Bob project' });
  const denied = await bob.client.put(`/api/v1/users/${carol.id}/role`, { role: 'ADMIN' }, { token: bob.token, ...from('2001:db8::77', 'search-denied') });
  assert.equal(denied.status, 403, denied.text);
  const failed = await carol.client.post('/api/v1/auth/login', { email: carol.email, password: 'wrong-password' }, from('192.0.2.99', 'search-failed'));
  assert.equal(failed.status, 401, failed.text);
  const nobody = await carol.client.post('/api/v1/auth/login', { email: 'nobody@example.com', password: 'wrong-password' }, from('192.0.2.98', 'search-nobody'));
  assert.equal(nobody.status, 401, nobody.text);
  await committed(h.server.owner, async (q) => {
    for (const p of PLANTED) {
      await q.query(
        `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, "timestamp", result, ip, request_id)
         VALUES ($1, 'LOGIN_FAILURE', 'USER', NULL, $2::timestamptz, 'FAILURE', $3, $4)`,
        [p.actor, p.at, p.ip, p.request],
      );
    }
  });
});

const stored = () =>
  h.server.owner.query<Row>(
    `SELECT id, actor_id, action, resource_type, resource_id, result, ip, request_id,
            (extract(epoch FROM "timestamp") * 1000000)::bigint AS micros
       FROM audit_log ORDER BY id DESC`,
  );

/** Follows next_cursor to the end; checks that pages are newest first and never repeat. */
async function listAll(params: Record<string, string | string[]>, limit = 3): Promise<number[]> {
  const ids: number[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 200; pages++) {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) for (const one of [v].flat()) query.append(k, one);
    query.set('limit', String(limit));
    if (cursor) query.set('cursor', cursor);
    const res = await h.admin.client.get<{ data: AuditRecordBody[]; next_cursor: string | null }>(`/api/v1/audit-logs?${query}`, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
    ids.push(...res.body.data.map((r) => r.id));
    cursor = res.body.next_cursor;
    if (!cursor) break;
  }
  assert.deepEqual(ids, [...ids].sort((a, b) => b - a), 'newest first');
  assert.equal(new Set(ids).size, ids.length, 'no record twice');
  return ids;
}

/** The ids the search must return, worked out here from the documented semantics. */
async function expected(match: (r: Row) => boolean): Promise<number[]> {
  return (await stored()).filter(match).map((r) => r.id);
}

async function assertSearch(q: string, match: (r: Row) => boolean, opts: { nonEmpty?: boolean; params?: Record<string, string | string[]> } = {}) {
  const want = await expected(match);
  if (opts.nonEmpty !== false) assert.ok(want.length > 0, `${q} selects something here`);
  const got = await listAll({ ...opts.params, q });
  assert.deepEqual(got, want, q);
}

const ipIs = (...addresses: string[]) => (r: Row) => r.ip !== null && addresses.includes(r.ip);

describe('GET /audit-logs?q=', () => {
  test('action: one name, several (OR), and case-insensitively', async () => {
    await assertSearch('action:CREATE_TASK', (r) => r.action === 'CREATE_TASK');
    await assertSearch('action:create_task action:CREATE_PROJECT', (r) => r.action === 'CREATE_TASK' || r.action === 'CREATE_PROJECT');
  });

  test('actor: by id, by email in any case, several ids OR\'d, and an email nobody holds matches nothing', async () => {
    await assertSearch(`actor:${alice.id}`, (r) => r.actor_id === alice.id);
    await assertSearch(`actor:${alice.email.toUpperCase()}`, (r) => r.actor_id === alice.id);
    await assertSearch(`actor:${alice.id} actor:${bob.email}`, (r) => r.actor_id === alice.id || r.actor_id === bob.id);
    await assertSearch('actor:nobody@example.com', () => false, { nonEmpty: false });
    // An email nobody holds, beside one that is held: the alternatives still match.
    await assertSearch(`actor:nobody@example.com actor:${bob.email}`, (r) => r.actor_id === bob.id);
  });

  test('actor:none is the records without an actor, -actor:none those with one', async () => {
    await assertSearch('actor:none', (r) => r.actor_id === null);
    await assertSearch('-actor:none', (r) => r.actor_id !== null);
    // Excluding an actor keeps the records that have none.
    await assertSearch(`-actor:${alice.id}`, (r) => r.actor_id !== alice.id);
  });

  test('resource: a type, a type and id, and a negated one', async () => {
    await assertSearch('resource:PROJECT', (r) => r.resource_type === 'PROJECT');
    await assertSearch(`resource:TASK/${taskId}`, (r) => r.resource_type === 'TASK' && r.resource_id === taskId);
    await assertSearch(`resource:task/${taskId} resource:PROJECT/${projectId}`, (r) => (r.resource_type === 'TASK' && r.resource_id === taskId) || (r.resource_type === 'PROJECT' && r.resource_id === projectId));
    // Records with no resource id (a refused creation, an export) are not that task: kept.
    await assertSearch(`-resource:TASK/${taskId}`, (r) => !(r.resource_type === 'TASK' && r.resource_id === taskId));
  });

  test('result: DENIED, FAILURE or DENIED, and everything but SUCCESS', async () => {
    await assertSearch('result:DENIED', (r) => r.result === 'DENIED');
    await assertSearch('result:FAILURE result:denied', (r) => r.result !== 'SUCCESS');
    await assertSearch('-result:SUCCESS', (r) => r.result !== 'SUCCESS');
  });

  test('ip: an address, a network (IPv4 and IPv6), an IPv4 client seen as ::ffff:a.b.c.d, and text that is no address never matching', async () => {
    await assertSearch('ip:192.0.2.10', ipIs('192.0.2.10'));
    await assertSearch('ip:192.0.2.0/24', (r) => r.ip !== null && r.ip.startsWith('192.0.2.'));
    await assertSearch('ip:198.51.100.8', ipIs('::ffff:198.51.100.8'));
    await assertSearch('ip:::ffff:198.51.100.7', ipIs('198.51.100.7'));
    await assertSearch('ip:198.51.100.0/24', ipIs('198.51.100.7', '::ffff:198.51.100.8'));
    await assertSearch('ip:2001:DB8::77', ipIs('2001:db8::77'));
    await assertSearch('ip:2001:db8::/32', ipIs('2001:db8::77', '2001:db8:1::9'));
    await assertSearch('ip:0.0.0.0/0', (r) => r.ip !== null && r.ip !== 'unknown' && !r.ip.includes(':') || r.ip === '::ffff:198.51.100.8');
    // A negated address keeps the records with no address, or one that is no address.
    await assertSearch('-ip:192.0.2.0/24', (r) => !(r.ip !== null && r.ip.startsWith('192.0.2.')));
  });

  test('request: the records of one request', async () => {
    await assertSearch('request:search-task', (r) => r.request_id === 'search-task');
    await assertSearch('request:search-task request:planted-1', (r) => r.request_id === 'search-task' || r.request_id === 'planted-1');
  });

  test('created: a DATE is a whole UTC day for each comparison, and a range holds both its days', async () => {
    const before = (iso: string) => (r: Row) => r.micros < us(iso);
    const from = (iso: string) => (r: Row) => r.micros >= us(iso);
    await assertSearch('created:<2020-03-02', before('2020-03-02T00:00:00Z'));
    await assertSearch('created:<=2020-03-01', before('2020-03-02T00:00:00Z'));
    await assertSearch('created:>=2020-03-02', from('2020-03-02T00:00:00Z'));
    await assertSearch('created:>2020-03-01', from('2020-03-02T00:00:00Z'));
    await assertSearch('created:2020-03-01..2020-03-02', (r) => r.micros >= us('2020-03-01T00:00:00Z') && r.micros < us('2020-03-03T00:00:00Z'));
    await assertSearch('created:2020-03-02..2020-03-02', (r) => r.micros >= us('2020-03-02T00:00:00Z') && r.micros < us('2020-03-03T00:00:00Z'));
    await assertSearch('created:2019-01-01..2019-12-31', () => false, { nonEmpty: false });
  });

  test('created: date-times with offsets and fractions, each bound as written', async () => {
    await assertSearch('created:<=2020-03-01T23:59:59.999999Z', (r) => r.micros <= us('2020-03-01T23:59:59.999Z') + 999);
    await assertSearch('created:<2020-03-01T23:59:59.999999Z', (r) => r.micros < us('2020-03-01T23:59:59.999Z') + 999);
    await assertSearch('created:>2020-03-02T00:00:00Z', (r) => r.micros > us('2020-03-02T00:00:00Z'));
    await assertSearch('created:>=2020-03-02T00:00:00Z', (r) => r.micros >= us('2020-03-02T00:00:00Z'));
    await assertSearch('created:2021-07-15T06:00:00Z..2021-07-15T08:00:00+02:00', (r) => r.micros >= us('2021-07-15T06:00:00Z') && r.micros <= us('2021-07-15T06:00:00Z'));
    await assertSearch('created:">=2021-07-15 06:00:00"', (r) => r.micros >= us('2021-07-15T06:00:00Z'));
    // Repeated created terms are alternatives: two windows.
    await assertSearch('created:2020-03-01..2020-03-01 created:2021-07-15..2021-07-15', (r) => r.micros < us('2020-03-02T00:00:00Z') || (r.micros >= us('2021-07-15T00:00:00Z') && r.micros < us('2021-07-16T00:00:00Z')));
    await assertSearch('-created:<2022-01-01', (r) => r.micros >= us('2022-01-01T00:00:00Z'));
  });

  test('different keys AND, one key ORs, a leading - excludes, quoted values are values', async () => {
    await assertSearch(`actor:${alice.id} action:CREATE_TASK`, (r) => r.actor_id === alice.id && r.action === 'CREATE_TASK');
    await assertSearch(`actor:${alice.id} actor:${bob.id} -action:CREATE_TASK -action:LOGIN_SUCCESS`, (r) => (r.actor_id === alice.id || r.actor_id === bob.id) && r.action !== 'CREATE_TASK' && r.action !== 'LOGIN_SUCCESS');
    await assertSearch(`action:"CREATE_PROJECT" actor:"${bob.email}"`, (r) => r.action === 'CREATE_PROJECT' && r.actor_id === bob.id);
    await assertSearch('result:FAILURE actor:none -created:<2021-01-01 ip:2001:db8::/32', (r) => r.result === 'FAILURE' && r.actor_id === null && r.micros >= us('2021-01-01T00:00:00Z') && r.ip === '2001:db8:1::9');
  });

  test('q combines with the filters by AND', async () => {
    await assertSearch(`action:CREATE_TASK action:CREATE_PROJECT`, (r) => r.actor_id === alice.id && (r.action === 'CREATE_TASK' || r.action === 'CREATE_PROJECT'), { params: { actor_id: String(alice.id) } });
    await assertSearch(`-actor:${alice.id}`, (r) => r.action === 'CREATE_PROJECT' && r.actor_id !== alice.id, { params: { action: 'CREATE_PROJECT' } });
    await assertSearch('created:<2021-01-01', (r) => r.result === 'FAILURE' && r.micros < us('2021-01-01T00:00:00Z'), { params: { result: 'FAILURE' } });
    await assertSearch('action:LOGIN_SUCCESS', () => false, { params: { action: 'CREATE_TASK' }, nonEmpty: false });
  });

  test('keyset pages over a search: every page of every size, nothing twice or missing, while records arrive', async () => {
    const want = await expected((r) => r.action === 'LOGIN_SUCCESS' || r.action === 'LOGIN_FAILURE');
    for (const limit of [1, 2, 5, 100]) assert.deepEqual(await listAll({ q: 'action:LOGIN_SUCCESS action:LOGIN_FAILURE' }, limit), want);
    // Records written between two pages are newer than the cursor: the rest of the walk is unchanged.
    const first = await h.admin.client.get(`/api/v1/audit-logs?q=${encodeURIComponent('-actor:none')}&limit=2`, { token: h.admin.token });
    assert.equal(first.status, 200, first.text);
    await h.newUser({ name: 'Dave' });
    const rest = await listAll({ q: '-actor:none', cursor: first.body.next_cursor }, 4);
    const oldOnes = (await expected((r) => r.actor_id !== null)).filter((id) => id < first.body.data.at(-1).id);
    assert.deepEqual(rest, oldOnes);
  });

  test('an empty or blank q is no search', async () => {
    const all = await expected(() => true);
    assert.deepEqual(await listAll({ q: '' }, 100), all);
    assert.deepEqual(await listAll({ q: '   ' }, 100), all);
  });
});

/** Terms the syntax refuses, and what the detail must quote. */
const REFUSED: Array<[q: string, quoted: string]> = [
  ['alice', '"alice"'],
  ['who:alice', '"who:alice"'],
  ['action:NOPE', '"action:NOPE"'],
  ['actor:alice', '"actor:alice"'],
  ['actor:0', '"actor:0"'],
  ['resource:TASK/x', '"resource:TASK/x"'],
  ['result:OK', '"result:OK"'],
  ['ip:10.0.0.0/40', '"ip:10.0.0.0/40"'],
  ['ip:fe80::1%eth0', '"ip:fe80::1%eth0"'],
  ['request:a/b', '"request:a/b"'],
  ['created:2026-11-26', '"created:2026-11-26"'],
  ['created:>=2026-02-30', '"created:>=2026-02-30"'],
  ['created:2026-11-27..2026-11-26', '"created:2026-11-27..2026-11-26"'],
  ['action:', '"action:"'],
  ['actor:"alice', `'actor:"alice'`],
  [Array.from({ length: 21 }, (_, i) => `actor:${i + 1}`).join(' '), '"actor:21"'],
  [`request:${'r'.repeat(600)}`, '"request:rrrr'],
];

describe('a search the syntax refuses', () => {
  test('is 400 INVALID_QUERY on the list, quoting the term, and writes nothing', async () => {
    const before = await auditCount(h.server);
    for (const [q, quoted] of REFUSED) {
      const res = await h.admin.client.get(`/api/v1/audit-logs?q=${encodeURIComponent(q)}`, { token: h.admin.token });
      assertProblem(res, 400, 'INVALID_QUERY');
      assert.ok(res.body.detail.includes(quoted), `${q}: the detail quotes ${quoted}: ${res.body.detail}`);
      assert.equal(res.body.type, '/problems/invalid-query');
    }
    assert.equal(await auditCount(h.server), before, 'a refused search writes no record');
  });

  test('is 400 INVALID_QUERY on the export, before any record is written or a line sent', async () => {
    const before = await auditCount(h.server);
    for (const [q, quoted] of REFUSED) {
      for (const format of ['ndjson', 'csv']) {
        const res = await h.admin.client.get(`/api/v1/audit-logs/export?format=${format}&q=${encodeURIComponent(q)}`, { token: h.admin.token });
        assertProblem(res, 400, 'INVALID_QUERY');
        assert.ok(res.body.detail.includes(quoted), `${q}: ${res.body.detail}`);
      }
    }
    assert.equal(await auditCount(h.server), before, 'a refused export writes no EXPORT_AUDIT_LOG record, as one refused by its schema');
  });

  test('q is for ADMINs only, like the rest of the audit log', async () => {
    const res = await alice.client.get('/api/v1/audit-logs?q=action:LOGOUT', { token: alice.token });
    assertProblem(res, 403, 'FORBIDDEN');
  });
});

describe('GET /audit-logs/export?q=', () => {
  async function exported(query: string): Promise<{ text: string; type: string }> {
    const res = await fetch(`${h.server.url}/api/v1/audit-logs/export?${query}`, { headers: { authorization: `Bearer ${h.admin.token}`, 'x-forwarded-for': h.admin.client.ip } });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    return { text, type: res.headers.get('content-type') ?? '' };
  }

  const exportRecords = () =>
    h.server.owner.query<{ id: number; metadata: { format: string; filters: Record<string, unknown> } }>(
      "SELECT id, metadata FROM audit_log WHERE action = 'EXPORT_AUDIT_LOG' ORDER BY id",
    );

  test('NDJSON and CSV hold exactly the matching records, and the EXPORT_AUDIT_LOG record has q in its filters', async () => {
    const q = `action:CREATE_TASK action:CREATE_PROJECT -actor:${bob.id}`;
    const match = (r: Row) => (r.action === 'CREATE_TASK' || r.action === 'CREATE_PROJECT') && r.actor_id !== bob.id;
    const want = (await expected(match)).sort((a, b) => a - b);
    assert.ok(want.length >= 3);
    const before = (await exportRecords()).length;

    const ndjson = await exported(`q=${encodeURIComponent(q)}`);
    assert.match(ndjson.type, /^application\/x-ndjson/);
    const lines = ndjson.text.trimEnd().split('\n').map((l) => JSON.parse(l) as { type: string; record?: { id: number }; export?: { filters: Record<string, unknown>; records: number } });
    const checkpoint = lines.at(-1)!;
    assert.equal(checkpoint.type, 'checkpoint');
    assert.deepEqual(lines.slice(0, -1).map((l) => l.record!.id).sort((a, b) => a - b), want);
    assert.deepEqual(checkpoint.export!.filters, { q });
    assert.equal(checkpoint.export!.records, want.length);

    const csv = await exported(`format=csv&q=${encodeURIComponent(q)}&actor_id=${alice.id}`);
    assert.match(csv.type, /^text\/csv/);
    const rows = csv.text.split('\r\n').filter((l) => l !== '');
    assert.equal(rows[0]!.split(',')[0], 'id');
    const aliceWant = (await expected((r) => match(r) && r.actor_id === alice.id)).sort((a, b) => a - b);
    assert.deepEqual(rows.slice(1).map((l) => Number(l.split(',')[0])).sort((a, b) => a - b), aliceWant);

    const records = (await exportRecords()).slice(before);
    assert.equal(records.length, 2, 'one EXPORT_AUDIT_LOG record per export');
    assert.deepEqual(records[0]!.metadata, { format: 'ndjson', filters: { q } });
    assert.deepEqual(records[1]!.metadata, { format: 'csv', filters: { q, actorId: alice.id } });
  });

  test('a search of the planted, old and odd records exports them, and an email nobody holds exports nothing', async () => {
    const ndjson = await exported(`q=${encodeURIComponent('created:<2022-01-01 -ip:198.51.100.0/24')}`);
    const ids = ndjson.text.trimEnd().split('\n').map((l) => JSON.parse(l) as { type: string; record?: { id: number } }).filter((l) => l.type === 'record').map((l) => l.record!.id);
    const want = await expected((r) => r.micros < us('2022-01-01T00:00:00Z') && !['198.51.100.7', '::ffff:198.51.100.8'].includes(r.ip ?? ''));
    assert.deepEqual(ids.sort((a, b) => a - b), want.sort((a, b) => a - b));
    assert.equal(want.length, 3);
    const none = await exported(`format=csv&q=${encodeURIComponent('actor:nobody@example.com')}`);
    assert.equal(none.text.split('\r\n').filter((l) => l !== '').length, 1, 'the header alone');
  });
});
