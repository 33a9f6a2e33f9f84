// GET /audit-logs/stats and GET /audit-logs?include=actors (docs/api.md 4; docs/audit-search.md,
// "Activity counts"): the counts are those of the records the list gives for the same filters
// and q, worked out here from the list itself; every UTC bucket of the window is present and
// they sum to the total; the top lists are ordered and at most ten; the window's defaults and
// its limits; and the actors beside a page name exactly that page's actors, as the API shows
// users (a deleted one by the email its deletion recorded, "[redacted]" once erased).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { committed } from './helpers/audit-log.js';
import { TeamlogError, createClient } from '../client/src/index.js';
import { Client, assertProblem, randomIp, type Session } from './helpers/client.js';
import { allPages, createProject, createTask, type AuditRecordBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD } from './helpers/server.js';
import type { AuditStats as Stats } from '../src/modules/audit/audit-stats.service.js';

const h = useTestServer();
let alice: Session;
let bob: Session;
/** Users who act only in the planted records: more actors than a top list holds. */
let crowd: Session[];

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Twelve actions, so that the top list has more than ten to choose from. */
const ACTIONS = [
  'CREATE_TASK', 'CHANGE_TASK_STATUS', 'ASSIGN_TASK', 'LOGIN_SUCCESS', 'LOGIN_FAILURE', 'LOGOUT',
  'DELETE_TASK', 'CREATE_PROJECT', 'ADD_PROJECT_MEMBER', 'CHANGE_USER_ROLE', 'EXPORT_AUDIT_LOG', 'DELETE_PROJECT',
];

/** Records written behind the service's back over ten days of March 2025 (UTC), some on the edges of days and hours. */
function planted(): Array<{ at: string; actor: number | null; action: string; result: string }> {
  const out: Array<{ at: string; actor: number | null; action: string; result: string }> = [];
  const actors = [alice.id, bob.id, ...crowd.map((u) => u.id), null, 999_999_999];
  for (let i = 0; i < 120; i++) {
    // Days 1..10, skipping day 4 (an empty bucket between full ones); hours and minutes spread.
    const day = 1 + (i % 9) + (i % 9 >= 3 ? 1 : 0);
    const at = new Date(Date.UTC(2025, 2, day, (i * 7) % 24, (i * 13) % 60, i % 2 === 0 ? 0 : 59, i % 3 === 0 ? 0 : 999));
    out.push({ at: at.toISOString(), actor: actors[(i * 7 + (i >> 3)) % actors.length]!, action: ACTIONS[(i * 5) % ACTIONS.length]!, result: i % 7 === 0 ? 'DENIED' : i % 11 === 0 ? 'FAILURE' : 'SUCCESS' });
  }
  // The very first and last instants of the window's days.
  out.push({ at: '2025-03-01T00:00:00.000Z', actor: alice.id, action: 'LOGIN_SUCCESS', result: 'SUCCESS' });
  out.push({ at: '2025-03-10T23:59:59.999Z', actor: bob.id, action: 'LOGOUT', result: 'SUCCESS' });
  return out;
}

h.before(async () => {
  alice = await h.newUser({ name: 'Alice' });
  bob = await h.newUser({ name: 'Bob' });
  crowd = [];
  for (let i = 0; i < 11; i++) crowd.push(await h.newUser({ name: `Crowd ${i}` }));
  const project = await createProject(alice, { name: 'Stats' });
  await createTask(alice, project.id, { title: 'Counted' });
  await createTask(alice, project.id, { title: 'Counted too' });
  await createProject(bob, { name: 'Bob counts' });
  const refused = await bob.client.put(`/api/v1/users/${alice.id}/role`, { role: 'ADMIN' }, { token: bob.token });
  assert.equal(refused.status, 403, refused.text);
  const records = planted();
  await committed(h.server.owner, async (q) => {
    for (const r of records) {
      await q.query(
        `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, "timestamp", result, metadata, request_id)
         VALUES ($1, $2, 'TASK', 1, $3::timestamptz, $4, '{}', 'stats-planted')`,
        [r.actor, r.action, r.at, r.result],
      );
    }
  });
});

async function stats(query: string, as: Session = h.admin): Promise<Stats> {
  const res = await as.client.get<Stats>(`/api/v1/audit-logs/stats?${query}`, { token: as.token });
  assert.equal(res.status, 200, `?${query}: ${res.text}`);
  assert.deepEqual(Object.keys(res.body), ['interval', 'from', 'to', 'buckets', 'top_actions', 'top_actors', 'total']);
  return res.body;
}

const listed = (query: string) => allPages<AuditRecordBody>(h.admin, `/api/v1/audit-logs?limit=100&${query}`);

/** Counts of `records` by key, most first, ties by key (no actor last), at most ten. */
function top<K extends string | number | null>(records: AuditRecordBody[], key: (r: AuditRecordBody) => K): Array<[K, number]> {
  const counts = new Map<K, number>();
  for (const r of records) counts.set(key(r), (counts.get(key(r)) ?? 0) + 1);
  const order = (a: K, b: K) => (a === null ? 1 : b === null ? -1 : a < b ? -1 : a > b ? 1 : 0);
  return [...counts].sort((a, b) => b[1] - a[1] || order(a[0], b[0])).slice(0, 10);
}

/**
 * The stats of `query` against the records its list gives; `fromWindow`: the list is given the
 * window's start too (a query without one, whose stats take the default window).
 */
async function expectCounts(query: string, fromWindow = false): Promise<Stats> {
  const s = await stats(query);
  const list = new URLSearchParams(query);
  list.delete('interval'); // the stats' own
  if (fromWindow) list.set('from', s.from);
  const records = await listed(list.toString());
  const size = s.interval === 'hour' ? HOUR : DAY;
  assert.equal(s.total, records.length, `?${query}: total`);
  assert.equal(s.buckets.reduce((n, b) => n + b.count, 0), s.total, `?${query}: the buckets sum to the total`);
  const perBucket = new Map<string, number>();
  for (const r of records) {
    const start = new Date(Math.floor(Date.parse(r.timestamp) / size) * size).toISOString();
    perBucket.set(start, (perBucket.get(start) ?? 0) + 1);
  }
  assert.deepEqual(s.buckets.filter((b) => b.count > 0).map((b) => [b.start, b.count]), [...perBucket].sort(), `?${query}: the buckets`);
  assert.deepEqual(s.top_actions.map((a) => [a.action, a.count]), top(records, (r) => r.action), `?${query}: the top actions`);
  assert.deepEqual(s.top_actors.map((a) => [a.actor_id, a.count]), top(records, (r) => r.actor_id), `?${query}: the top actors`);
  return s;
}

const WINDOW = 'created:2025-03-01..2025-03-10';
const q = (text: string) => `q=${encodeURIComponent(text)}`;

describe('counts', () => {
  test('match the list for the same q and filters, bucket by bucket, action by action, actor by actor', async () => {
    const all = await expectCounts(q(WINDOW));
    assert.equal(all.total, 122);
    await expectCounts(q(`${WINDOW} action:CREATE_TASK`));
    await expectCounts(q(`${WINDOW} action:LOGIN_FAILURE action:LOGOUT -result:SUCCESS`));
    await expectCounts(q(`${WINDOW} actor:${alice.email}`));
    await expectCounts(q(`${WINDOW} actor:none`));
    await expectCounts(q(`${WINDOW} -actor:${bob.id} result:DENIED`));
    await expectCounts(`${q(WINDOW)}&action=ASSIGN_TASK&action=LOGOUT&result=SUCCESS`);
    await expectCounts(`${q(WINDOW)}&actor_id=${crowd[3]!.id}`);
    // from and to alone make the window, narrower than the q's.
    await expectCounts(`from=2025-03-03T12:00:00Z&to=2025-03-06T00:00:00Z&${q('resource:TASK')}`);
    // Two created: alternatives: the window spans both, the records are those of either.
    const two = await expectCounts(q('created:2025-03-01..2025-03-01 created:2025-03-09..2025-03-10'));
    assert.equal(two.buckets.length, 10, 'every day between the two ranges is a bucket');
    assert.deepEqual(two.buckets.slice(1, 8).map((b) => b.count), [0, 0, 0, 0, 0, 0, 0]);
  });

  test('every bucket of the window is there, a whole UTC day or hour, oldest first, 0 when empty', async () => {
    const days = await stats(q(WINDOW));
    assert.equal(days.interval, 'day', 'ten days: days');
    assert.deepEqual(days.buckets.map((b) => b.start), Array.from({ length: 10 }, (_, i) => new Date(Date.UTC(2025, 2, 1 + i)).toISOString()));
    assert.equal(days.buckets[3]!.count, 0, 'the empty day is there');
    assert.ok(days.buckets.every((b, i) => i === 3 || b.count > 0));
    assert.equal(days.from, '2025-03-01T00:00:00.000Z');
    assert.equal(days.to, '2025-03-11T00:00:00.000Z');

    const hours = await expectCounts(q('created:2025-03-02..2025-03-02'));
    assert.equal(hours.interval, 'hour', 'one day: hours');
    assert.deepEqual(hours.buckets.map((b) => b.start), Array.from({ length: 24 }, (_, i) => new Date(Date.UTC(2025, 2, 2, i)).toISOString()));
    assert.ok(hours.buckets.some((b) => b.count === 0));

    // Asked for: hours over several days, days over one.
    assert.equal((await expectCounts(`${q(WINDOW)}&interval=hour`)).buckets.length, 240);
    const oneDay = await expectCounts(`${q('created:2025-03-02..2025-03-02')}&interval=day`);
    assert.deepEqual(oneDay.buckets.map((b) => b.start), ['2025-03-02T00:00:00.000Z']);

    // A window that starts inside an hour starts with that hour; a record on the last instant of a day is in it.
    const edge = await expectCounts(`from=2025-03-10T22:30:00Z&to=2025-03-11T00:00:00Z`);
    assert.deepEqual(edge.buckets.map((b) => b.start), ['2025-03-10T22:00:00.000Z', '2025-03-10T23:00:00.000Z']);
    assert.ok(edge.buckets[1]!.count >= 1, 'the record at 23:59:59.999 is counted in the hour that holds it');
  });

  test('the top lists hold ten at most, most frequent first, ties by name or id, with the actors named', async () => {
    const s = await stats(q(WINDOW));
    assert.equal(s.top_actions.length, 10, 'twelve actions: the ten most frequent');
    assert.equal(s.top_actors.length, 10, 'more than ten actors: ten');
    for (const list of [s.top_actions, s.top_actors] as Array<Array<{ count: number }>>) {
      for (let i = 1; i < list.length; i++) assert.ok(list[i - 1]!.count >= list[i]!.count, JSON.stringify(list));
    }
    const users = new Map([alice, bob, ...crowd].map((u) => [u.id, u]));
    for (const a of s.top_actors) {
      const user = a.actor_id === null ? undefined : users.get(a.actor_id);
      if (user) assert.equal(a.email, user.email);
      else assert.deepEqual([a.email, a.name], [null, null], `actor ${a.actor_id}: none, or a user that never existed`);
    }
    const named = s.top_actors.find((a) => a.actor_id === alice.id);
    if (named) assert.equal(named.name, 'Alice');
  });

  test('without a start the window is the 30 days before its end (from the start of that day), which is now at the latest', async () => {
    const before = Date.now();
    const s = await expectCounts(q(`actor:${alice.id}`), true);
    const after = Date.now();
    const to = Date.parse(s.to);
    assert.ok(to >= before && to <= after, `${s.to} is the time of the request`);
    assert.equal(Date.parse(s.from), Math.floor((to - 30 * DAY) / DAY) * DAY);
    assert.equal(s.interval, 'day');
    assert.equal(s.buckets.length, 31, 'the days from the one 30 days ago to today');
    assert.ok(s.total >= 4, 'alice\'s records of today (her login, a project, two tasks)');
    assert.equal(s.buckets.at(-1)!.count, s.total, 'all of today');
    // An end in the future is now; an end in the past keeps its 30 days.
    assert.ok(Date.parse((await stats(q('created:<2999-01-01'))).to) <= Date.now());
    const past = await expectCounts(q('created:<2025-03-06'));
    assert.deepEqual([past.from, past.to], ['2025-02-04T00:00:00.000Z', '2025-03-06T00:00:00.000Z']);
    assert.equal(past.buckets.length, 30);
    const everything = await expectCounts('', true);
    assert.ok(everything.total > 10, 'no query at all: the last 30 days, all of this file\'s live records');
  });

  test('a window that ends before it starts has no bucket and counts nothing', async () => {
    const s = await stats('from=2025-03-05T00:00:00Z&to=2025-03-04T00:00:00Z');
    assert.deepEqual([s.buckets, s.top_actions, s.top_actors, s.total], [[], [], [], 0]);
  });
});

describe('refusals', () => {
  test('a window too wide for its interval is 400 WINDOW_TOO_WIDE, saying what fits', async () => {
    const hours = await h.admin.client.get(`/api/v1/audit-logs/stats?${q('created:2025-01-01..2025-03-10')}&interval=hour`, { token: h.admin.token });
    assertProblem(hours, 400, 'WINDOW_TOO_WIDE');
    assert.match(hours.body.detail, /interval=hour covers at most 31 days.*interval=day/);
    assert.equal(hours.body.type, '/problems/window-too-wide');
    // 31 days of hours are fine.
    assert.equal((await stats(`${q('created:2025-03-01..2025-03-31')}&interval=hour`)).buckets.length, 744);
    const days = await h.admin.client.get(`/api/v1/audit-logs/stats?${q('created:2020-01-01..2025-03-10')}`, { token: h.admin.token });
    assertProblem(days, 400, 'WINDOW_TOO_WIDE');
    assert.match(days.body.detail, /interval=day covers at most 1000 days/);
  });

  test('a bad interval, a parameter the route does not take, or a bad q is 400', async () => {
    for (const query of ['interval=week', 'interval=HOUR', 'interval=', 'limit=5', 'include=actors', 'cursor=abc', 'actor_id=abc', 'from=yesterday', 'to=2016-12-31T23:59:60Z']) {
      assertProblem(await h.admin.client.get(`/api/v1/audit-logs/stats?${query}`, { token: h.admin.token }), 400, 'VALIDATION_FAILED');
    }
    const bad = await h.admin.client.get(`/api/v1/audit-logs/stats?${q('nonsense:1')}`, { token: h.admin.token });
    assertProblem(bad, 400, 'INVALID_QUERY');
    assert.match(bad.body.detail, /"nonsense:1" has an unknown key/);
  });

  test('a USER is refused with 403 and an anonymous caller with 401, as on the other audit routes', async () => {
    for (const path of ['/api/v1/audit-logs/stats', `/api/v1/audit-logs/stats?${q(WINDOW)}`, '/api/v1/audit-logs?include=actors']) {
      const asUser = await alice.client.get(path, { token: alice.token });
      assertProblem(asUser, 403, 'FORBIDDEN');
      assert.doesNotMatch(asUser.text, /CREATE_TASK|bucket|@/);
      assertProblem(await new Client(h.server).get(path), 401, 'UNAUTHENTICATED');
    }
  });
});

describe('include=actors', () => {
  test('names exactly the actors of the page, each once, as the users are now', async () => {
    const users = new Map([h.admin, alice, bob, ...crowd].map((u) => [u.id, u]));
    for (const query of ['limit=7', `limit=30&${q(WINDOW)}`, `limit=5&${q('actor:none')}`, `limit=3&actor_id=${bob.id}`]) {
      const res = await h.admin.client.get(`/api/v1/audit-logs?${query}&include=actors`, { token: h.admin.token });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(Object.keys(res.body), ['data', 'next_cursor', 'actors']);
      const ids = [...new Set((res.body.data as AuditRecordBody[]).flatMap((r) => (r.actor_id === null ? [] : [r.actor_id])))].sort((a, b) => a - b);
      assert.deepEqual(Object.keys(res.body.actors).map(Number).sort((a, b) => a - b), ids, `?${query}`);
      for (const [id, actor] of Object.entries(res.body.actors as Record<string, { email: string | null; name: string | null }>)) {
        const user = users.get(Number(id));
        if (user) assert.equal(actor.email, user.email);
        else assert.deepEqual(actor, { email: null, name: null }, `actor ${id} never was a user`);
        assert.deepEqual(Object.keys(actor), ['email', 'name']);
      }
    }
    const alices = await h.admin.client.get(`/api/v1/audit-logs?actor_id=${alice.id}&limit=1&include=actors`, { token: h.admin.token });
    assert.deepEqual(alices.body.actors, { [alice.id]: { email: alice.email, name: 'Alice' } });
  });

  test('leaves the records as they are, and without it the answer is the page alone, byte for byte', async () => {
    for (const query of ['limit=10', `limit=4&${q(WINDOW)}`, 'limit=100&action=CREATE_TASK']) {
      const plain = await h.admin.client.get(`/api/v1/audit-logs?${query}`, { token: h.admin.token });
      const withActors = await h.admin.client.get(`/api/v1/audit-logs?${query}&include=actors`, { token: h.admin.token });
      assert.equal(plain.status, 200, plain.text);
      assert.deepEqual(Object.keys(plain.body), ['data', 'next_cursor']);
      assert.equal(plain.text, JSON.stringify({ data: withActors.body.data, next_cursor: withActors.body.next_cursor }), `?${query}`);
    }
    const empty = await h.admin.client.get(`/api/v1/audit-logs?actor_id=999999998&include=actors`, { token: h.admin.token });
    assert.deepEqual(empty.body, { data: [], next_cursor: null, actors: {} });
    assertProblem(await h.admin.client.get('/api/v1/audit-logs?include=users', { token: h.admin.token }), 400, 'VALIDATION_FAILED');
  });

  test('names a deleted actor by the email its deletion recorded, and "[redacted]" once that was erased', async () => {
    const dave = await h.newUser({ name: 'Dave' }); // his login is his record
    const deleted = await h.admin.client.delete(`/api/v1/users/${dave.id}`, { token: h.admin.token });
    assert.equal(deleted.status, 204, deleted.text);
    const page = `/api/v1/audit-logs?actor_id=${dave.id}&include=actors`;
    const gone = await h.admin.client.get(page, { token: h.admin.token });
    assert.ok(gone.body.data.length > 0);
    assert.deepEqual(gone.body.actors, { [dave.id]: { email: dave.email, name: null } });
    // What `teamlog audit redact --user` erases (personal-data.repository.ts), done by the owner here.
    await h.server.owner.query('DELETE FROM audit_personal_data WHERE subject_user_id = $1', [dave.id]);
    const erased = await h.admin.client.get(page, { token: h.admin.token });
    assert.deepEqual(erased.body.actors, { [dave.id]: { email: '[redacted]', name: null } });
    const s = await stats(`actor_id=${dave.id}`);
    assert.deepEqual(s.top_actors.map((a) => [a.actor_id, a.email, a.name]), [[dave.id, '[redacted]', null]]);
  });
});

describe('@teamlog/client', () => {
  test('auditLogs.stats() and list({include: "actors"}) answer what the routes answer', async () => {
    const teamlog = createClient({ baseUrl: h.server.url, headers: { 'x-forwarded-for': randomIp() } });
    await teamlog.login(ADMIN_EMAIL, ADMIN_PASSWORD);
    const s = await teamlog.auditLogs.stats({ q: WINDOW, interval: 'day' });
    assert.deepEqual(s, await stats(`${q(WINDOW)}&interval=day`));
    const page = await teamlog.auditLogs.list({ q: WINDOW, limit: 5, include: 'actors' }).page();
    const ids = new Set(page.data.flatMap((r) => (r.actor_id === null ? [] : [String(r.actor_id)])));
    assert.deepEqual(new Set(Object.keys(page.actors ?? {})), ids);
    assert.equal((await teamlog.auditLogs.list({ limit: 5 }).page()).actors, undefined);
    await assert.rejects(teamlog.auditLogs.stats({ q: 'created:2020-01-01..2025-03-10' }), (err: unknown) => err instanceof TeamlogError && err.code === 'WINDOW_TOO_WIDE');
  });
});
