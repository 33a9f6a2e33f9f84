// A hostile pass over the audit routes added last: GET /audit-logs/stats, GET /audit-logs/witnesses,
// GET /audit-logs/:id/proof?format=tlog-proof and the tlog checkpoint under a witness policy
// (docs/api.md 4, 5.11). What no schema expects (unknown, repeated and absurd parameters, junk
// bytes, every operator of the search syntax, windows of millennia, other media types), callers
// who may not read the audit log (a USER, nobody, a logged-out session, a deactivated user, an
// ADMIN demoted while the request is in flight), and what the answers, the metrics and the
// server's own log give away (a witness URL's credentials, tokens). Every answer is a 2xx or an
// RFC 9457 problem with a code: never a 500, a stack trace or SQL. Reading the audit log is not an
// audited action (docs/api.md 5 item 3 lists refusals of audited actions): no read, refused or
// not, writes a record.
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MAX_BUCKETS, type AuditStats as Stats } from '../src/modules/audit/audit-stats.service.js';
import { withoutUrlCredentials } from '../src/modules/audit/evidence/witnessing.service.js';
import { cosigner, formatCosignatureVerifierKey } from '../src/tlog/cosignature.js';
import { settled } from './helpers/audit-log.js';
import { Client, assertProblem, login, maxAuditId, type Response, type Session } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { spawnServer, type ServerProcess } from './helpers/process.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, TEST_SIGNING_KEY, createTestDatabase, migratedDataDir, onPostgres, type TestServer } from './helpers/server.js';

// Checkpoints every 200 ms: the proofs below wait for the log to be sealed and signed.
const h = useTestServer({ env: { AUDIT_CHECKPOINT_INTERVAL_MS: '200' } });
let alice: Session;

const API = '/api/v1/audit-logs';

/**
 * What every answer must be: under 500; an error is problem+json with a status, a code, a detail
 * and the request id, and shows no stack trace, source path or SQL.
 */
function assertSane(res: Response, what: string): void {
  assert.ok(res.status < 500, `${what}: ${res.status} ${res.text.slice(0, 300)}`);
  assert.doesNotMatch(res.text, /\bat [\w$.<>]+ \(|node_modules|\/src\/|\.ts:\d+|\bSELECT\b|\bFROM audit_log\b/, `${what} leaks internals: ${res.text.slice(0, 300)}`);
  if (res.status >= 400) {
    assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/, `${what}: ${res.headers.get('content-type')}`);
    assert.equal(res.body.status, res.status, what);
    assert.equal(typeof res.body.code, 'string', `${what}: a code`);
    assert.match(res.body.code, /^[A-Z][A-Z_]+$/, what);
    assert.equal(typeof res.body.detail, 'string', what);
    assert.equal(res.body.stack, undefined, what);
  }
}

/** A stats answer that is bounded and adds up: at most the interval's buckets, each counted once, top lists of ten. */
function assertStatsShape(body: Stats, what: string): void {
  assert.ok(body.interval === 'hour' || body.interval === 'day', what);
  assert.ok(body.buckets.length <= MAX_BUCKETS[body.interval], `${what}: ${body.buckets.length} buckets`);
  assert.equal(body.buckets.reduce((n, b) => n + b.count, 0), body.total, what);
  assert.ok(body.top_actions.length <= 10 && body.top_actors.length <= 10, what);
  for (const b of body.buckets) assert.match(b.start, /^\d{4}-\d\d-\d\dT\d\d:00:00\.000Z$/, what);
}

const get = (as: Session | undefined, p: string, headers?: Record<string, string>) =>
  (as?.client ?? new Client(h.server)).get(p, { token: as?.token, headers });

/** The newest record's id, once the writes a test made before are committed (reads here write none). */
const newestRecord = () => maxAuditId(h.server);

h.before(async () => {
  alice = await h.newUser({ name: 'Alice Hostile' });
  const project = await alice.client.post('/api/v1/projects', { name: 'Hostile' }, { token: alice.token });
  assert.equal(project.status, 201, project.text);
});

/** The UTC date `n` days before today, as YYYY-MM-DD. */
const dayBefore = (n: number) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10);

describe('GET /audit-logs/stats: what no schema expects', () => {
  // [query, the status expected, its code (or codes) when an error]
  const refused: Array<[string, number, string | string[]]> = [
    ['limit=10', 400, 'VALIDATION_FAILED'],
    ['cursor=abc', 400, 'VALIDATION_FAILED'],
    ['evil=1', 400, 'VALIDATION_FAILED'],
    ['include=actors', 400, 'VALIDATION_FAILED'],
    ['include=actors&include=actors', 400, 'VALIDATION_FAILED'],
    ['interval=hour&interval=day', 400, 'VALIDATION_FAILED'],
    ['interval=hour&interval=hour', 400, 'VALIDATION_FAILED'],
    ['interval[]=hour', 400, 'VALIDATION_FAILED'],
    ['interval=', 400, 'VALIDATION_FAILED'],
    ['interval=minute', 400, 'VALIDATION_FAILED'],
    ['interval=HOUR', 400, 'VALIDATION_FAILED'],
    ['interval=0', 400, 'VALIDATION_FAILED'],
    ['interval=-1', 400, 'VALIDATION_FAILED'],
    ['interval=3600.5', 400, 'VALIDATION_FAILED'],
    ['interval=1e308', 400, 'VALIDATION_FAILED'],
    ['from=2026-01-01T00:00:00Z&from=2026-01-02T00:00:00Z', 400, 'VALIDATION_FAILED'],
    ['q=action:LOGOUT&q=action:LOGIN_SUCCESS', 400, 'VALIDATION_FAILED'],
    ['actor_id=0', 400, 'VALIDATION_FAILED'],
    ['actor_id=-1', 400, 'VALIDATION_FAILED'],
    ['actor_id=1.5', 400, 'VALIDATION_FAILED'],
    ['actor_id=1e3', 400, 'VALIDATION_FAILED'],
    ['actor_id=0x10', 400, 'VALIDATION_FAILED'],
    ['actor_id=99999999999999999999', 400, 'VALIDATION_FAILED'],
    ['actor_id=9007199254740992', 400, 'VALIDATION_FAILED'],
    ['actor_id=%20', 400, 'VALIDATION_FAILED'],
    ['resource_id=NaN', 400, 'VALIDATION_FAILED'],
    ['action=NOT_AN_ACTION', 400, 'VALIDATION_FAILED'],
    [`${Array.from({ length: 26 }, () => 'action=LOGOUT').join('&')}`, 400, 'VALIDATION_FAILED'],
    ['result=denied', 400, 'VALIDATION_FAILED'],
    ['from=yesterday', 400, 'VALIDATION_FAILED'],
    ['from=2026-02-30T00:00:00Z', 400, 'VALIDATION_FAILED'],
    ['from=2026-11-28T23:59:60Z', 400, 'VALIDATION_FAILED'],
    ['from=%FF%FE%FD', 400, 'VALIDATION_FAILED'],
    ['from=2026-11-01T00:00:00Z%00', 400, 'VALIDATION_FAILED'],
    // A year PostgreSQL cannot read (ISO 8601's 0000 is 1 BC): refused as a bad value, not a 500.
    ['from=0000-01-01T00:00:00Z&to=0000-01-02T00:00:00Z', 400, 'VALIDATION_FAILED'],
    // Windows that would take hundreds of thousands of buckets: refused before anything is counted.
    ['from=1970-01-01T00:00:00Z&to=9999-12-31T23:59:59Z&interval=hour', 400, 'WINDOW_TOO_WIDE'],
    ['from=1970-01-01T00:00:00Z&to=9999-12-31T23:59:59Z&interval=day', 400, 'WINDOW_TOO_WIDE'],
    ['from=1970-01-01T00:00:00Z&to=9999-12-31T23:59:59Z', 400, 'WINDOW_TOO_WIDE'],
    ['from=0001-01-01T00:00:00Z', 400, 'WINDOW_TOO_WIDE'],
    ['q=created:>=1970-01-01&interval=hour', 400, 'WINDOW_TOO_WIDE'],
    ['q=created:0001-01-01..0001-01-01%20created:2026-11-01..2026-11-02', 400, 'WINDOW_TOO_WIDE'],
    // The day after 9999-12-31 (the end of this range) has a five-digit year: it was a 500 (Date.parse
    // read it as NaN, and toISOString threw); now an end after now is now, as for any other.
    ['q=created:1970-01-01..9999-12-31', 400, 'WINDOW_TOO_WIDE'],
    ['q=created:<=9999-12-31&interval=hour&from=1970-01-01T00:00:00Z', 400, 'WINDOW_TOO_WIDE'],
    // The search syntax's refusals.
    ['q=%FF%FE', 400, 'INVALID_QUERY'],
    ['q=hello', 400, 'INVALID_QUERY'],
    ['q=action:', 400, 'INVALID_QUERY'],
    ['q=-', 400, 'INVALID_QUERY'],
    ['q=%22', 400, 'INVALID_QUERY'],
    ['q=actor:%22a%20b', 400, 'INVALID_QUERY'],
    ['q=unknown:1', 400, 'INVALID_QUERY'],
    ['q=actor:-1', 400, 'INVALID_QUERY'],
    ['q=actor:99999999999999999999', 400, 'INVALID_QUERY'],
    ['q=resource:TASK/0', 400, 'INVALID_QUERY'],
    ['q=resource:TASK/1/2', 400, 'INVALID_QUERY'],
    ['q=ip:999.1.1.1', 400, 'INVALID_QUERY'],
    ['q=ip:10.0.0.0/33', 400, 'INVALID_QUERY'],
    ['q=ip:fe80::1%25eth0', 400, 'INVALID_QUERY'],
    ['q=request:%3Cscript%3E', 400, 'INVALID_QUERY'],
    ['q=created:2026-11-26', 400, 'INVALID_QUERY'],
    ['q=created:2026-11-27..2026-11-26', 400, 'INVALID_QUERY'],
    ['q=created:>=0000-01-01', 400, 'INVALID_QUERY'],
    ['q=created:>=2026-13-01', 400, 'INVALID_QUERY'],
    ['q=created:>=2026-11-01T25:00:00Z', 400, 'INVALID_QUERY'],
    ['q=created:>=2026-11-01T00:00:00%2B99:00', 400, 'INVALID_QUERY'],
    [`q=${encodeURIComponent(Array.from({ length: 21 }, () => 'action:LOGOUT').join(' '))}`, 400, 'INVALID_QUERY'],
    [`q=${'a'.repeat(501)}`, 400, 'INVALID_QUERY'],
    [`q=${encodeURIComponent('😀'.repeat(501))}`, 400, 'INVALID_QUERY'],
    [`q=${'%22'.repeat(500)}`, 400, 'INVALID_QUERY'],
    [`q=${'x'.repeat(15_000)}`, 400, 'INVALID_QUERY'],
    // Past the schema's 16,384 characters the request line is past what the HTTP parser takes: a problem too.
    [`q=${'x'.repeat(16_385)}`, 431, 'HEADERS_TOO_LARGE'],
    // NUL, which PostgreSQL text cannot hold, inside a value the syntax takes (an email).
    ['q=actor:a%00b@example.com', 400, 'VALIDATION_FAILED'],
  ];

  test('each parameter, repetition, number, date and q the route does not take is a 400 problem with its code, and writes nothing', async () => {
    const before = await newestRecord();
    for (const [query, status, code] of refused) {
      const res = await get(h.admin, `${API}/stats?${query}`);
      assertSane(res, query.slice(0, 80));
      assertProblem(res, status, code);
    }
    assert.equal(await newestRecord(), before, 'reading stats, refused or not, writes no record');
  });

  test('a from or to before the year 1 is refused by name, not by the database', async () => {
    for (const [query, field] of [['from=0000-12-31T23:59:59Z', 'from'], ['to=0000-06-01T00:00:00Z', 'to'], ['from=0001-01-01T00:30:00%2B01:00', 'from']]) {
      const res = await get(h.admin, `${API}/stats?${query}`);
      assertProblem(res, 400, 'VALIDATION_FAILED');
      assert.equal(res.body.detail, `${field} must be a date-time from 0001-01-01T00:00:00Z on`);
    }
  });

  test('WINDOW_TOO_WIDE says how many buckets the window needed and what fits, and computes none of them', async () => {
    const res = await get(h.admin, `${API}/stats?from=1970-01-01T00:00:00Z&to=9999-12-31T23:59:59Z&interval=hour`);
    assertProblem(res, 400, 'WINDOW_TOO_WIDE');
    assert.match(res.body.detail, /needs \d+ buckets of a hour; interval=hour covers at most 31 days/);
    assert.deepEqual(res.body.errors?.map((e: { field: string }) => e.field), ['interval']);
  });

  // [query, what the answer must hold]
  const answered: Array<[string, (s: Stats) => void]> = [
    // A window that ends before it starts holds nothing: no bucket, nothing counted.
    ['from=2026-11-29T00:00:00Z&to=2026-11-28T00:00:00Z', (s) => assert.deepEqual([s.buckets.length, s.total], [0, 0])],
    ['from=9999-12-31T23:59:59Z', (s) => assert.deepEqual([s.buckets.length, s.total], [0, 0])],
    ['q=created:9999-12-31T23:59:59.999999Z..9999-12-31T23:59:59.999999Z', (s) => assert.equal(s.buckets.length, 0)],
    // An end in the far future ends now.
    ['to=9999-12-31T23:59:59Z&interval=day', (s) => assert.ok(Date.parse(s.to) <= Date.now() && s.buckets.length <= 31)],
    [`from=${dayBefore(1)}T00:00:00.123456789Z&interval=day`, (s) => assert.deepEqual([s.from, s.buckets.length], [`${dayBefore(1)}T00:00:00.123Z`, 2])],
    [`from=${dayBefore(5)}T00:00:00%2B14:00&interval=day`, (s) => assert.deepEqual([s.from, s.buckets.length], [`${dayBefore(6)}T10:00:00.000Z`, 7])],
    ['action=LOGIN_SUCCESS&action=LOGIN_SUCCESS&action=LOGOUT', (s) => assert.ok(s.top_actions.every((a) => ['LOGIN_SUCCESS', 'LOGOUT'].includes(a.action)))],
    ['actor_id=9007199254740991', (s) => assert.equal(s.total, 0)],
    // Before year 1 a date cannot be written for PostgreSQL: the default window (30 days before
    // its end) starts at 0001-01-01 rather than in year 0, which the database would refuse.
    ['to=0001-01-05T00:00:00Z', (s) => assert.deepEqual([s.interval, s.from, s.buckets.length, s.total], ['day', '0001-01-01T00:00:00.000Z', 4, 0])],
    ['q=created:<0001-01-05', (s) => assert.deepEqual([s.from, s.buckets.length], ['0001-01-01T00:00:00.000Z', 4])],
    ['q=created:<0001-01-01', (s) => assert.deepEqual([s.buckets.length, s.total], [0, 0])],
    // The end of 9999-12-31 is the start of the year 10000 (five digits: it was a 500).
    ['q=created:>9999-12-31', (s) => assert.deepEqual([s.from, s.buckets.length, s.total], ['9999-12-31T23:59:59.999Z', 0, 0])],
    ['q=created:<=9999-12-31&interval=day', (s) => assert.deepEqual([s.buckets.length, s.buckets.at(-1)!.start], [31, `${dayBefore(0)}T00:00:00.000Z`])],
    [`q=created:${dayBefore(3)}..9999-12-31`, (s) => assert.deepEqual([s.interval, s.from, s.buckets.length], ['day', `${dayBefore(3)}T00:00:00.000Z`, 4])],
    ['to=0001-01-01T00:00:00Z', (s) => assert.deepEqual([s.buckets.length, s.total], [0, 0])],
    ['q=created:0001-01-01..0001-01-01&interval=hour', (s) => assert.deepEqual([s.buckets.length, s.total], [24, 0])],
    // An email nobody holds, in any case, matches nothing; junk bytes that are a well-formed value match nothing.
    ['q=actor:NOBODY@EXAMPLE.COM', (s) => assert.equal(s.total, 0)],
    ['q=actor:%FF%FE@x', (s) => assert.equal(s.total, 0)],
    [`q=actor:${encodeURIComponent('é😀@ünïcode.example')}`, (s) => assert.equal(s.total, 0)],
    [`q=request:${'r'.repeat(128)}`, (s) => assert.equal(s.total, 0)],
    ['q=', (s) => assert.ok(s.total > 0)],
    [`q=${encodeURIComponent(' \t ')}`, (s) => assert.ok(s.total > 0)],
    // Every operator of the search syntax at once (20 terms, the most a query may have).
    [
      `q=${encodeURIComponent(
        [
          'action:login_success', 'action:CREATE_PROJECT', '-action:LOGOUT', 'actor:1', `actor:${ADMIN_EMAIL.toUpperCase()}`, 'actor:none', '-actor:999999',
          'resource:USER', 'resource:project', '-resource:TASK/5', 'result:success', '-result:DENIED', 'ip:10.0.0.0/8', 'ip:::ffff:10.1.2.3/128',
          '-ip:2001:db8::/32', 'request:"abc"', '-request:x', 'created:>=2020-01-01', 'created:<=2030-01-01T00:00:00Z', 'created:2026-01-01..2026-12-31T23:59:59.999999Z',
        ].join(' '),
      )}&interval=day`,
      (s) => assert.equal(s.interval, 'day'),
    ],
    [`q=${encodeURIComponent('created:>2026-11-01 created:<2026-11-02 -created:>=2026-11-05')}&interval=day`, (s) => assert.equal(s.interval, 'day')],
  ];

  test('odd but valid windows and every operator of the search syntax answer 200, bounded and adding up', async () => {
    const before = await newestRecord();
    for (const [query, check] of answered) {
      const res = await get(h.admin, `${API}/stats?${query}`);
      assertSane(res, query.slice(0, 80));
      assert.equal(res.status, 200, `${query.slice(0, 80)}: ${res.text.slice(0, 300)}`);
      assertStatsShape(res.body, query);
      check(res.body);
    }
    assert.equal(await newestRecord(), before, 'reading stats writes no record');
  });

  test('Accept: only JSON is served (406 otherwise); other methods are 405; a body is refused', async () => {
    for (const accept of ['text/html', 'text/csv', 'text/plain', 'application/xml', 'application/json;q=0', 'image/*']) {
      const res = await get(h.admin, `${API}/stats`, { accept });
      assertSane(res, accept);
      assertProblem(res, 406, 'NOT_ACCEPTABLE');
    }
    for (const accept of ['application/problem+json', '*/*;q=0.1', 'text/html, application/json;q=0.5', 'application/*']) {
      const res = await get(h.admin, `${API}/stats`, { accept });
      assert.equal(res.status, 200, `${accept}: ${res.text.slice(0, 200)}`);
    }
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      const res = await h.admin.client.request(method, `${API}/stats`, { token: h.admin.token });
      assertSane(res, method);
      assertProblem(res, 405, 'METHOD_NOT_ALLOWED');
    }
  });
});

describe('GET /audit-logs?include=actors: what no schema expects', () => {
  test('the list takes the windows of the year 10000 and of the year 1 that stats take, without a 500', async () => {
    for (const q of ['created:1970-01-01..9999-12-31', 'created:>9999-12-31', 'created:<=9999-12-31', 'created:0001-01-01..0001-01-01', 'created:<0001-01-01']) {
      const res = await get(h.admin, `${API}?include=actors&limit=100&q=${encodeURIComponent(q)}`);
      assertSane(res, q);
      assert.equal(res.status, 200, `${q}: ${res.text.slice(0, 300)}`);
    }
  });

  test('include twice, in another case, empty or naming anything else is 400; once, it names the actors', async () => {
    for (const query of ['include=actors&include=actors', 'include=ACTORS', 'include=', 'include=emails', 'include=actors,emails', 'include[]=actors', 'include=actors%00']) {
      const res = await get(h.admin, `${API}?${query}`);
      assertSane(res, query);
      assertProblem(res, 400, 'VALIDATION_FAILED');
    }
    const res = await get(h.admin, `${API}?include=actors&q=${encodeURIComponent(`actor:${alice.id}`)}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(Object.keys(res.body.actors), [String(alice.id)]);
    assert.deepEqual(res.body.actors[String(alice.id)], { email: alice.email, name: 'Alice Hostile' });
  });
});

describe('GET /audit-logs/:id/proof?format=tlog-proof', () => {
  let own: number;
  let size: number;

  test('a sealed record answers a tlog-proof; a record that does not exist, is not covered yet or is another\'s answers a problem', async () => {
    const head = await settled(h.server, h.admin);
    size = head.tree_size;
    const [row] = await h.server.owner.query<{ id: number; seq: number }>(
      'SELECT s.record_id AS id, s.seq::int AS seq FROM audit_seal s JOIN audit_log l ON l.id = s.record_id WHERE l.actor_id = $1 ORDER BY s.seq DESC LIMIT 1',
      [alice.id],
    );
    assert.ok(row && row.seq >= 1, 'one of alice\'s records is sealed, not first');
    own = row.id;
    const before = await newestRecord();

    // Another user's record is the ADMIN's to read, as every record is.
    const ok = await get(h.admin, `${API}/${own}/proof?format=tlog-proof`);
    assert.equal(ok.status, 200, ok.text);
    assert.match(ok.headers.get('content-type') ?? '', /^text\/plain/);
    assert.match(ok.text, new RegExp(`^c2sp\\.org/tlog-proof@v1\\nextra [A-Za-z0-9+/=]+\\nindex ${row.seq}\\n`));

    // Not there at all; there but not covered by the checkpoint asked for (tree_size 1 holds seq 0 only); a size never signed.
    assertProblem(await get(h.admin, `${API}/${before + 1000}/proof?format=tlog-proof`), 404, 'NOT_FOUND');
    assertProblem(await get(h.admin, `${API}/${own}/proof?format=tlog-proof&tree_size=1`), 404, 'NOT_FOUND');
    assertProblem(await get(h.admin, `${API}/${own}/proof?format=tlog-proof&tree_size=${size + 1000}`), 404, 'NOT_FOUND');
    assertProblem(await get(h.admin, `${API}/${Number.MAX_SAFE_INTEGER}/proof?format=tlog-proof`), 404, 'NOT_FOUND');

    for (const bad of ['abc', '0', '-1', '1.5', '1e3', '0x1', '%20', '9007199254740992', '99999999999999999999', '%FF', '1%00']) {
      const res = await get(h.admin, `${API}/${bad}/proof?format=tlog-proof`);
      assertSane(res, bad);
      assertProblem(res, 400, 'VALIDATION_FAILED');
    }
    for (const query of ['format=tlog-proof&format=tlog-proof', 'format=tlog-proof&format=json', 'format=TLOG-PROOF', 'format=tlog-proof%00', 'format[]=tlog-proof',
      'format=tlog-proof&tree_size=0', 'format=tlog-proof&tree_size=-5', 'format=tlog-proof&tree_size=1.5', 'format=tlog-proof&tree_size=99999999999999999999',
      'format=tlog-proof&tree_size=1&tree_size=2', 'format=tlog-proof&evil=1', 'format=ndjson']) {
      const res = await get(h.admin, `${API}/${own}/proof?${query}`);
      assertSane(res, query);
      assertProblem(res, 400, 'VALIDATION_FAILED');
    }
    assert.equal(await newestRecord(), before, 'reading proofs writes no record');
  });

  test('Accept: JSON, text/plain and wildcards are served; any other type is 406', async () => {
    for (const accept of ['text/plain', 'text/*', '*/*', 'text/plain; charset=utf-8']) {
      const res = await get(h.admin, `${API}/${own}/proof?format=tlog-proof`, { accept });
      assert.equal(res.status, 200, `${accept}: ${res.text.slice(0, 200)}`);
      assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    }
    for (const accept of ['text/html', 'application/xml', 'text/plain;q=0', 'image/png']) {
      const res = await get(h.admin, `${API}/${own}/proof?format=tlog-proof`, { accept });
      assertSane(res, accept);
      assertProblem(res, 406, 'NOT_ACCEPTABLE');
    }
    // A client that takes JSON only but asks for format=tlog-proof is served the text it asked
    // for by name (the parameter wins over Accept); never a 500.
    const jsonOnly = await get(h.admin, `${API}/${own}/proof?format=tlog-proof`, { accept: 'application/json' });
    assert.ok(jsonOnly.status === 200 || jsonOnly.status === 406, jsonOnly.text.slice(0, 200));
    assertSane(jsonOnly, 'Accept: application/json');
  });
});

describe('the tlog routes', () => {
  test('a tile or entry-bundle path that is not tlog-tiles\' is 400, one beyond the tree 404; the checkpoint takes no parameter', async () => {
    const before = await newestRecord();
    for (const tile of ['0/0', '0/0001', '0/abc', '0/000.p/0', '0/000.p/257', '0/000.p/-1', '0/000.p/1.5', '64/000', '-1/000', '0/%00', '0/%FF',
      '0/x999/x999/x999/x999/x999/x999/999', 'entries/000.p/99999999999999999999', 'entries/x9007199254740991/000',
      `0/${Array.from({ length: 13 }, (_, i) => `x${String(i).padStart(3, '0')}`).join('/')}/000`]) {
      const res = await get(h.admin, `${API}/tlog/tile/${tile}`);
      assertSane(res, tile);
      assertProblem(res, 400, 'VALIDATION_FAILED');
    }
    for (const tile of ['0/999', 'entries/x001/000', '3/000']) assertProblem(await get(h.admin, `${API}/tlog/tile/${tile}`), 404, 'NOT_FOUND');
    assertProblem(await get(h.admin, `${API}/tlog/tile/0/000?x=1`), 400, 'VALIDATION_FAILED');
    assertProblem(await get(h.admin, `${API}/tlog/checkpoint?x=1`), 400, 'VALIDATION_FAILED');
    assertProblem(await get(h.admin, `${API}/tlog/checkpoint`, { accept: 'text/html' }), 406, 'NOT_ACCEPTABLE');
    assert.equal(await newestRecord(), before);
  });
});

describe('GET /audit-logs/witnesses without a policy', () => {
  test('says that no witness is asked, takes no parameter, and names nothing', async () => {
    const res = await get(h.admin, `${API}/witnesses`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { policy: null, quorum_met: false, newest_witnessed: null, witnesses: [] });
    for (const query of ['x=1', 'policy=1', 'verbose=true', 'format=json', 'include=actors']) {
      const bad = await get(h.admin, `${API}/witnesses?${query}`);
      assertSane(bad, query);
      assertProblem(bad, 400, 'VALIDATION_FAILED');
    }
    assertProblem(await get(h.admin, `${API}/witnesses`, { accept: 'text/plain' }), 406, 'NOT_ACCEPTABLE');
  });

  test('without a policy, the tlog checkpoint is the newest one and a tlog-proof is against it', async () => {
    const head = await settled(h.server, h.admin);
    const res = await get(h.admin, `${API}/tlog/checkpoint`);
    assert.equal(res.status, 200, res.text);
    assert.match(res.text, new RegExp(`\\n${head.tree_size}\\n`));
  });
});

describe('who may read', () => {
  const routes = () => [
    `${API}/stats`,
    `${API}/stats?interval=hour`,
    `${API}/stats?q=${encodeURIComponent(`actor:${ADMIN_EMAIL}`)}`,
    `${API}/witnesses`,
    `${API}/1/proof?format=tlog-proof`,
    `${API}/999999999/proof?format=tlog-proof`,
    `${API}?include=actors`,
    `${API}/tlog/checkpoint`,
  ];

  /** Each route, as `as`: the status and code expected; answers hold no email, name or record. */
  async function refusedEverywhere(as: Session | undefined, status: number, code: string | string[], headers?: Record<string, string>) {
    for (const route of routes()) {
      const res = await (as?.client ?? new Client(h.server)).get(route, { token: as?.token, headers });
      assertSane(res, route);
      assertProblem(res, status, code);
      assert.ok(!res.text.includes(ADMIN_EMAIL) && !res.text.includes(alice.email) && !res.text.includes('Alice Hostile'), `${route} names nobody: ${res.text}`);
    }
  }

  test('a USER is refused with 403, whether the record exists or not, and the refusal writes no record', async () => {
    const bob = await h.newUser({ name: 'Bob Reader' });
    const before = await newestRecord();
    await refusedEverywhere(bob, 403, 'FORBIDDEN');
    // A record that exists and one that does not are refused alike: nothing to tell them apart.
    const [a, b] = [await get(bob, `${API}/1/proof?format=tlog-proof`), await get(bob, `${API}/999999999/proof?format=tlog-proof`)];
    assert.deepEqual([a.status, a.body.code, a.body.detail], [b.status, b.body.code, b.body.detail]);
    // Not an audited action (docs/api.md 5 item 3): no DENIED record, for any of them.
    assert.equal(await newestRecord(), before, 'a USER\'s refused reads write no record');
  });

  test('a USER is refused (403) before the query is looked at, whatever it holds, and nothing is counted', async () => {
    const bob = await h.newUser();
    const before = await newestRecord();
    for (const query of ['interval=minute', 'evil=1', 'from=1970-01-01T00:00:00Z&interval=hour', 'q=hello', `q=${'a'.repeat(501)}`]) {
      const res = await get(bob, `${API}/stats?${query}`);
      assertSane(res, query);
      // The role is checked before the schema (audit.routes.ts): a USER learns nothing of the query's rules.
      assertProblem(res, 403, 'FORBIDDEN');
    }
    assert.equal(await newestRecord(), before);
  });

  test('nobody, a forged token and a malformed header are 401 UNAUTHENTICATED, with no record', async () => {
    const before = await newestRecord();
    await refusedEverywhere(undefined, 401, 'UNAUTHENTICATED');
    const forged = `${h.admin.token.split('.').slice(0, 2).join('.')}.${randomBytes(32).toString('base64url')}`;
    await refusedEverywhere(undefined, 401, 'UNAUTHENTICATED', { authorization: `Bearer ${forged}` });
    await refusedEverywhere(undefined, 401, 'UNAUTHENTICATED', { authorization: 'Basic YWRtaW46YWRtaW4=' });
    await refusedEverywhere(undefined, 401, 'UNAUTHENTICATED', { authorization: `Bearer ${'x'.repeat(4000)}` });
    assert.equal(await newestRecord(), before);
  });

  test('an ADMIN logged out a moment ago is refused (401 TOKEN_REVOKED) on the very next request', async () => {
    const other = await h.newUser({ role: 'ADMIN' });
    assert.equal((await get(other, `${API}/stats`)).status, 200);
    const out = await other.client.post('/api/v1/auth/logout', undefined, { token: other.token });
    assert.equal(out.status, 204, out.text);
    const before = await newestRecord();
    await refusedEverywhere(other, 401, 'TOKEN_REVOKED');
    assert.equal(await newestRecord(), before);
  });

  test('an ADMIN deactivated a moment ago is refused (403 ACCOUNT_DEACTIVATED) on the very next request', async () => {
    const other = await h.newUser({ role: 'ADMIN' });
    assert.equal((await get(other, `${API}/witnesses`)).status, 200);
    const off = await h.admin.client.put(`/api/v1/users/${other.id}/active`, { active: false }, { token: h.admin.token });
    assert.equal(off.status, 200, off.text);
    const before = await newestRecord();
    await refusedEverywhere(other, 403, 'ACCOUNT_DEACTIVATED');
    assert.equal(await newestRecord(), before);
  });

  test('an ADMIN demoted while reading: each read is the 200 of before or the 403 of after, and the next one after the demotion is refused', async () => {
    const carol = await h.newUser({ role: 'ADMIN', name: 'Carol Demoted' });
    const role = async (r: 'ADMIN' | 'USER') => {
      const res = await h.admin.client.put(`/api/v1/users/${carol.id}/role`, { role: r }, { token: h.admin.token });
      assert.equal(res.status, 200, res.text);
    };
    const reads = [`${API}/stats`, `${API}/witnesses`, `${API}?include=actors&limit=5`, `${API}/stats?interval=day&q=result:SUCCESS`];
    const seen = { before: 0, after: 0 };
    const start = await newestRecord();
    const ROUNDS = 12;
    for (let round = 0; round < ROUNDS; round++) {
      if (round > 0) await role('ADMIN');
      // The reads and the demotion fired together.
      const [, ...answers] = await Promise.all([role('USER'), ...reads.map((r) => get(carol, r))]);
      for (const [i, res] of answers.entries()) {
        assertSane(res, reads[i]!);
        if (res.status === 200) {
          seen.before++;
          if (reads[i]!.includes('stats')) assertStatsShape(res.body, reads[i]!);
        } else {
          assertProblem(res, 403, 'FORBIDDEN');
          seen.after++;
        }
      }
      // The demotion has answered: the very next request is refused, on every route.
      for (const r of reads) assertProblem(await get(carol, r), 403, 'FORBIDDEN');
    }
    assert.equal(seen.before + seen.after, ROUNDS * reads.length);
    // Only the role changes were recorded (one per PUT): no read, allowed or refused, wrote one.
    const rows = await h.server.owner.query<{ action: string; result: string }>('SELECT action, result FROM audit_log WHERE id > $1 ORDER BY id', [start]);
    assert.deepEqual(new Set(rows.map((r) => `${r.action}/${r.result}`)), new Set(['CHANGE_USER_ROLE/SUCCESS']));
    assert.equal(rows.length, ROUNDS * 2 - 1);
  });

  test('an ADMIN reading stats, witnesses and proofs writes no record', async () => {
    const before = await newestRecord();
    for (const route of routes()) {
      const res = await get(h.admin, route);
      assertSane(res, route);
    }
    assert.equal(await newestRecord(), before);
  });
});

test('withoutUrlCredentials masks a URL\'s user and password, up to the authority\'s last @, and nothing else', () => {
  const cases: Array<[string, string]> = [
    ['http://u:p@127.0.0.1:1/', 'http://[redacted]@127.0.0.1:1/'],
    ['https://user:p@ss@w.example:8443/x?y=1', 'https://[redacted]@w.example:8443/x?y=1'],
    ['https://token@w.example', 'https://[redacted]@w.example'],
    ['HTTPS://:only-password@w.example/', 'HTTPS://[redacted]@w.example/'],
    ['https://w.example/path@not-userinfo', 'https://w.example/path@not-userinfo'],
    ['https://w.example?to=a@b', 'https://w.example?to=a@b'],
    ['mailto:someone@example.com', 'mailto:someone@example.com'],
    ['witness a k+1+A http://a:1@h1/\nwitness b k+2+B https://h2/\nlog x http://c:2@h3', 'witness a k+1+A http://[redacted]@h1/\nwitness b k+2+B https://h2/\nlog x http://[redacted]@h3'],
    ['network: Request cannot be constructed from a URL that includes credentials: http://u:s@h:1/add-checkpoint', 'network: Request cannot be constructed from a URL that includes credentials: http://[redacted]@h:1/add-checkpoint'],
  ];
  for (const [text, shown] of cases) assert.equal(withoutUrlCredentials(text), shown, text);
});

const SECRET = `S3cret-${randomBytes(6).toString('hex')}`;
const WITNESS_USER = `wuser${randomBytes(3).toString('hex')}`;
const JWT_SECRET = `jwt-${randomBytes(24).toString('hex')}`;

interface PolicyServer {
  proc: ServerProcess;
  /** Where the policy file is. */
  root: string;
  close(): Promise<void>;
}

/**
 * The server process with the policy: on the pass's own kind of database (a new PostgreSQL
 * database, or PGlite in its data directory), started while the other tests run.
 */
async function startPolicyServer(): Promise<PolicyServer> {
  const root = mkdtempSync(path.join(tmpdir(), 'teamlog-hostile-'));
  const vkey = formatCosignatureVerifierKey(cosigner('leaky.test', generateKeyPairSync('ed25519').privateKey));
  const policyFile = path.join(root, 'policy.txt');
  writeFileSync(policyFile, `witness leaky.test ${vkey} http://${WITNESS_USER}:${SECRET}@127.0.0.1:1/\nquorum leaky.test\n`);
  const database = onPostgres ? await createTestDatabase() : undefined;
  const dataDir = database ? mkdtempSync(path.join(tmpdir(), 'teamlog-hostile-data-')) : await migratedDataDir('teamlog-hostile-data-');
  const proc = await spawnServer({
    DATA_DIR: dataDir,
    ...(database ? { DATABASE_URL: database.databaseUrl! } : {}),
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    JWT_SECRET,
    AUDIT_SIGNING_KEY: TEST_SIGNING_KEY,
    AUDIT_LOG_ORIGIN: `teamlog.test/hostile-${process.pid}`,
    AUDIT_WITNESS_POLICY: policyFile,
    AUDIT_WITNESS_INTERVAL_MS: '200',
    AUDIT_CHECKPOINT_INTERVAL_MS: '200',
    RATE_LIMIT_PER_MINUTE: '0',
    PASSWORD_HASH_COST: '10',
    // The most the service logs.
    LOG_LEVEL: 'debug',
  });
  const close = async () => {
    await proc.stop();
    await database?.drop();
    rmSync(root, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await proc.waitReady();
  } catch (err) {
    await close();
    throw err;
  }
  return { proc, root, close };
}

let policyServer: Promise<PolicyServer> | undefined;
// Started with the file's own set-up, so that its start overlaps the tests before it.
h.before(async () => {
  policyServer = startPolicyServer();
  policyServer.catch(() => {}); // Awaited (and its failure reported) by the tests that need it.
});
after(async () => {
  await (await policyServer?.catch(() => undefined))?.close();
});

// ── A server process with a witness policy, whose log is read ───────────────────────────────────
// A spawned server, so that its log (stdout, at debug, the most it writes) can be read. The policy
// names one witness only, at a URL with credentials and a port nobody listens on: its quorum is
// never met, so the answers below do not depend on timing.
describe('a witness policy whose URL holds credentials', () => {
  let proc: ServerProcess;
  let root: string;
  let admin: Session;
  let client: Client;

  interface WitnessesBody {
    policy: string;
    quorum_met: boolean;
    newest_witnessed: unknown;
    witnesses: Array<{ name: string; vkey: string; url: string | null; last_cosigned_size: number | null; last_error: string | null }>;
  }

  before(async () => {
    ({ proc, root } = await policyServer!);
    client = new Client({ url: proc.url } as TestServer);
    admin = await login({ url: proc.url } as TestServer, ADMIN_EMAIL, ADMIN_PASSWORD, client);
    // A record to seal and sign, so that the submitter tries the witness.
    const made = await client.post('/api/v1/projects', { name: 'Witnessed' }, { token: admin.token });
    assert.equal(made.status, 201, made.text);
    const deadline = Date.now() + 20_000;
    for (;;) {
      const res = await client.get<WitnessesBody>(`${API}/witnesses`, { token: admin.token });
      if (res.status === 200 && res.body.witnesses[0]?.last_error) break;
      if (Date.now() > deadline) throw new Error(`the witness was never tried: ${res.text}\n${proc.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  test('GET /audit-logs/witnesses shows the policy, the URL and the error without the credentials, and not the policy file\'s path', async () => {
    const res = await client.get<WitnessesBody>(`${API}/witnesses`, { token: admin.token });
    assert.equal(res.status, 200, res.text);
    assert.ok(!res.text.includes(SECRET), `the witness's password is not shown: ${res.text}`);
    assert.ok(!res.text.includes(WITNESS_USER), `nor its user name: ${res.text}`);
    assert.ok(!res.text.includes(root), 'nor where the policy file is');
    const [w] = res.body.witnesses;
    assert.equal(w!.url, 'http://[redacted]@127.0.0.1:1/');
    assert.match(res.body.policy, /^witness leaky\.test \S+ http:\/\/\[redacted\]@127\.0\.0\.1:1\/\nquorum leaky\.test\n$/);
    assert.equal(typeof w!.last_error, 'string');
    assert.equal(w!.last_cosigned_size, null);
    assert.equal(res.body.quorum_met, false);
    assert.equal(res.body.newest_witnessed, null);
  });

  test('no checkpoint meets the quorum: the tlog checkpoint and a default tlog-proof are 404, a proof against a named size is served', async () => {
    assertProblem(await client.get(`${API}/tlog/checkpoint`, { token: admin.token }), 404, 'NOT_FOUND');
    const latest = await client.get(`${API}/checkpoints/latest`, { token: admin.token });
    assert.equal(latest.status, 200, latest.text);
    assert.equal(latest.body.witnessed, false);
    assert.deepEqual(latest.body.cosignatures, []);
    const proof = await client.get(`${API}/1/proof?format=tlog-proof`, { token: admin.token });
    assertProblem(proof, 404, 'NOT_FOUND');
    assert.match(proof.body.detail, /witness/i);
    const named = await client.get(`${API}/1/proof?format=tlog-proof&tree_size=${latest.body.tree_size}`, { token: admin.token });
    assert.equal(named.status, 200, named.text);
    assert.ok(!named.text.includes(SECRET));
    // A USER learns nothing of the policy or its witnesses.
    const user = await client.post('/api/v1/users', { email: `hostile-${randomBytes(4).toString('hex')}@test.local`, name: 'U', password: 'user-password-1' }, { token: admin.token });
    assert.equal(user.status, 201, user.text);
    const u = await login({ url: proc.url } as TestServer, user.body.email, 'user-password-1', new Client({ url: proc.url } as TestServer));
    const refused = await u.client.get(`${API}/witnesses`, { token: u.token });
    assertProblem(refused, 403, 'FORBIDDEN');
    assert.ok(!refused.text.includes('leaky') && !refused.text.includes(SECRET));
  });

  test('the metrics name no credential, token or secret', async () => {
    const res = await fetch(`${proc.url}/metrics`);
    assert.equal(res.status, 200);
    const text = await res.text();
    for (const s of [SECRET, WITNESS_USER, admin.token, admin.refreshToken, ADMIN_PASSWORD, JWT_SECRET]) assert.ok(!text.includes(s), `the metrics hold ${s.slice(0, 12)}…`);
  });

  /** The log once the line of the request that answered `res` is in it (pino writes asynchronously). */
  async function logAfter(res: Response): Promise<string> {
    const id = res.headers.get('x-request-id')!;
    const deadline = Date.now() + 10_000;
    while (!proc.output().includes(id)) {
      if (Date.now() > deadline) throw new Error(`no log line for request ${id}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return proc.output();
  }

  test('the server\'s log holds no token, password or signing secret, whatever the requests sent', async () => {
    // Credentials where a careless client puts them: a body, a refused login, a header.
    await client.post('/api/v1/auth/login', { email: ADMIN_EMAIL, password: `${ADMIN_PASSWORD}-wrong` });
    await client.post('/api/v1/auth/refresh', { refresh_token: admin.refreshToken });
    const last = await client.get(`${API}/stats`, { token: admin.token, headers: { cookie: `session=${admin.token}` } });
    const out = await logAfter(last);
    assert.ok(out.length > 0 && out.includes('request completed'), 'the log was read');
    for (const [name, s] of Object.entries({ accessToken: admin.token, refreshToken: admin.refreshToken, adminPassword: ADMIN_PASSWORD, jwtSecret: JWT_SECRET })) {
      assert.ok(!out.includes(s), `the log holds the ${name}`);
    }
    assert.ok(!out.includes('BEGIN PRIVATE KEY'), 'the log holds the signing key');
  });

  // The submitter logs a witness's errors, and fetch's quote the URL (witness.submitter.ts masks them).
  test('the server\'s log holds no credential of a witness URL', () => {
    const out = proc.output();
    assert.ok(!out.includes(SECRET), 'the log holds the witness URL\'s password');
  });

  test('a token sent in the query string is refused (400) and not written to the log', async () => {
    const res = await client.get(`${API}/stats?access_token=${admin.token}`, { token: admin.token });
    assertProblem(res, 400, 'VALIDATION_FAILED');
    const out = await logAfter(res);
    assert.ok(!out.includes(admin.token), `the log holds a token sent in the URL: ${out.split('\n').filter((l) => l.includes(res.headers.get('x-request-id')!)).join('\n')}`);
  });
});
