// What an operator watches (docs/operations.md): the metrics a real server exports after real
// activity (sockets, real-time lag, the audit log's sealing and signing backlog), METRICS_TOKEN,
// the alerting rules (promtool, and every metric they name is one the service exports), and the
// request completion line a real server process writes.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { parse } from 'yaml';
import { Client, createUser, loginAdmin } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { postMessage } from './helpers/factories.js';
import { ROOT } from './helpers/paths.js';
import { spawnServer } from './helpers/process.js';
import { connectRecording, sleep } from './helpers/sockets.js';
import { createTestDatabase, migratedDataDir, startTestServer, type TestDatabase, type TestServer } from './helpers/server.js';

const RULES_DIR = path.join(ROOT, 'deploy/prometheus');
const RULES = path.join(RULES_DIR, 'teamlog.rules.yml');
const RULE_TESTS = path.join(RULES_DIR, 'teamlog.rules.test.yml');
const METRICS_TOKEN = `metrics-${randomBytes(12).toString('hex')}`;

/** A scrape, read: each sample by its series (`name{labels}`), and each metric family's type. */
interface Scrape {
  status: number;
  text: string;
  samples: Map<string, number>;
  types: Map<string, string>;
}

async function scrape(server: TestServer, token: string | undefined = METRICS_TOKEN): Promise<Scrape> {
  const res = await fetch(`${server.url}/metrics`, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } });
  const text = await res.text();
  const samples = new Map<string, number>();
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1]!, type[2]!);
    const sample = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (sample) samples.set(sample[1]!, Number(sample[2]));
  }
  return { status: res.status, text, samples, types };
}

/** A sample's value; fails when the series is not there. */
function value(s: Scrape, series: string): number {
  const v = s.samples.get(series);
  assert.ok(v !== undefined, `no ${series} in the scrape:\n${[...s.samples.keys()].filter((k) => k.startsWith(series.split('{')[0]!)).join('\n')}`);
  return v;
}

/** The value of the one series of `name` whose labels include `labels` (whatever their order in the text). */
function series(s: Scrape, name: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const found = [...s.samples].filter(([key]) => key.startsWith(`${name}{`) && wanted.every((w) => key.slice(name.length + 1, -1).split(',').includes(w)));
  assert.equal(found.length, 1, `${found.length} series of ${name} with ${wanted.join(',')}`);
  return found[0]![1];
}

/** Scrapes until `check` holds (it answers a message while it does not), for up to `ms`. */
async function scrapeUntil(server: TestServer, check: (s: Scrape) => string | undefined, ms = 10_000): Promise<Scrape> {
  const deadline = Date.now() + ms;
  for (;;) {
    const s = await scrape(server);
    const wrong = check(s);
    if (wrong === undefined) return s;
    if (Date.now() > deadline) assert.fail(`within ${ms} ms: ${wrong}`);
    await sleep(50);
  }
}

/** The names of the series an alerting rule's expression reads (functions, keywords, labels and ranges left out). */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const keywords = new Set(['and', 'or', 'unless', 'bool', 'offset']);
  const names = new Set<string>();
  for (const m of bare.matchAll(/(?<![\w.])[a-zA-Z_:][\w:]*/g)) {
    const isCall = bare.slice(m.index + m[0].length).trimStart().startsWith('(');
    if (!isCall && !keywords.has(m[0])) names.add(m[0]);
  }
  return [...names];
}

/** Every series name a scrape shows a family for (a histogram's _bucket, _sum and _count). */
function exportedNames(s: Scrape): Set<string> {
  const names = new Set<string>();
  for (const [name, type] of s.types) {
    names.add(name);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(name + suffix);
  }
  return names;
}

interface RuleFile {
  groups: Array<{ name: string; rules: Array<{ alert?: string; record?: string; expr: string; labels?: Record<string, string> }> }>;
}
const rules = () => parse(readFileSync(RULES, 'utf8')) as RuleFile;

/** `promtool`, where it is installed (Debian's package `prometheus`; .ci/run installs it). */
function promtool(): string | undefined {
  const found = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  return found.error || found.status !== 0 ? undefined : 'promtool';
}

// The file's server: METRICS_TOKEN set, and an audit webhook receiver (its lag gauges exist only
// with one) that takes everything; checkpoints every 100 ms.
const receiver = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(204).end());
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const h = useTestServer({
  env: {
    METRICS_TOKEN,
    AUDIT_CHECKPOINT_INTERVAL_MS: '100',
    AUDIT_WEBHOOK_URL: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/audit`,
    AUDIT_WEBHOOK_SECRET: 'webhook-secret-'.padEnd(40, 'x'),
  },
});
after(() => {
  receiver.closeAllConnections();
  receiver.close();
});

describe('METRICS_TOKEN', () => {
  test('/metrics refuses a scrape without the token, or with another, as 401 problem+json, and answers the one that carries it', async () => {
    for (const token of [undefined, 'not-the-metrics-token', `${METRICS_TOKEN}x`, METRICS_TOKEN.slice(0, -1)]) {
      const res = await new Client(h.server).get('/metrics', token === undefined ? {} : { token });
      assert.equal(res.status, 401, `token ${token}`);
      assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.equal(res.body.code, 'UNAUTHENTICATED');
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/);
      assert.ok(!res.text.includes('teamlog_'), 'a refused scrape shows no metric');
    }
    const basic = await new Client(h.server).get('/metrics', { headers: { authorization: `Basic ${Buffer.from(`x:${METRICS_TOKEN}`).toString('base64')}` } });
    assert.equal(basic.status, 401);

    const res = await scrape(h.server);
    assert.equal(res.status, 200);
    assert.ok(res.samples.size > 50, 'the scrape with the token has the metrics');
  });
});

describe('real-time metrics', () => {
  test('teamlog_sockets_connected counts this instance\'s sockets on / and on /admin', async () => {
    const before = await scrape(h.server);
    assert.equal(value(before, 'teamlog_sockets_connected{namespace="/"}'), 0);
    assert.equal(value(before, 'teamlog_sockets_connected{namespace="/admin"}'), 0);

    const user = await createUser(h.server, h.admin);
    const main = await connectRecording(user);
    const adminSocket = await connectRecording(h.admin, { namespace: '/admin' });
    try {
      const both = await scrape(h.server);
      assert.equal(value(both, 'teamlog_sockets_connected{namespace="/"}'), 1);
      assert.equal(value(both, 'teamlog_sockets_connected{namespace="/admin"}'), 1);
    } finally {
      main.socket.close();
      adminSocket.socket.close();
    }
    await scrapeUntil(h.server, (s) => {
      const open = value(s, 'teamlog_sockets_connected{namespace="/"}') + value(s, 'teamlog_sockets_connected{namespace="/admin"}');
      return open === 0 ? undefined : `${open} sockets still counted after both closed`;
    });
  });

  test('teamlog_realtime_emit_lag_seconds times every event sent to sockets, on each namespace, from the read of its batch', async () => {
    const count = (s: Scrape, ns: string) => s.samples.get(`teamlog_realtime_emit_lag_seconds_count{namespace="${ns}"}`) ?? 0;
    const sum = (s: Scrape, ns: string) => s.samples.get(`teamlog_realtime_emit_lag_seconds_sum{namespace="${ns}"}`) ?? 0;
    const user = await createUser(h.server, h.admin);
    const main = await connectRecording(user);
    const records = await connectRecording(h.admin, { namespace: '/admin' });
    try {
      const before = await scrape(h.server);
      for (let i = 0; i < 3; i++) await postMessage(user, 'general');
      await main.rec.waitFor(() => main.rec.named('new-message').length >= 3, 5000, 'three new-message events');
      // An audited action's record goes to /admin.
      for (let i = 0; i < 3; i++) assert.equal((await h.admin.client.post('/api/v1/projects', { name: `Lag ${randomBytes(4).toString('hex')}` }, { token: h.admin.token })).status, 201);
      await records.rec.waitFor(() => records.rec.named('audit-record').length >= 3, 5000, 'three audit-record events');

      const afterwards = await scrapeUntil(h.server, (s) =>
        count(s, '/') - count(before, '/') >= 3 && count(s, '/admin') - count(before, '/admin') >= 3 ? undefined : 'the events sent are not all timed',
      );
      for (const ns of ['/', '/admin']) {
        const n = count(afterwards, ns) - count(before, ns);
        const mean = (sum(afterwards, ns) - sum(before, ns)) / n;
        assert.ok(mean >= 0 && mean < 5, `mean emit lag on ${ns}: ${mean} s`);
        assert.equal(series(afterwards, 'teamlog_realtime_emit_lag_seconds_bucket', { le: '+Inf', namespace: ns }), count(afterwards, ns));
        assert.equal(series(afterwards, 'teamlog_realtime_emit_lag_seconds_bucket', { le: '5', namespace: ns }), count(afterwards, ns), `an event of ${ns} took more than 5 s`);
      }
    } finally {
      main.socket.close();
      records.socket.close();
    }
  });
});

describe('audit log metrics', () => {
  test('once the records are sealed and signed, nothing waits: unsealed 0, seal and checkpoint lag 0, a fresh checkpoint', async () => {
    for (let i = 0; i < 5; i++) assert.equal((await h.admin.client.post('/api/v1/projects', { name: `Ops ${randomBytes(4).toString('hex')}` }, { token: h.admin.token })).status, 201);
    const s = await scrapeUntil(h.server, (m) =>
      value(m, 'teamlog_audit_unsealed_records') === 0 && value(m, 'teamlog_audit_checkpoint_lag_seconds') === 0 && value(m, 'teamlog_audit_webhook_lag_records') === 0
        ? undefined
        : `unsealed ${value(m, 'teamlog_audit_unsealed_records')}, checkpoint lag ${value(m, 'teamlog_audit_checkpoint_lag_seconds')}, webhook lag ${value(m, 'teamlog_audit_webhook_lag_records')}`,
    );
    assert.equal(value(s, 'teamlog_audit_seal_lag_seconds'), 0);
    const age = value(s, 'teamlog_audit_checkpoint_age_seconds');
    assert.ok(age >= 0 && age < 30, `checkpoint age ${age} s`);
    assert.equal(value(s, 'teamlog_audit_webhook_lag_seconds'), 0);
    assert.equal(value(s, 'teamlog_audit_checkpoint_interval_seconds'), 0.1);
    assert.equal(value(s, 'teamlog_audit_scans_limit'), h.server.config.maxConcurrentAuditScans);

    // Nothing new to sign: the checkpoint ages, and is not late.
    await sleep(1100);
    const later = await scrape(h.server);
    assert.ok(value(later, 'teamlog_audit_checkpoint_age_seconds') >= age + 1, 'the newest checkpoint ages while nothing is sealed');
    assert.equal(value(later, 'teamlog_audit_checkpoint_lag_seconds'), 0);
  });

  test('with no instance sealing, committed records show as unsealed and their age grows; an instance that seals brings them to 0', async () => {
    let database: TestDatabase | undefined;
    let quiet: TestServer | undefined;
    let sealing: TestServer | undefined;
    try {
      database = await createTestDatabase();
      quiet = await startTestServer({ database, env: { AUDIT_SEALING: 'off', METRICS_TOKEN } });
      const quietAdmin = await loginAdmin(quiet);
      for (let i = 0; i < 3; i++) assert.equal((await quietAdmin.client.post('/api/v1/projects', { name: `Unsealed ${i}` }, { token: quietAdmin.token })).status, 201);
      const [{ n }] = (await database.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_log')) as [{ n: number }];
      assert.ok(n >= 4);

      const first = await scrape(quiet);
      assert.equal(value(first, 'teamlog_audit_unsealed_records'), n);
      const lag = value(first, 'teamlog_audit_seal_lag_seconds');
      assert.ok(lag > 0 && lag < 60, `seal lag ${lag} s`);
      assert.equal(value(first, 'teamlog_audit_checkpoint_age_seconds'), 0, 'no checkpoint yet');
      await sleep(1100);
      assert.ok(value(await scrape(quiet), 'teamlog_audit_seal_lag_seconds') >= lag + 1, 'the oldest waiting record ages');

      sealing = await startTestServer({ database, env: { AUDIT_CHECKPOINT_INTERVAL_MS: '100', METRICS_TOKEN } });
      // Every instance reads the same backlog from the database: the quiet one sees it drain too.
      for (const instance of [sealing, quiet]) {
        await scrapeUntil(instance, (m) =>
          value(m, 'teamlog_audit_unsealed_records') === 0 && value(m, 'teamlog_audit_seal_lag_seconds') === 0 && value(m, 'teamlog_audit_checkpoint_lag_seconds') === 0
            ? undefined
            : `unsealed ${value(m, 'teamlog_audit_unsealed_records')}`,
        );
      }
    } finally {
      await sealing?.close();
      await quiet?.close();
      await database?.drop();
    }
  });
});

describe('alerting rules (deploy/prometheus)', () => {
  test('promtool checks the rules and passes their unit tests', (t) => {
    const tool = promtool();
    if (!tool) {
      t.skip('promtool is not installed (Debian package prometheus; .ci/run installs it): the rules are checked in JS only');
      return;
    }
    const check = spawnSync(tool, ['check', 'rules', RULES], { encoding: 'utf8', cwd: RULES_DIR });
    assert.equal(check.status, 0, `promtool check rules:\n${check.stdout}${check.stderr}`);
    const unit = spawnSync(tool, ['test', 'rules', RULE_TESTS], { encoding: 'utf8', cwd: RULES_DIR });
    assert.equal(unit.status, 0, `promtool test rules:\n${unit.stdout}${unit.stderr}`);
  });

  test('every series a rule reads is one the service exports (or Prometheus\' own up)', async () => {
    // Activity first, so that the families with labels have series too.
    const user = await createUser(h.server, h.admin);
    const socket = await connectRecording(user);
    try {
      await postMessage(user, 'general');
      await socket.rec.waitFor((e) => e.name === 'new-message');
    } finally {
      socket.socket.close();
    }
    const exported = exportedNames(await scrape(h.server));
    exported.add('up');
    const file = rules();
    assert.ok(file.groups.length > 0);
    const read = new Set<string>();
    for (const rule of file.groups.flatMap((g) => g.rules)) {
      assert.ok(rule.alert, 'only alerting rules');
      assert.ok(['page', 'ticket'].includes(rule.labels?.severity ?? ''), `${rule.alert}: severity page or ticket`);
      const names = metricNames(rule.expr);
      assert.ok(names.length > 0, `${rule.alert} reads no series: ${rule.expr}`);
      for (const name of names) {
        assert.ok(exported.has(name), `${rule.alert} reads ${name}, which the service does not export`);
        read.add(name);
      }
    }
    // The ones the operations issue asked for, each with a rule.
    for (const name of ['teamlog_audit_seal_lag_seconds', 'teamlog_audit_unsealed_records', 'teamlog_audit_checkpoint_lag_seconds', 'teamlog_audit_webhook_lag_seconds',
      'teamlog_realtime_emit_lag_seconds_bucket', 'teamlog_requests_limited_total', 'teamlog_audit_scans_running', 'db_pool_connections', 'http_request_duration_seconds_bucket']) {
      assert.ok(read.has(name), `no rule reads ${name}`);
    }
  });

  test('every alert has a promtool unit test, and docs/operations.md names every alert and every teamlog_ metric', async () => {
    const alerts = rules().groups.flatMap((g) => g.rules).map((r) => r.alert!);
    const tests = parse(readFileSync(RULE_TESTS, 'utf8')) as { tests: Array<{ alert_rule_test: Array<{ alertname: string; exp_alerts: unknown[] }> }> };
    const firing = new Set(tests.tests.flatMap((t) => t.alert_rule_test).filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname));
    assert.deepEqual(alerts.filter((a) => !firing.has(a)), [], 'alerts no unit test makes fire');

    const doc = readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8');
    assert.deepEqual(alerts.filter((a) => !doc.includes(`\`${a}\``)), [], 'alerts docs/operations.md does not describe');
    const families = [...(await scrape(h.server)).types.keys()].filter((n) => n.startsWith('teamlog_'));
    assert.deepEqual(families.filter((n) => !doc.includes(n)), [], 'metrics docs/operations.md does not describe');
  });
});

describe('request log', () => {
  test('a request\'s one line names its URL, route, status, user and problem code, and never a token or password', { timeout: 120_000 }, async () => {
    const dataDir = await migratedDataDir('teamlog-ops-log-');
    const password = `ops-password-${randomBytes(6).toString('hex')}`;
    const proc = await spawnServer({ DATA_DIR: dataDir, ADMIN_EMAIL: 'ops@test.local', ADMIN_PASSWORD: password, RATE_LIMIT_PER_MINUTE: '4', LOG_LEVEL: 'info' });
    try {
      await proc.waitReady();
      const urls = new Map<string, string>();
      const call = async (method: string, urlPath: string, opts: { token?: string; body?: unknown } = {}) => {
        const res = await fetch(proc.url + urlPath, {
          method,
          headers: { ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}), ...(opts.body ? { 'content-type': 'application/json' } : {}) },
          body: opts.body ? JSON.stringify(opts.body) : undefined,
        });
        const body = (await res.json().catch(() => undefined)) as Record<string, any> | undefined;
        urls.set(res.headers.get('x-request-id')!, urlPath);
        return { status: res.status, requestId: res.headers.get('x-request-id')!, body };
      };
      const login = await call('POST', '/api/v1/auth/login', { body: { email: 'ops@test.local', password } });
      assert.equal(login.status, 200);
      const { access_token: token, refresh_token: refresh } = login.body as { access_token: string; refresh_token: string };
      const userId = (login.body as { user: { id: number } }).user.id;

      const found = await call('GET', `/api/v1/users/${userId}`, { token });
      const missing = await call('GET', '/api/v1/tasks/999999999', { token });
      const anonymous = await call('GET', '/api/v1/users');
      let limited;
      for (let i = 0; i < 10 && limited?.status !== 429; i++) limited = await call('GET', `/api/v1/users/${userId}`, { token });
      assert.deepEqual([found.status, missing.status, anonymous.status, limited!.status], [200, 404, 401, 429]);

      await proc.waitForOutput(limited!.requestId);
      // The completion line comes after the answer: wait for it, not only for the request id.
      const completion = async (requestId: string) => {
        for (let i = 0; i < 100; i++) {
          const line = proc.output().split('\n').flatMap((l) => {
            try {
              return [JSON.parse(l) as Record<string, any>];
            } catch {
              return [];
            }
          }).find((l) => l.reqId === requestId && l.msg === 'request completed');
          if (line) {
            // The request beside its answer, in the one line (no "incoming request" line at info).
            assert.equal(line.req?.url, urls.get(requestId), JSON.stringify(line));
            assert.equal(line.req?.method, line.res?.method);
            return line.res as Record<string, unknown>;
          }
          await sleep(50);
        }
        assert.fail(`no completion line for ${requestId}:\n${proc.output()}`);
      };
      assert.deepEqual(await completion(found.requestId), { statusCode: 200, method: 'GET', route: '/api/v1/users/:id', userId });
      assert.deepEqual(await completion(missing.requestId), { statusCode: 404, method: 'GET', route: '/api/v1/tasks/:id', userId, code: 'NOT_FOUND' });
      assert.deepEqual(await completion(anonymous.requestId), { statusCode: 401, method: 'GET', route: '/api/v1/users', code: 'UNAUTHENTICATED' });
      assert.deepEqual(await completion(limited!.requestId), { statusCode: 429, method: 'GET', route: '/api/v1/users/:id', userId, code: 'RATE_LIMITED' });
      assert.deepEqual(await completion(login.requestId), { statusCode: 200, method: 'POST', route: '/api/v1/auth/login' });

      const output = proc.output();
      for (const secret of [password, token, refresh]) assert.ok(!output.includes(secret), 'a credential reached the log');
      assert.ok(!output.includes('"msg":"incoming request"'), 'an incoming request line at info');
    } finally {
      await proc.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
