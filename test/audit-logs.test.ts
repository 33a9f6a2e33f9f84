// GET /api/v1/audit-logs and /audit-logs/:id: ADMIN only, every filter alone and combined
// (checked against the table itself, read through the owner connection), validation of
// every filter, and keyset pagination that neither repeats nor skips while records arrive.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Client, type Session } from './helpers/client.js';
import { createProject, createTask, type AuditRecordBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();
let alice: Session;
let bob: Session;
let projectId: number;
let taskId: number;

/** A record as the table holds it, with its timestamp in microseconds (the API shows milliseconds). */
interface StoredRecord {
  id: number;
  actor_id: number | null;
  action: string;
  resource_type: string;
  resource_id: number | null;
  result: string;
  micros: number;
}

h.before(async () => {
  alice = await h.newUser({ name: 'Alice' });
  bob = await h.newUser({ name: 'Bob' });
  projectId = (await createProject(alice, { name: 'Audit filters' })).id;
  taskId = (await createTask(alice, projectId, { title: 'A task' })).id;
  // A refusal (DENIED), a failed login (FAILURE) and an admin's change of Bob.
  const refused = await alice.client.put(`/api/v1/users/${bob.id}/role`, { role: 'ADMIN' }, { token: alice.token });
  assert.equal(refused.status, 403, refused.text);
  const failed = await bob.client.post('/api/v1/auth/login', { email: bob.email, password: 'not-the-password' });
  assert.equal(failed.status, 401, failed.text);
  const promoted = await h.admin.client.put(`/api/v1/users/${bob.id}/role`, { role: 'ADMIN' }, { token: h.admin.token });
  assert.equal(promoted.status, 200, promoted.text);
});

async function stored(): Promise<StoredRecord[]> {
  return h.server.owner.query<StoredRecord>(
    `SELECT id, actor_id, action, resource_type, resource_id, result,
            (extract(epoch FROM "timestamp") * 1000000)::bigint AS micros
       FROM audit_log ORDER BY id DESC`,
  );
}

/** What the filters in `query` select, worked out here from the documented semantics. */
function matches(r: StoredRecord, query: URLSearchParams): boolean {
  const actions = query.getAll('action');
  const num = (k: string) => (query.has(k) ? Number(query.get(k)) : undefined);
  const micros = (k: string) => (query.has(k) ? Date.parse(query.get(k)!) * 1000 : undefined);
  const from = micros('from');
  const to = micros('to');
  return (
    (num('actor_id') === undefined || r.actor_id === num('actor_id')) &&
    (actions.length === 0 || actions.includes(r.action)) &&
    (!query.has('resource_type') || r.resource_type === query.get('resource_type')) &&
    (num('resource_id') === undefined || r.resource_id === num('resource_id')) &&
    (!query.has('result') || r.result === query.get('result')) &&
    (from === undefined || r.micros >= from) && // from: inclusive
    (to === undefined || r.micros < to) // to: exclusive
  );
}

/** Follows next_cursor to the end; checks that pages are newest first and never repeat. */
async function listAll(query: URLSearchParams, limit = 7): Promise<AuditRecordBody[]> {
  const all: AuditRecordBody[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 100; pages++) {
    const q = new URLSearchParams(query);
    q.set('limit', String(limit));
    if (cursor) q.set('cursor', cursor);
    const res = await h.admin.client.get(`/api/v1/audit-logs?${q}`, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
    assert.ok(res.body.data.length <= limit);
    all.push(...res.body.data);
    cursor = res.body.next_cursor;
    if (!cursor) break;
  }
  assert.equal(cursor, null, 'pagination ends');
  const ids = all.map((r) => r.id);
  assert.deepEqual(ids, [...ids].sort((a, b) => b - a), 'newest first');
  assert.equal(new Set(ids).size, ids.length, 'no record twice');
  return all;
}

async function expectFilter(params: Array<[string, string]>): Promise<number[]> {
  const query = new URLSearchParams(params);
  const all = await stored();
  const expected = all.filter((r) => matches(r, query)).map((r) => r.id);
  const got = (await listAll(query)).map((r) => r.id);
  assert.deepEqual(got, expected, `?${query}`);
  assert.ok(expected.length > 0, `?${query} selects something`);
  assert.ok(expected.length < all.length, `?${query} leaves something out`);
  return got;
}

async function recordOf(where: string, params: unknown[]): Promise<AuditRecordBody> {
  const rows = await h.server.owner.query<{ id: number }>(`SELECT id FROM audit_log WHERE ${where} ORDER BY id DESC LIMIT 1`, params);
  assert.ok(rows[0], where);
  const res = await h.admin.client.get(`/api/v1/audit-logs/${rows[0].id}`, { token: h.admin.token });
  assert.equal(res.status, 200, res.text);
  return res.body;
}

const plusMs = (iso: string, ms: number) => new Date(Date.parse(iso) + ms).toISOString();

describe('access', () => {
  test('refuses a USER with 403 and an anonymous caller with 401, on the list and on a record', async () => {
    for (const path of ['/api/v1/audit-logs', '/api/v1/audit-logs/1', '/api/v1/audit-logs?action=LOGIN_SUCCESS']) {
      const asUser = await alice.client.get(path, { token: alice.token });
      assert.equal(asUser.status, 403, path);
      assert.equal(asUser.body.code, 'FORBIDDEN');
      assert.doesNotMatch(asUser.text, /LOGIN_SUCCESS|CREATE_USER/);
      const anonymous = await new Client(h.server).get(path);
      assert.equal(anonymous.status, 401, path);
    }
  });

  test('serves an ADMIN promoted a moment ago, and refuses them again once demoted', async () => {
    const carol = await h.newUser();
    assert.equal((await carol.client.get('/api/v1/audit-logs', { token: carol.token })).status, 403);
    assert.equal((await h.admin.client.put(`/api/v1/users/${carol.id}/role`, { role: 'ADMIN' }, { token: h.admin.token })).status, 200);
    assert.equal((await carol.client.get('/api/v1/audit-logs', { token: carol.token })).status, 200);
    assert.equal((await h.admin.client.put(`/api/v1/users/${carol.id}/role`, { role: 'USER' }, { token: h.admin.token })).status, 200);
    assert.equal((await carol.client.get('/api/v1/audit-logs', { token: carol.token })).status, 403);
  });
});

describe('records', () => {
  test('a record has exactly the documented fields, with the request context it was written with', async () => {
    const row = await recordOf(`action = 'CREATE_PROJECT' AND resource_id = $1`, [projectId]);
    assert.deepEqual(Object.keys(row).sort(), [
      'action', 'actor_id', 'id', 'ip', 'metadata', 'request_id', 'resource_id', 'resource_type', 'result', 'timestamp', 'user_agent',
    ]);
    assert.equal(row.actor_id, alice.id);
    assert.equal(row.resource_type, 'PROJECT');
    assert.equal(row.resource_id, projectId);
    assert.equal(row.result, 'SUCCESS');
    assert.deepEqual(row.metadata, { name: 'Audit filters' });
    assert.equal(row.ip, alice.client.ip);
    assert.match(row.timestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.equal(typeof row.request_id, 'string');
    const listed = await h.admin.client.get(`/api/v1/audit-logs?resource_type=PROJECT&resource_id=${projectId}`, { token: h.admin.token });
    assert.deepEqual(listed.body.data, [row], 'the list shows the same record as the single read');
  });

  test('answers 404 for an id that does not exist and 400 for one that is not an id', async () => {
    const max = (await stored())[0]!.id;
    for (const id of [max + 1000, Number.MAX_SAFE_INTEGER]) {
      const res = await h.admin.client.get(`/api/v1/audit-logs/${id}`, { token: h.admin.token });
      assert.equal(res.status, 404, String(id));
      assert.equal(res.body.code, 'NOT_FOUND');
    }
    for (const id of ['abc', '0', '-1', '1.5', '99999999999999999999', '9007199254740992', '%00']) {
      const res = await h.admin.client.get(`/api/v1/audit-logs/${id}`, { token: h.admin.token });
      assert.equal(res.status, 400, id);
      assert.equal(res.body.code, 'VALIDATION_FAILED');
    }
  });
});

test(
  'refuses ids written in other notations than a decimal integer (1e3, 0x10, +5, 1.0) with 400',
  async () => {
    for (const id of ['1e3', '0x10', '+5', '%205', '1.0', '0b11']) {
      const res = await h.admin.client.get(`/api/v1/audit-logs/${id}`, { token: h.admin.token });
      assert.equal(res.status, 400, id);
    }
  },
);

describe('filters', () => {
  test('with no filter, lists every record, newest first', async () => {
    const all = await stored();
    assert.deepEqual((await listAll(new URLSearchParams())).map((r) => r.id), all.map((r) => r.id));
  });

  test('filters by actor_id alone', async () => {
    const ids = await expectFilter([['actor_id', String(alice.id)]]);
    const rows = await listAll(new URLSearchParams({ actor_id: String(alice.id) }));
    assert.deepEqual(new Set(rows.map((r) => r.action)), new Set(['LOGIN_SUCCESS', 'CREATE_PROJECT', 'CREATE_TASK', 'CHANGE_USER_ROLE']));
    assert.equal(ids.length, 4);
  });

  test('filters by one action, and by several actions given as a repeated parameter', async () => {
    const one = await listAll(new URLSearchParams([['action', 'CREATE_TASK']]));
    assert.deepEqual(one.map((r) => [r.action, r.resource_id]), [['CREATE_TASK', taskId]]);
    await expectFilter([['action', 'CREATE_USER']]);
    const several = await expectFilter([['action', 'CREATE_PROJECT'], ['action', 'LOGIN_FAILURE'], ['action', 'CREATE_TASK']]);
    assert.equal(several.length, 3);
  });

  test('one filter asked again and again with other values answers each time for its values', async () => {
    // The statement for a combination of filters is prepared once, with one generic plan;
    // each value, asked again and again, must still be the one filtered by.
    for (let round = 0; round < 4; round++) {
      for (const type of ['TASK', 'PROJECT', 'USER']) await expectFilter([['resource_type', type]]);
      await expectFilter([['resource_id', String(round % 2 ? bob.id : projectId)]]);
    }
  });

  test('filters by resource_type alone', async () => {
    assert.deepEqual(await expectFilter([['resource_type', 'TASK']]), [(await recordOf(`action = 'CREATE_TASK'`, [])).id]);
    await expectFilter([['resource_type', 'PROJECT']]);
    await expectFilter([['resource_type', 'USER']]);
  });

  test('filters by resource_id alone, across resource types', async () => {
    await expectFilter([['resource_id', String(bob.id)]]);
    await expectFilter([['resource_id', String(projectId)]]);
  });

  test('filters by result alone', async () => {
    const denied = await listAll(new URLSearchParams({ result: 'DENIED' }));
    assert.deepEqual(denied.map((r) => [r.action, r.actor_id, r.resource_id]), [['CHANGE_USER_ROLE', alice.id, bob.id]]);
    await expectFilter([['result', 'FAILURE']]);
    await expectFilter([['result', 'SUCCESS']]);
  });

  test('from is inclusive and to is exclusive, to the millisecond shown', async () => {
    const task = await recordOf(`action = 'CREATE_TASK'`, []);
    const T = task.timestamp;
    const only = (extra: Array<[string, string]>) =>
      listAll(new URLSearchParams([['action', 'CREATE_TASK'], ...extra])).then((rows) => rows.map((r) => r.id));
    assert.deepEqual(await only([['from', T]]), [task.id], 'from = its timestamp includes it');
    assert.deepEqual(await only([['from', plusMs(T, 1)]]), [], 'from one millisecond later excludes it');
    assert.deepEqual(await only([['to', T]]), [], 'to = its timestamp excludes it');
    assert.deepEqual(await only([['to', plusMs(T, 1)]]), [task.id], 'to one millisecond later includes it');
    assert.deepEqual(await only([['from', T], ['to', plusMs(T, 1)]]), [task.id]);
    assert.deepEqual(await only([['from', plusMs(T, 1)], ['to', T]]), [], 'an empty range is empty, not an error');
    // The same instant written with another offset.
    const shifted = new Date(Date.parse(T) + 2 * 3600_000).toISOString().replace('Z', '+02:00');
    assert.deepEqual(await only([['from', shifted]]), [task.id]);
    await expectFilter([['from', T]]);
    await expectFilter([['to', T]]);
  });

  test('combines filters with AND', async () => {
    const task = await recordOf(`action = 'CREATE_TASK'`, []);
    const promoted = await recordOf(`action = 'CHANGE_USER_ROLE' AND result = 'SUCCESS' AND resource_id = $1`, [bob.id]);
    assert.equal((await expectFilter([['actor_id', String(alice.id)], ['action', 'CREATE_PROJECT']])).length, 1);
    assert.deepEqual(await expectFilter([['actor_id', String(alice.id)], ['result', 'DENIED']]), [(await recordOf(`result = 'DENIED'`, [])).id]);
    assert.deepEqual(
      await expectFilter([['resource_type', 'USER'], ['resource_id', String(bob.id)], ['action', 'CHANGE_USER_ROLE'], ['result', 'SUCCESS']]),
      [promoted.id],
    );
    assert.deepEqual(await expectFilter([['resource_type', 'PROJECT'], ['resource_id', String(projectId)]]), [(await recordOf(`action = 'CREATE_PROJECT'`, [])).id]);
    await expectFilter([['action', 'CREATE_USER'], ['action', 'LOGIN_SUCCESS'], ['from', task.timestamp]]);
    await expectFilter([['action', 'LOGIN_SUCCESS'], ['action', 'LOGIN_FAILURE'], ['to', task.timestamp]]);
    // All seven at once, narrowing to the one promotion.
    const all7: Array<[string, string]> = [
      ['actor_id', String(h.admin.id)], ['action', 'CHANGE_USER_ROLE'], ['action', 'DELETE_USER'], ['resource_type', 'USER'],
      ['resource_id', String(bob.id)], ['result', 'SUCCESS'], ['from', promoted.timestamp], ['to', plusMs(promoted.timestamp, 1)],
    ];
    assert.deepEqual(await expectFilter(all7), [promoted.id]);
    // A combination nothing matches is an empty page, not an error.
    const none = await h.admin.client.get(`/api/v1/audit-logs?actor_id=${bob.id}&action=CREATE_TASK`, { token: h.admin.token });
    assert.equal(none.status, 200);
    assert.deepEqual(none.body, { data: [], next_cursor: null });
    assert.equal(none.headers.get('link'), null);
  });

  test('refuses invalid filter values with 400 VALIDATION_FAILED', async () => {
    const bad = [
      'actor_id=abc', 'actor_id=0', 'actor_id=-1', 'actor_id=1.5', 'actor_id=99999999999999999999', 'actor_id=9007199254740992',
      'actor_id=', `actor_id=${alice.id}&actor_id=${bob.id}`,
      'action=FOO', 'action=login_success', 'action=', `action=LOGIN_SUCCESS&action=NOPE`,
      Array.from({ length: 26 }, () => 'action=LOGIN_SUCCESS').join('&'),
      'resource_type=USERS', 'resource_type=user', 'resource_id=abc', 'resource_id=0',
      'result=OK', 'result=success',
      'from=yesterday', 'from=2026-13-01T00:00:00Z', 'from=2026-01-01T00:00:00', 'from=2026-01-01', 'to=2026-02-30T00:00:00Z',
      'to=1700000000000', 'from=0000-01-01T00:00:00Z', 'from=%00',
      'limit=0', 'limit=101', 'limit=abc', 'unknown=1', 'actorId=1',
    ];
    for (const q of bad) {
      const res = await h.admin.client.get(`/api/v1/audit-logs?${q}`, { token: h.admin.token });
      assert.equal(res.status, 400, `?${q} → ${res.status} ${res.text}`);
      assert.equal(res.body.code, 'VALIDATION_FAILED', q);
      assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
    }
  });

  test('names the allowed values of a closed set in one error, not the first of them', async () => {
    const action = await h.admin.client.get<{ detail: string; errors: Array<{ field: string; message: string }> }>('/api/v1/audit-logs?action=LOGIN_SUCCESS&action=FOO', { token: h.admin.token });
    assert.equal(action.status, 400);
    assert.equal(action.body.errors.length, 1, JSON.stringify(action.body.errors));
    assert.equal(action.body.errors[0]!.field, '/action/1');
    assert.match(action.body.detail, /^query parameter action\/1 must be one of CREATE_USER, .*LOGIN_SUCCESS, .*EXPORT_AUDIT_LOG/);
    const result = await h.admin.client.get<{ detail: string; errors: unknown[] }>('/api/v1/audit-logs?result=OK', { token: h.admin.token });
    assert.equal(result.body.detail, 'query parameter result must be one of SUCCESS, FAILURE, DENIED');
    assert.equal(result.body.errors.length, 1);
  });
});

describe('pagination', () => {
  test('pages newest first by limit, with next_cursor and a Link header, and without them on the last page', async () => {
    for (let i = 0; i < 5; i++) await h.newUser(); // two records each
    const all = await stored();
    assert.ok(all.length > 21, `${all.length} records`);
    const first = await h.admin.client.get('/api/v1/audit-logs', { token: h.admin.token });
    assert.equal(first.body.data.length, 20, 'the default limit is 20');
    assert.deepEqual(first.body.data.map((r: AuditRecordBody) => r.id), all.slice(0, 20).map((r) => r.id));
    assert.equal(typeof first.body.next_cursor, 'string');

    const page = await h.admin.client.get(`/api/v1/audit-logs?limit=3&action=LOGIN_SUCCESS`, { token: h.admin.token });
    assert.equal(page.status, 200);
    const link = page.headers.get('link');
    const m = /^<([^>]+)>; rel="next"$/.exec(link ?? '');
    assert.ok(m, `Link: ${link}`);
    const next = new URL(m[1]!, h.server.url);
    assert.equal(next.pathname, '/api/v1/audit-logs');
    assert.equal(next.searchParams.get('cursor'), page.body.next_cursor);
    assert.equal(next.searchParams.get('limit'), '3');
    assert.deepEqual(next.searchParams.getAll('action'), ['LOGIN_SUCCESS'], 'the filters carry over');
    const followed = await h.admin.client.get(next.pathname + next.search, { token: h.admin.token });
    assert.equal(followed.status, 200);
    const expected = all.filter((r) => r.action === 'LOGIN_SUCCESS').map((r) => r.id);
    assert.deepEqual([...page.body.data, ...followed.body.data].map((r: AuditRecordBody) => r.id), expected.slice(0, 6));

    const last = await h.admin.client.get(`/api/v1/audit-logs?limit=100&action=CREATE_TASK`, { token: h.admin.token });
    assert.equal(last.body.next_cursor, null);
    assert.equal(last.headers.get('link'), null);
    const exact = await h.admin.client.get(`/api/v1/audit-logs?limit=1&action=CREATE_TASK`, { token: h.admin.token });
    assert.equal(exact.body.data.length, 1);
    assert.equal(exact.body.next_cursor, null, 'a page that holds exactly the rest has no next page');
  });

  test('neither repeats nor skips a record while new records are written between page requests', async () => {
    for (const filter of [new URLSearchParams(), new URLSearchParams([['action', 'CREATE_USER'], ['action', 'LOGIN_SUCCESS']])]) {
      const snapshot = (await stored()).filter((r) => matches(r, filter)).map((r) => r.id);
      const seen: number[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const q = new URLSearchParams(filter);
        q.set('limit', '4');
        if (cursor) q.set('cursor', cursor);
        const res = await h.admin.client.get(`/api/v1/audit-logs?${q}`, { token: h.admin.token });
        assert.equal(res.status, 200, res.text);
        seen.push(...res.body.data.map((r: AuditRecordBody) => r.id));
        cursor = res.body.next_cursor;
        // New records of the very kinds being listed (CREATE_USER, LOGIN_SUCCESS) arrive meanwhile.
        if (pages++ < 3) await h.newUser();
      } while (cursor);
      assert.deepEqual(seen, snapshot, `?${filter}`);
    }
  });

  test('refuses a cursor it did not issue with 400', async () => {
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const bad = [
      'not a cursor!', 'abc', '%00', b64({ b: 0 }), b64({ b: -1 }), b64({ b: 1.5 }), b64({ b: '5' }), b64({}), b64([]), b64(null),
      b64({ b: 2 ** 53 }), 'x'.repeat(201), '',
    ];
    for (const cursor of bad) {
      const res = await h.admin.client.get(`/api/v1/audit-logs?cursor=${encodeURIComponent(cursor)}`, { token: h.admin.token });
      assert.equal(res.status, 400, `cursor ${JSON.stringify(cursor)} → ${res.status} ${res.text}`);
      assert.equal(res.body.code, 'VALIDATION_FAILED');
    }
    const below = (await stored())[5]!.id;
    const good = await h.admin.client.get(`/api/v1/audit-logs?limit=100&cursor=${b64({ b: below })}`, { token: h.admin.token });
    assert.equal(good.status, 200);
    assert.deepEqual(good.body.data.map((r: AuditRecordBody) => r.id), (await stored()).filter((r) => r.id < below).map((r) => r.id));
  });
});

test('every record read through the API matches the row it came from', async () => {
  const rows = await h.server.owner.query<{ id: number; request_id: string; ip: string | null; user_agent: string | null; action: string }>(
    'SELECT id, request_id, ip, user_agent, action FROM audit_log ORDER BY id DESC',
  );
  const api = await listAll(new URLSearchParams(), 100);
  assert.deepEqual(
    api.map((r) => ({ id: r.id, request_id: r.request_id, ip: r.ip, user_agent: r.user_agent, action: r.action })),
    rows,
  );
  assert.ok(api.every((r) => !JSON.stringify(r.metadata).includes('$personal')), 'personal data references are resolved');
});
