#!/usr/bin/env node
// npm run bench:realtime [-- --quick] [-- --profile] [-- --rate <messages/s>]
// The real-time benchmark (docs/api.md section 6). Builds, creates a fresh `teamlog_bench_rt`
// database with one user per client (plus the senders), starts Teamlog in server mode (one
// instance, no Redis) beside a bare Socket.IO 4 server (bench/baseline/socketio.mjs: the
// ceiling), logs the users in through the API, connects one socket.io-client per user to each
// server (websocket transport, all in `general`, in this process), and measures:
//   1. memory per idle connection: server RSS with 0 and with N idle sockets (after a forced GC);
//   2. fan-out of one message to N clients at a steady pace: deliveries/s per message, and the
//      latency of every delivery from the trigger request's send and from its HTTP response;
//   3. the same fan-out with the senders never waiting (the sustained ceiling);
//   4. replay of 10,000 missed events to one reconnecting client, a client of @teamlog/client
//      (client/, built here to client/dist/); the fan-out's sockets are bare socket.io-clients.
// Teamlog and the bare server are measured in alternating rounds (T, B, B, T): this VM's speed
// drifts by a third from minute to minute, so only figures close in time compare.
// Writes bench/results/realtime.md and one JSON line per measure to bench/results/realtime.jsonl
// (--quick: fewer clients and messages, written to the temp directory instead).
// Timings are reported, never asserted. Every wait is bounded; the script ends by itself, kills
// both servers and drops its database.
import { execSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { io as connectSocket } from 'socket.io-client';
import WebSocket from 'ws';
import { CLOCK_TICKS, cpuMeter, cpuMicros, postgresCpu as pgCpu, postgresCpuSince as pgCpuSince } from './cpu.mjs';
import { MALLOC_ENV, children, login, rssKb, rssSampler, sleep, startProcess, stop } from './lib.mjs';

const args = process.argv.slice(2);
const QUICK = args.includes('--quick');
// --profile: Teamlog writes a V8 CPU profile (--cpu-prof) to a temp directory at exit.
const PROFILE = args.includes('--profile');
const argValue = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const PG_BASE = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB_NAME = 'teamlog_bench_rt';
const CLIENTS = argValue('--clients', QUICK ? 200 : 1000);
const WARMUP = QUICK ? 10 : 20;
/** Messages per measured round; two rounds per server (T, B, B, T). */
const ROUND = argValue('--round', QUICK ? 30 : 100);
/** The steady pace of the paced fan-out, messages per second. */
const RATE = argValue('--rate', 10);
/** Trigger requests in flight in the saturated fan-out. */
const SAT_CONCURRENCY = 16;
/**
 * Users who send the triggers, in turn by message number. A user may send at most 20 messages a
 * second (docs/api.md section 6), and with one sender the saturated rounds were mostly refused:
 * 160 of their 200 triggers got 429, so their figures counted 40 messages. Many users chatting
 * is what a room under load is; 64 keep each one far below the limit at any pace reached here.
 */
const SENDERS = 64;
const REPLAY_EVENTS = QUICK ? 2000 : 10_000;
const REPLAY_RUNS = QUICK ? 2 : 3;
const TEXT_LENGTH = 100;
const LOGIN_CONCURRENCY = 4;
const CONNECT_CONCURRENCY = 50;
/** Room for every message one server is sent (warm-up, two paced and two saturated rounds). */
const MAX_MESSAGES = WARMUP + 4 * ROUND + 16;
const PASSWORD = 'bench-password-1';
const ADMIN = { email: 'bench-admin@bench.local', password: 'bench-admin-password' };
const JWT_SECRET = 'bench-secret-'.padEnd(48, 'x');
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const PORTS = { teamlog: 3411, bare: 3412, teamlogInspector: 9341, bareInspector: 9342 };
/** The whole run, including its build and logins, ends by this or is torn down. */
const WATCHDOG_MS = (QUICK ? 8 : 25) * 60_000;

const dbUrl = (name) => Object.assign(new URL(PG_BASE), { pathname: `/${name}` }).toString();
const log = (msg) => process.stderr.write(`${msg}\n`);
const round1 = (n) => (n === null || n === undefined || !Number.isFinite(n) ? null : Math.round(n * 10) / 10);
const round3 = (n) => (n === null || n === undefined || !Number.isFinite(n) ? null : Math.round(n * 1000) / 1000);

// ── processes and /proc ───────────────────────────────────────────────────────────────
const postgresCpu = () => pgCpu(DB_NAME);
const postgresCpuSince = (before) => pgCpuSince(before, DB_NAME);

const selfCpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** The whole machine's busy and stolen CPU so far, in µs (/proc/stat). */
function machineCpu() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const us = (j) => (j * 1e6) / CLOCK_TICKS;
  return { busy: us(f[0] + f[1] + f[2] + f[5] + f[6]), steal: us(f[7] ?? 0) };
}

/** The processes of this benchmark (set once both servers run). */
const ours = { pids: [] };

/**
 * A reading of the CPU everyone used, to tell afterwards how much of the machine this
 * benchmark's processes (servers, its PostgreSQL processes, this process) had: `others` is the
 * rest (another user's tests or builds), `steal` what the hypervisor took.
 */
function cpuReading() {
  return { machine: machineCpu(), pids: ours.pids.map(cpuMicros), db: postgresCpu(), self: selfCpu(), wall: performance.now() };
}

function othersSince(before) {
  const m = machineCpu();
  const mine = ours.pids.reduce((s, pid, i) => s + cpuMicros(pid) - before.pids[i], 0) + postgresCpuSince(before.db) + (selfCpu() - before.self);
  const wallUs = (performance.now() - before.wall) * 1000;
  return { others: Math.max(0, m.busy - before.machine.busy - mine) / wallUs, steal: (m.steal - before.machine.steal) / wallUs };
}

/**
 * Samples, every 100 ms, whether a transaction holding an xid runs in another database of the
 * same PostgreSQL server: work on the same machine, and once a delay to delivery (the reader
 * waited on the snapshot xmin such a transaction holds back). Since the relay reads batches
 * between two snapshots (db/commit-order.ts) a long transaction delays only itself; the share
 * stays among the noise figures, to tell a slow round's cause.
 */
function foreignXactSampler() {
  const c = new pg.Client({ connectionString: dbUrl(DB_NAME) });
  let ready = c.connect();
  let samples = 0;
  let hits = 0;
  let busy = false;
  let timer;
  return {
    start() {
      samples = 0;
      hits = 0;
      timer = setInterval(() => {
        if (busy) return;
        busy = true;
        ready
          .then(() => c.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND datname IS DISTINCT FROM current_database()'))
          .then((r) => {
            samples++;
            if (r.rows[0].n > 0) hits++;
          })
          .catch(() => {})
          .finally(() => (busy = false));
      }, 100);
    },
    stop() {
      clearInterval(timer);
      return samples > 0 ? round3(hits / samples) : null;
    },
    close: () => ready.then(() => c.end()).catch(() => {}),
  };
}

/**
 * Waits (at most maxMs) until the whole machine is quiet: under 10% of a core busy for a
 * second, this benchmark's processes and everyone else's together. Answers whether it was.
 */
async function quiet(maxMs = 30_000) {
  const end = Date.now() + maxMs;
  while (Date.now() < end) {
    const before = machineCpu().busy;
    await sleep(1000);
    if (machineCpu().busy - before < 100_000) return true;
  }
  return false;
}

/**
 * A full garbage collection in a server, through the inspector: SIGUSR1 opens it on the port
 * the server was started with (--inspect-port; nothing listens before), HeapProfiler's
 * collectGarbage runs a full GC, and process.memoryUsage() is read. Then the RSS.
 */
async function collectGarbage(pid, port) {
  try {
    process.kill(pid, 'SIGUSR1');
    let url;
    for (let i = 0; i < 50 && !url; i++) {
      try {
        url = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json())[0]?.webSocketDebuggerUrl;
      } catch {
        await sleep(100);
      }
    }
    if (!url) throw new Error('inspector did not open');
    const ws = new WebSocket(url);
    await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
    let id = 0;
    const pending = new Map();
    ws.on('message', (data) => {
      const m = JSON.parse(String(data));
      pending.get(m.id)?.(m);
      pending.delete(m.id);
    });
    const call = (method, params = {}) =>
      Promise.race([
        new Promise((resolve) => {
          pending.set(++id, resolve);
          ws.send(JSON.stringify({ id, method, params }));
        }),
        sleep(20_000).then(() => {
          throw new Error(`inspector ${method} timed out`);
        }),
      ]);
    await call('HeapProfiler.collectGarbage');
    await call('HeapProfiler.collectGarbage');
    const res = await call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true });
    ws.close();
    await sleep(500);
    const mem = JSON.parse(res.result.result.value);
    return { gc: true, rss_kb: rssKb(pid), heap_used_kb: Math.round(mem.heapUsed / 1024), external_kb: Math.round((mem.external + mem.arrayBuffers) / 1024) };
  } catch (err) {
    log(`  (no forced GC: ${err.message}; RSS after the settle only)`);
    return { gc: false, rss_kb: rssKb(pid), heap_used_kb: null, external_kb: null };
  }
}

// ── database ───────────────────────────────────────────────────────────────────────────
async function adminQuery(sql) {
  const admin = new pg.Client({ connectionString: PG_BASE });
  await admin.connect();
  try {
    await admin.query(sql);
  } finally {
    await admin.end();
  }
}

async function withDb(fn) {
  const c = new pg.Client({ connectionString: dbUrl(DB_NAME) });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** A fresh database, migrated, with one user per client (rt1…rtN) and SENDERS senders, all sharing one password hash. */
async function seedDatabase(passwordHash) {
  await adminQuery(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
  await adminQuery(`CREATE DATABASE ${DB_NAME}`);
  const { migratePostgres } = await import(path.join(ROOT, 'dist/db/migrate.js'));
  await migratePostgres(dbUrl(DB_NAME));
  await withDb(async (c) => {
    await c.query(
      `INSERT INTO users (email, name, password_hash, role)
       SELECT 'rt' || g || '@bench.local', 'Realtime User ' || g, $1, 'USER' FROM generate_series(1, $2::int) g`,
      [passwordHash, CLIENTS],
    );
    await c.query(
      `INSERT INTO users (email, name, password_hash, role)
       SELECT 'rt-sender' || g || '@bench.local', 'Realtime Sender ' || g, $1, 'USER' FROM generate_series(1, $2::int) g`,
      [passwordHash, SENDERS],
    );
    await c.query('VACUUM (ANALYZE)');
  });
}

// ── HTTP ───────────────────────────────────────────────────────────────────────────────
/** Runs `fn(i)` for i in [0, n) with at most `limit` at a time. */
async function pool(n, limit, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, n) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

// ── one server as the clients see it ───────────────────────────────────────────────────
/**
 * A server under test and what its clients received: per client and message, the count and the
 * time of the first delivery; per message, the send and response times and the first and last
 * delivery. Message texts are `rt<seq>|xxx…` (TEXT_LENGTH characters), so a delivery names its
 * message whatever the server adds around it.
 */
function makeTarget(name, label, url, triggerUrl, headers) {
  return {
    name, label, url, triggerUrl, headers,
    sockets: [],
    alive: 0,
    count: new Uint8Array(CLIENTS * MAX_MESSAGES),
    recv: new Float64Array(CLIENTS * MAX_MESSAGES),
    perSeq: new Uint32Array(MAX_MESSAGES),
    firstRecv: new Float64Array(MAX_MESSAGES).fill(Infinity),
    lastRecv: new Float64Array(MAX_MESSAGES),
    sent: new Float64Array(MAX_MESSAGES),
    resp: new Float64Array(MAX_MESSAGES),
    status: new Uint16Array(MAX_MESSAGES),
    expected: new Uint32Array(MAX_MESSAGES),
    nextSeq: 0,
    duplicates: 0,
    strays: 0,
    disconnects: [],
    connectErrors: [],
    triggerErrors: 0,
    /** Refused triggers by HTTP status. */
    refusals: {},
  };
}

function onMessage(target, client) {
  return (p) => {
    const t = performance.now();
    const text = p?.text;
    if (typeof text !== 'string' || !text.startsWith('rt')) return;
    const seq = Number(text.slice(2, text.indexOf('|')));
    if (!Number.isInteger(seq) || seq < 0 || seq >= MAX_MESSAGES) {
      target.strays++;
      return;
    }
    const k = client * MAX_MESSAGES + seq;
    if (target.count[k] < 255) target.count[k]++;
    if (target.count[k] > 1) {
      target.duplicates++;
      return;
    }
    target.recv[k] = t;
    target.perSeq[seq]++;
    if (t < target.firstRecv[seq]) target.firstRecv[seq] = t;
    if (t > target.lastRecv[seq]) target.lastRecv[seq] = t;
  };
}

function openSocket(url, auth) {
  return connectSocket(url, { transports: ['websocket'], auth, reconnection: false, forceNew: true, multiplex: false, timeout: 30_000 });
}

/** Connects one socket per token; answers the seconds it took. */
async function connectClients(target, tokens) {
  const t0 = performance.now();
  await pool(tokens.length, CONNECT_CONCURRENCY, async (i) => {
    const socket = openSocket(target.url, tokens[i] ? { token: tokens[i] } : {});
    socket.on('new-message', onMessage(target, i));
    const ok = await new Promise((resolve) => {
      const timer = setTimeout(() => resolve('timeout'), 35_000);
      socket.once('connect', () => (clearTimeout(timer), resolve(true)));
      socket.once('connect_error', (err) => (clearTimeout(timer), resolve(err?.message ?? 'error')));
    });
    if (ok !== true) {
      target.connectErrors.push({ client: i, error: ok });
      socket.close();
      target.sockets[i] = null;
      return;
    }
    target.sockets[i] = socket;
    target.alive++;
    socket.on('disconnect', (reason) => {
      target.alive--;
      if (!target.closing) target.disconnects.push({ client: i, reason, at_ms: Math.round(performance.now()) });
    });
  });
  return (performance.now() - t0) / 1000;
}

function closeClients(target) {
  target.closing = true;
  for (const s of target.sockets) s?.close();
}

async function trigger(target, seq) {
  const text = `rt${seq}|`.padEnd(TEXT_LENGTH, 'x');
  target.expected[seq] = target.alive;
  target.sent[seq] = performance.now();
  try {
    const headers = target.senders ? target.senders[seq % target.senders.length] : target.headers;
    const res = await fetch(target.triggerUrl, { method: 'POST', headers, body: JSON.stringify({ text }) });
    await res.text();
    target.resp[seq] = performance.now();
    target.status[seq] = res.status;
    if (res.status !== 201) {
      target.triggerErrors++;
      target.refusals[res.status] = (target.refusals[res.status] ?? 0) + 1;
    }
  } catch {
    target.resp[seq] = performance.now();
    target.triggerErrors++;
  }
}

/** Waits (at most 30 s after the last trigger) until every message of [first, first+n) reached every socket it was sent to. */
async function waitDelivered(target, first, n) {
  const end = performance.now() + 30_000;
  for (;;) {
    let missing = 0;
    for (let s = first; s < first + n; s++) if (target.status[s] === 201) missing += Math.max(0, target.expected[s] - target.perSeq[s]);
    if (missing === 0) return 0;
    if (performance.now() > end) return missing;
    await sleep(20);
  }
}

/**
 * One round of messages to one server: `paced` sends one every 1/RATE s without waiting for
 * the previous one; saturated keeps SAT_CONCURRENCY triggers in flight, back to back. Answers
 * the round's seq range and the CPU its server, PostgreSQL and this process used.
 */
const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n);

let foreign = { start() {}, stop: () => null, close: async () => {} };

async function runRound(target, pid, n, mode) {
  const first = target.nextSeq;
  target.nextSeq += n;
  const before = { server: cpuMicros(pid), db: postgresCpu(), self: selfCpu(), wall: performance.now(), all: cpuReading() };
  const hrStart = monotonicMicros();
  foreign.start();
  if (mode === 'paced') {
    const interval = 1000 / RATE;
    const t0 = performance.now() + 5;
    const inFlight = [];
    for (let i = 0; i < n; i++) {
      const wait = t0 + i * interval - performance.now();
      if (wait > 0) await sleep(wait);
      inFlight.push(trigger(target, first + i));
    }
    await Promise.all(inFlight);
  } else {
    await pool(n, SAT_CONCURRENCY, (i) => trigger(target, first + i));
  }
  const undelivered = await waitDelivered(target, first, n);
  const wall = performance.now() - before.wall;
  const machine = othersSince(before.all);
  return {
    first, n, mode, undelivered,
    cpu: { server: cpuMicros(pid) - before.server, db: postgresCpuSince(before.db), self: selfCpu() - before.self, wall_us: wall * 1000 },
    others_core_share: round3(machine.others),
    steal_core_share: round3(machine.steal),
    foreign_xact_share: foreign.stop(),
    // CLOCK_MONOTONIC, as a V8 CPU profile's timestamps (--profile: slice the profile by round).
    monotonic_us: [hrStart, monotonicMicros()],
  };
}

function percentile(sorted, q) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** The figures of one server over its rounds of one mode. */
function summarize(target, rounds) {
  const fromSend = [];
  const fromResponse = [];
  const perMessageRate = [];
  const spread = [];
  const onceStarted = [];
  const http = [];
  let deliveries = 0;
  let beforeResponse = 0;
  let messages = 0;
  let failed = 0;
  let undelivered = 0;
  const cpu = { server: 0, db: 0, self: 0, wall_us: 0 };
  for (const r of rounds) {
    undelivered += r.undelivered;
    for (const k of Object.keys(cpu)) cpu[k] += r.cpu[k];
    for (let seq = r.first; seq < r.first + r.n; seq++) {
      if (target.status[seq] !== 201) {
        failed++;
        continue;
      }
      messages++;
      http.push(target.resp[seq] - target.sent[seq]);
      if (target.perSeq[seq] > 0) {
        perMessageRate.push(target.perSeq[seq] / ((target.lastRecv[seq] - target.sent[seq]) / 1000));
        spread.push(target.lastRecv[seq] - target.firstRecv[seq]);
        onceStarted.push(target.perSeq[seq] / (Math.max(0.1, target.lastRecv[seq] - target.firstRecv[seq]) / 1000));
      }
      for (let c = 0; c < CLIENTS; c++) {
        const k = c * MAX_MESSAGES + seq;
        if (target.count[k] === 0) continue;
        deliveries++;
        fromSend.push(target.recv[k] - target.sent[seq]);
        const d = target.recv[k] - target.resp[seq];
        fromResponse.push(d);
        if (d < 0) beforeResponse++;
      }
    }
  }
  for (const a of [fromSend, fromResponse, perMessageRate, spread, onceStarted, http]) a.sort((x, y) => x - y);
  const perDelivery = (us) => (deliveries > 0 ? round1(us / deliveries) : null);
  // Each round: its deliveries over the time from its first send to its last delivery.
  const roundSpans = rounds.map((r) => {
    let d = 0;
    let s = Infinity;
    let l = 0;
    for (let seq = r.first; seq < r.first + r.n; seq++) {
      d += target.perSeq[seq];
      if (target.perSeq[seq] > 0) {
        s = Math.min(s, target.sent[seq]);
        l = Math.max(l, target.lastRecv[seq]);
      }
    }
    return { deliveries: d, ms: l - s };
  });
  const roundRates = roundSpans.map((x) => Math.round(x.deliveries / (x.ms / 1000)));
  const spanMs = roundSpans.reduce((a, x) => a + x.ms, 0);
  return {
    messages,
    failed_triggers: failed,
    deliveries,
    undelivered,
    // Per message: its deliveries over the time from its trigger's send to its last delivery.
    per_message_deliveries_per_s: { p50: Math.round(percentile(perMessageRate, 0.5)), p10: Math.round(percentile(perMessageRate, 0.1)) },
    // Per message, once its fan-out started: its deliveries over the time from its first to its last delivery.
    fanout_deliveries_per_s: { p50: Math.round(percentile(onceStarted, 0.5)) },
    // The rounds: every delivery over the sum of the rounds' times from first send to last delivery.
    aggregate_deliveries_per_s: Math.round(deliveries / (spanMs / 1000)),
    round_deliveries_per_s: roundRates,
    latency_from_send_ms: { p50: round1(percentile(fromSend, 0.5)), p99: round1(percentile(fromSend, 0.99)), max: round1(fromSend[fromSend.length - 1]) },
    latency_from_response_ms: { p50: round1(percentile(fromResponse, 0.5)), p99: round1(percentile(fromResponse, 0.99)), max: round1(fromResponse[fromResponse.length - 1]) },
    delivered_before_response: deliveries > 0 ? round3(beforeResponse / deliveries) : null,
    fanout_spread_ms: { p50: round1(percentile(spread, 0.5)), p99: round1(percentile(spread, 0.99)) },
    http_ms: { p50: round1(percentile(http, 0.5)), p99: round1(percentile(http, 0.99)) },
    cpu_us_per_delivery: { server: perDelivery(cpu.server), postgres: perDelivery(cpu.db), bench_process: perDelivery(cpu.self) },
    // Share of one core each used over the rounds' wall time: near 1.0 for the bench process means the clients were the limit.
    core_share: { server: round3(cpu.server / cpu.wall_us), postgres: round3(cpu.db / cpu.wall_us), bench_process: round3(cpu.self / cpu.wall_us) },
  };
}

/** Clients that missed a message they were connected for, or got one more than once. */
function integrity(target) {
  const missed = [];
  const duplicated = [];
  let missedTotal = 0;
  for (let c = 0; c < CLIENTS; c++) {
    if (!target.sockets[c]) continue;
    const gone = target.disconnects.find((d) => d.client === c);
    let miss = 0;
    let dup = 0;
    for (let seq = 0; seq < target.nextSeq; seq++) {
      if (target.status[seq] !== 201) continue;
      if (gone && target.sent[seq] >= gone.at_ms) continue;
      const n = target.count[c * MAX_MESSAGES + seq];
      if (n === 0) miss++;
      if (n > 1) dup += n - 1;
    }
    missedTotal += miss;
    if (miss > 0) missed.push({ client: c, missed: miss });
    if (dup > 0) duplicated.push({ client: c, duplicates: dup });
  }
  return {
    clients_connected: target.sockets.filter(Boolean).length,
    connect_errors: target.connectErrors.length,
    connect_error_samples: target.connectErrors.slice(0, 5),
    disconnects: target.disconnects.length,
    disconnect_samples: target.disconnects.slice(0, 5),
    messages_sent: target.nextSeq,
    trigger_errors: target.triggerErrors,
    trigger_refusals: target.refusals,
    clients_that_missed: missed.length,
    deliveries_missed: missedTotal,
    missed_samples: missed.slice(0, 10),
    clients_with_duplicates: duplicated.length,
    duplicate_deliveries: target.duplicates,
    duplicate_samples: duplicated.slice(0, 10),
    strays: target.strays,
  };
}

// ── replay ─────────────────────────────────────────────────────────────────────────────
// The replay's client is built on @teamlog/client (client/, the library applications use; issue
// 25 asks that a benchmark client be): it logs in, subscribes to new-message with the position to
// resume from (createClient's realtime.lastEventId), and the library sends it as last_event_id,
// drops what is sent twice and hands the events over in event_id order. Every other client of
// this benchmark (the fan-out's sockets, the sender, the logins) is a bare socket.io-client or
// fetch, so that what they measure is the servers alone. The library is imported once built
// (buildAndSeed compiles client/ to client/dist/).
let createClient;

/** A client of the library for user 1, logged in from an address of its own (the login throttle counts per address). */
async function libraryClient(url, lastEventId, n) {
  const client = createClient({
    baseUrl: url,
    headers: { 'x-forwarded-for': `10.254.0.${n}` },
    // No timer left behind: the tokens last the run (ACCESS_TOKEN_TTL).
    autoRefresh: false,
    realtime: lastEventId === undefined ? {} : { lastEventId: { '/': lastEventId } },
  });
  await client.login('rt1@bench.local', PASSWORD);
  return client;
}

/** Connects user 1 without a position to resume from and answers the event_id of its presence snapshot (the position it is live from). */
async function currentPosition(url) {
  const client = await libraryClient(url, undefined, 1);
  try {
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no presence-snapshot within 20 s')), 20_000);
      client.realtime.on('error', ({ error }) => (clearTimeout(timer), reject(error)));
      client.realtime.on('presence-snapshot', (p) => (clearTimeout(timer), resolve(p.event_id)));
    });
  } finally {
    client.realtime.close();
  }
}

/**
 * Inserts `n` new-message events for `general` straight into the outbox, in one transaction, and
 * waits until the relay has numbered them all. One outbox row per event, each with its one item:
 * the rows that `n` posted messages leave (a transaction's events are one row), so that replay
 * reads them back across as many rows and batches as it would.
 */
async function produceMissedEvents(n, authorId) {
  return withDb(async (c) => {
    const { rows: [{ last }] } = await c.query(
      `WITH inserted AS (
         INSERT INTO outbox (items)
         SELECT json_build_array(json_build_object('name', 'new-message', 'room', 'general', 'payload',
                  json_build_object('id', 100000000 + g, 'room', 'general', 'author_id', $2::bigint,
                                     'text', rpad('rp' || g || '|', ${TEXT_LENGTH}, 'x'),
                                     'created_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))))
           FROM generate_series(1, $1::int) g
         RETURNING id
       )
       SELECT max(id) AS last FROM inserted`,
      [n, authorId],
    );
    const t0 = performance.now();
    // The relay numbers the rows of one transaction in id order: once the last is in a batch, all are.
    for (;;) {
      const { rows } = await c.query('SELECT EXISTS (SELECT 1 FROM outbox_batches WHERE row_ids @> ARRAY[$1::bigint]) AS numbered', [last]);
      if (rows[0].numbered) return (performance.now() - t0) / 1000;
      if (performance.now() - t0 > 60_000) throw new Error(`the last of ${n} outbox rows still unnumbered after 60 s`);
      await sleep(100);
    }
  });
}

/**
 * One reconnect with last_event_id, by the library's client (logged in before the clock starts):
 * the time from the subscription (the library's io() call) until the n-th replayed event reaches
 * its handler, and whether they came in order, once each (the library's promise, checked here).
 */
async function replayOnce(url, lastEventId, n, pid, run) {
  const client = await libraryClient(url, lastEventId, 2 + run);
  const meter = cpuMeter(pid, DB_NAME);
  const t0 = performance.now();
  let connected = null;
  let got = 0;
  let outOfOrder = 0;
  let previous = lastEventId;
  let resync = null;
  let otherEvents = 0;
  const ids = new Set();
  let duplicates = 0;
  try {
    const done = await new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), 120_000);
      client.realtime.on('connected', () => (connected ??= performance.now()));
      client.realtime.on('error', ({ error }) => (clearTimeout(timer), (resync = `error ${error?.message ?? error}`), resolve(false)));
      client.realtime.on('resync-required', (p) => (clearTimeout(timer), (resync = p), resolve(false)));
      // Subscribing connects the namespace, resuming after lastEventId.
      client.realtime.on('new-message', (p) => {
        if (typeof p?.text !== 'string' || !p.text.startsWith('rp')) return void otherEvents++;
        if (ids.has(p.event_id)) duplicates++;
        ids.add(p.event_id);
        if (!(p.event_id > previous)) outOfOrder++;
        previous = p.event_id;
        if (++got === n) {
          clearTimeout(timer);
          resolve(true);
        }
      });
    });
    const t = performance.now();
    const cpu = meter.since();
    return {
      complete: done,
      received: got,
      distinct: ids.size,
      duplicates,
      out_of_order: outOfOrder,
      other_new_messages: otherEvents,
      resync,
      seconds_from_connect_call: round3((t - t0) / 1000),
      seconds_from_connected: connected === null ? null : round3((t - connected) / 1000),
      handshake_ms: connected === null ? null : round1(connected - t0),
      events_per_s: done ? Math.round(n / ((t - t0) / 1000)) : null,
      cpu_us_per_event: { server: round1(cpu.server / Math.max(1, got)), postgres: round1(cpu.db / Math.max(1, got)) },
    };
  } finally {
    client.realtime.close();
  }
}

// ── report ─────────────────────────────────────────────────────────────────────────────
const kb = (n) => (n === null || n === undefined ? '—' : (n / 1024).toFixed(1));
const ratio = (a, b) => (a && b ? round3(a / b) : null);
const fx = (r) => (r === null ? '—' : `${r.toFixed(2)}×`);
const num = (n) => (n === null || n === undefined ? '—' : typeof n === 'number' ? String(n) : n);

function fanoutTable(rows) {
  const lines = [
    '| server | messages | deliveries | deliveries/s: rounds (each round) | per message, from send (p50) | per message, once started (p50) | latency from send p50 / p99 ms | from HTTP response p50 / p99 ms | delivered before the response | first → last client p50 / p99 ms | HTTP p50 / p99 ms |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const [name, s] of rows) {
    lines.push(
      `| ${name} | ${s.messages} | ${s.deliveries} | ${s.aggregate_deliveries_per_s} (${s.round_deliveries_per_s.join(', ')}) | ${s.per_message_deliveries_per_s.p50} | ${s.fanout_deliveries_per_s.p50} | ${num(s.latency_from_send_ms.p50)} / ${num(s.latency_from_send_ms.p99)} | ${num(s.latency_from_response_ms.p50)} / ${num(s.latency_from_response_ms.p99)} | ${(s.delivered_before_response * 100).toFixed(0)}% | ${num(s.fanout_spread_ms.p50)} / ${num(s.fanout_spread_ms.p99)} | ${num(s.http_ms.p50)} / ${num(s.http_ms.p99)} |`,
    );
  }
  lines.push('', '| server | server CPU µs / delivery | PostgreSQL CPU µs / delivery | bench process CPU µs / delivery | share of a core: server / PostgreSQL / bench process |', '| --- | ---: | ---: | ---: | ---: |');
  for (const [name, s] of rows) {
    lines.push(`| ${name} | ${num(s.cpu_us_per_delivery.server)} | ${num(s.cpu_us_per_delivery.postgres)} | ${num(s.cpu_us_per_delivery.bench_process)} | ${s.core_share.server} / ${s.core_share.postgres} / ${s.core_share.bench_process} |`);
  }
  return lines.join('\n');
}

/** What else the machine did during each round, as a sentence. */
function noiseLine(noise) {
  const pct = (x) => (x === null || x === undefined ? '—' : `${Math.round(x * 100)}%`);
  return `During the rounds (in their order: ${noise.map((n) => (n.server === 'teamlog' ? 'T' : 'B')).join(', ')}), other processes used ${noise.map((n) => pct(n.others_core_share)).join(', ')} of a core, the hypervisor stole ${noise.map((n) => pct(n.steal_core_share)).join(', ')}, and a write transaction was running in another database of the PostgreSQL server in ${noise.map((n) => pct(n.foreign_xact_share)).join(', ')} of the 100 ms samples${noise.some((n) => !n.started_quiet) ? ' (rounds that could not wait for a quiet machine: ' + noise.map((n, i) => (n.started_quiet ? null : i + 1)).filter(Boolean).join(', ') + ')' : ''}.`;
}

function machineLine() {
  let psql = 'PostgreSQL';
  try {
    psql = execSync('psql --version').toString().trim();
  } catch {
    /* no psql on the PATH */
  }
  return `${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${psql}`;
}

function openFilesLimit() {
  const m = readFileSync('/proc/self/limits', 'utf8').match(/Max open files\s+(\d+|unlimited)/);
  return m ? (m[1] === 'unlimited' ? Infinity : Number(m[1])) : Infinity;
}

// ── main, step by step ────────────────────────────────────────────────────────────────

/** Refuses to start when this process may not hold two sockets per client (one per server), plus the sender's and the database's. */
function checkOpenFilesLimit() {
  const limit = openFilesLimit();
  if (limit < 2 * CLIENTS + 200) throw new Error(`open files limit ${limit} is below ${2 * CLIENTS + 200}: raise it (ulimit -n)`);
}

/**
 * Builds Teamlog (dist/) and the client library the replay's client runs on (client/dist/,
 * compiled from its sources as they are, generated types included), then creates the database
 * with one user per client and the sender.
 */
async function buildAndSeed() {
  log('building…');
  execSync('npm run build', { cwd: ROOT, stdio: 'ignore' });
  execSync('npx tsc -p client/tsconfig.json', { cwd: ROOT, stdio: 'ignore' });
  ({ createClient } = await import('@teamlog/client'));
  const { hashPassword, DEFAULT_PASSWORD_HASH_COST } = await import(path.join(ROOT, 'dist/modules/auth/auth.passwords.js'));
  const passwordHash = await hashPassword(PASSWORD, DEFAULT_PASSWORD_HASH_COST);
  log(`creating ${DB_NAME} with ${CLIENTS} users…`);
  await seedDatabase(passwordHash);
}

/** Another user's tests or build on these two cores would decide the figures: waits for them (30 s at most with --quick, 5 min else). */
async function waitForQuietMachine() {
  log('waiting for the machine to be quiet (under 10% of a core busy for a second)…');
  const tQuiet = Date.now();
  const quietAtStart = { quiet: await quiet(QUICK ? 30_000 : 300_000), waited_s: Math.round((Date.now() - tQuiet) / 1000) };
  log(quietAtStart.quiet ? `quiet after ${quietAtStart.waited_s} s` : `still busy after ${quietAtStart.waited_s} s: going on; see each round's share of other processes`);
  return quietAtStart;
}

/** Starts Teamlog (server mode on the run's database) and the bare Socket.IO server, and the RSS sampler of both; kept in `run` for tearDown. */
async function startServers(run) {
  // ACCESS_TOKEN_TTL: a socket is disconnected when its access token expires (15 min by
  // default); the full run with its logins can come near that, so the tokens last an hour.
  // MALLOC_ENV: the README's malloc settings, for both servers (lib.mjs says why).
  const env = {
    DATABASE_URL: dbUrl(DB_NAME), DATA_DIR: run.dataDir, JWT_SECRET, ADMIN_EMAIL: ADMIN.email, ADMIN_PASSWORD: ADMIN.password,
    RATE_LIMIT_PER_MINUTE: '0', LOG_LEVEL: 'warn', ...MALLOC_ENV, ACCESS_TOKEN_TTL: '3600', REDIS_URL: '', TRUST_PROXY: '127.0.0.1/32',
  };
  const teamlogFlags = [`--inspect-port=127.0.0.1:${PORTS.teamlogInspector}`, ...(PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${run.profileDir}`] : [])];
  run.teamlogChild = await startProcess('teamlog', path.join(ROOT, 'dist/server.js'), env, PORTS.teamlog, { readyPath: '/health/ready', flags: teamlogFlags });
  run.bareChild = await startProcess('bare', path.join(ROOT, 'bench/baseline/socketio.mjs'), MALLOC_ENV, PORTS.bare, { readyPath: '/health', flags: [`--inspect-port=127.0.0.1:${PORTS.bareInspector}`] });
  run.pids = { teamlog: run.teamlogChild.pid, bare: run.bareChild.pid };
  ours.pids = [run.pids.teamlog, run.pids.bare];
  run.sampler = rssSampler(run.pids);
}

/** Logs every client's user and the senders in through POST /api/v1/auth/login, each from an address of its own: their access tokens, and the seconds it took. */
async function logInUsers(base) {
  log(`logging in ${CLIENTS} users through POST /api/v1/auth/login (${LOGIN_CONCURRENCY} at a time)…`);
  const tLogin = performance.now();
  const tokens = new Array(CLIENTS);
  await pool(CLIENTS, LOGIN_CONCURRENCY, async (i) => {
    tokens[i] = await login(base, `rt${i + 1}@bench.local`, PASSWORD, i + 1);
    if ((i + 1) % 200 === 0) log(`  ${i + 1} logged in`);
  });
  const senderTokens = [];
  for (let k = 1; k <= SENDERS; k++) senderTokens.push(await login(base, `rt-sender${k}@bench.local`, PASSWORD, CLIENTS + k));
  const loginSeconds = (performance.now() - tLogin) / 1000;
  log(`logged in in ${loginSeconds.toFixed(1)} s (${(CLIENTS / loginSeconds).toFixed(0)}/s)`);
  return { tokens, senderTokens, loginSeconds };
}

/**
 * 3. Memory per idle connection: each server's RSS after a forced GC with no socket, then
 * connects every client to it (Teamlog: one user each; bare: no auth) and reads it again with
 * them idle. Answers results.memory and results.connect.
 */
async function measureIdleMemory(teamlog, bare, pids, tokens) {
  await quiet();
  const memory = { teamlog: {}, bare: {} };
  memory.teamlog.idle0 = await collectGarbage(pids.teamlog, PORTS.teamlogInspector);
  memory.bare.idle0 = await collectGarbage(pids.bare, PORTS.bareInspector);
  log(`RSS with 0 sockets: Teamlog ${kb(memory.teamlog.idle0.rss_kb)} MB, bare ${kb(memory.bare.idle0.rss_kb)} MB`);

  const connect = {};
  for (const [target, pid, tok] of [[teamlog, pids.teamlog, tokens], [bare, pids.bare, new Array(CLIENTS).fill(null)]]) {
    const cpu0 = cpuMicros(pid);
    const seconds = await connectClients(target, tok);
    const settled = await quiet(60_000);
    connect[target.name] = { clients: target.alive, seconds: round3(seconds), errors: target.connectErrors.length, server_cpu_us_per_connection: Math.round((cpuMicros(pid) - cpu0) / Math.max(1, target.alive)), settled };
    log(`${target.label}: ${target.alive}/${CLIENTS} sockets connected in ${seconds.toFixed(1)} s (${target.connectErrors.length} errors; server CPU ${connect[target.name].server_cpu_us_per_connection} µs per connection, the settle included)`);
    await sleep(2000);
    memory[target.name].idle = await collectGarbage(pid, target === teamlog ? PORTS.teamlogInspector : PORTS.bareInspector);
    const m = memory[target.name];
    m.clients = target.alive;
    m.rss_kb_per_connection = round1((m.idle.rss_kb - m.idle0.rss_kb) / Math.max(1, target.alive));
    m.heap_kb_per_connection = m.idle.heap_used_kb === null ? null : round1((m.idle.heap_used_kb - m.idle0.heap_used_kb) / Math.max(1, target.alive));
    m.external_kb_per_connection = m.idle.external_kb === null ? null : round1((m.idle.external_kb - m.idle0.external_kb) / Math.max(1, target.alive));
    log(`${target.label}: RSS ${kb(m.idle.rss_kb)} MB with ${target.alive} idle sockets: ${m.rss_kb_per_connection} KB per connection (heap ${m.heap_kb_per_connection} KB)`);
  }
  return {
    memory: { measure: 'memory per idle connection', clients: CLIENTS, ...memory, ratio_rss_per_connection: memory.teamlog.rss_kb_per_connection > 0 && memory.bare.rss_kb_per_connection > 0 ? ratio(memory.teamlog.rss_kb_per_connection, memory.bare.rss_kb_per_connection) : null },
    connect: { measure: 'connect', ...connect },
  };
}

/** Warm-up, then the paced and the saturated rounds in the order Teamlog, bare, bare, Teamlog: each round's figures, by mode and server. */
async function runFanoutRounds(teamlog, bare, pids) {
  log(`warm-up: ${WARMUP} paced messages to each server…`);
  await runRound(teamlog, pids.teamlog, WARMUP, 'paced');
  await runRound(bare, pids.bare, WARMUP, 'paced');
  const rounds = { paced: { teamlog: [], bare: [] }, saturated: { teamlog: [], bare: [] } };
  const pidOf = (t) => (t === teamlog ? pids.teamlog : pids.bare);
  for (const mode of ['paced', 'saturated']) {
    for (const target of [teamlog, bare, bare, teamlog]) {
      const wasQuiet = await quiet(10_000);
      const r = await runRound(target, pidOf(target), ROUND, mode);
      r.started_quiet = wasQuiet;
      if (PROFILE) log(`  ${mode} ${target.name} round: monotonic µs ${r.monotonic_us.join(' – ')}`);
      rounds[mode][target.name].push(r);
      const s = summarize(target, [r]);
      log(`${mode} ${target.label}: ${s.aggregate_deliveries_per_s} deliveries/s (per message p50 ${s.per_message_deliveries_per_s.p50}), from send p50 ${s.latency_from_send_ms.p50} / p99 ${s.latency_from_send_ms.p99} ms, from response p50 ${s.latency_from_response_ms.p50} / p99 ${s.latency_from_response_ms.p99} ms, server ${s.cpu_us_per_delivery.server} µs/delivery, bench process ${Math.round(s.core_share.bench_process * 100)}% of a core; other processes ${Math.round(r.others_core_share * 100)}%, steal ${Math.round(r.steal_core_share * 100)}%, foreign write transaction in ${Math.round((r.foreign_xact_share ?? 0) * 100)}% of samples${r.undelivered ? `, ${r.undelivered} undelivered` : ''}`);
    }
  }
  return rounds;
}

/** 1 and 2. The rounds of one mode summed up per server, what else the machine did during each, and Teamlog ÷ bare. */
function fanoutResult(mode, teamlog, bare, rounds) {
  const t = summarize(teamlog, rounds[mode].teamlog);
  const b = summarize(bare, rounds[mode].bare);
  const key = mode === 'paced' ? 'per_message_deliveries_per_s' : null;
  const rate = (s) => (key ? s[key].p50 : s.aggregate_deliveries_per_s);
  const result = {
    measure: mode === 'paced' ? `fan-out at ${RATE} messages/s` : `fan-out saturated (${SAT_CONCURRENCY} triggers in flight)`,
    clients: CLIENTS, rate_per_s: mode === 'paced' ? RATE : null,
    teamlog: t, bare: b,
    // What else the machine did during each round (the order Teamlog, bare, bare, Teamlog).
    noise: [teamlog, bare, bare, teamlog].map((x, i) => {
      const r = rounds[mode][x.name][i === 0 || i === 1 ? 0 : 1];
      return { server: x.name, started_quiet: r.started_quiet, others_core_share: r.others_core_share, steal_core_share: r.steal_core_share, foreign_xact_share: r.foreign_xact_share };
    }),
    ratio: {
      deliveries_per_s: ratio(rate(t), rate(b)),
      p99_from_send: ratio(t.latency_from_send_ms.p99, b.latency_from_send_ms.p99),
      // Only when both are positive: the bare server emits before it answers, so its deliveries mostly precede its response.
      p99_from_response: t.latency_from_response_ms.p99 > 0 && b.latency_from_response_ms.p99 > 0 ? ratio(t.latency_from_response_ms.p99, b.latency_from_response_ms.p99) : null,
      fanout_once_started: ratio(t.fanout_deliveries_per_s.p50, b.fanout_deliveries_per_s.p50),
      server_cpu_per_delivery: ratio(t.cpu_us_per_delivery.server, b.cpu_us_per_delivery.server),
    },
  };
  log(`${mode}: Teamlog ÷ bare deliveries/s ${fx(result.ratio.deliveries_per_s)}, p99 from send ${fx(result.ratio.p99_from_send)}, server CPU per delivery ${fx(result.ratio.server_cpu_per_delivery)}`);
  return result;
}

/** Over every message sent, what each server's clients missed or got twice. */
function checkDeliveries(targets) {
  const result = { measure: 'delivery integrity' };
  for (const t of targets) {
    const i = (result[t.name] = integrity(t));
    log(`${t.label}: ${i.clients_that_missed} clients missed ${i.deliveries_missed} deliveries, ${i.duplicate_deliveries} duplicates, ${i.disconnects} disconnects, ${i.trigger_errors} trigger errors${refusedBy(i)}`);
  }
  return result;
}

/**
 * 4. Replay: with every fan-out socket closed, user 1 (the library's client) takes its live
 * position, REPLAY_EVENTS events are committed behind its back, and it reconnects from that
 * position REPLAY_RUNS times.
 */
async function measureReplay(base, teamlog, bare, pid) {
  closeClients(teamlog);
  closeClients(bare);
  await quiet(60_000);
  log(`replay: ${REPLAY_EVENTS} events missed by one client…`);
  const authorId = await withDb(async (c) => (await c.query(`SELECT id FROM users WHERE email = 'rt-sender1@bench.local'`)).rows[0].id);
  const lastEventId = await currentPosition(base);
  await sleep(500);
  const numberedIn = await produceMissedEvents(REPLAY_EVENTS, authorId);
  await quiet(30_000);
  const replays = [];
  for (let i = 0; i < REPLAY_RUNS; i++) {
    const r = await replayOnce(base, lastEventId, REPLAY_EVENTS, pid, i);
    replays.push(r);
    log(`replay ${i + 1}: ${r.received}/${REPLAY_EVENTS} in ${r.seconds_from_connect_call} s from the connect call (${r.events_per_s} events/s; handshake ${r.handshake_ms} ms), ${r.duplicates} duplicates, ${r.out_of_order} out of order${r.resync ? `, ${JSON.stringify(r.resync)}` : ''}; server ${r.cpu_us_per_event.server} µs/event`);
    await quiet(10_000);
  }
  const okRates = replays.filter((r) => r.complete).map((r) => r.events_per_s).sort((a, b) => a - b);
  return {
    measure: 'replay of missed events to one reconnecting client',
    events: REPLAY_EVENTS, last_event_id: lastEventId, numbered_in_s: round3(numberedIn),
    events_per_s_median: okRates.length ? okRates[Math.floor(okRates.length / 2)] : null,
    runs: replays,
  };
}

/** The run's parameters, the machine, and how long everything took. */
function runSummary({ started, loginSeconds, quietAtStart, peak }) {
  return {
    measure: 'run',
    quick: QUICK, clients: CLIENTS, warmup: WARMUP, round: ROUND, rate_per_s: RATE, saturated_concurrency: SAT_CONCURRENCY, text_length: TEXT_LENGTH,
    login_seconds: round3(loginSeconds), quiet_at_start: quietAtStart, peak_rss_mb: { teamlog: Math.round(peak.teamlog / 1024), bare: Math.round(peak.bare / 1024) },
    duration_s: Math.round((Date.now() - started) / 1000),
    machine: machineLine(),
    at: new Date().toISOString(),
  };
}

/** Leaves nothing behind, whatever happened: samplers, sockets, both servers, the data directory, the database. */
async function tearDown(run) {
  run.sampler?.stop();
  await foreign.close();
  for (const t of run.targets) closeClients(t);
  await stop(run.teamlogChild);
  await stop(run.bareChild);
  rmSync(run.dataDir, { recursive: true, force: true });
  await adminQuery(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`).catch((err) => log(`could not drop ${DB_NAME}: ${err.message}`));
}

async function main() {
  checkOpenFilesLimit();
  const started = Date.now();
  log(`realtime benchmark${QUICK ? ' (quick)' : ''}: ${CLIENTS} clients, ${WARMUP} warm-up + 2 × ${ROUND} paced (${RATE}/s) + 2 × ${ROUND} saturated messages per server, replay of ${REPLAY_EVENTS} events`);
  await buildAndSeed();

  /** What tearDown stops and removes. */
  const run = {
    dataDir: mkdtempSync(path.join(tmpdir(), 'teamlog-bench-rt-')),
    profileDir: PROFILE ? mkdtempSync(path.join(tmpdir(), 'teamlog-rt-profile-')) : null,
    teamlogChild: undefined, bareChild: undefined, pids: undefined, sampler: undefined, targets: [],
  };
  const results = {};
  try {
    foreign = foreignXactSampler();
    const quietAtStart = await waitForQuietMachine();
    await startServers(run);
    const base = `http://127.0.0.1:${PORTS.teamlog}`;
    const { tokens, senderTokens, loginSeconds } = await logInUsers(base);
    const teamlog = makeTarget('teamlog', 'Teamlog', base, `${base}/api/v1/messages`, { 'content-type': 'application/json' });
    teamlog.senders = senderTokens.map((token) => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json' }));
    const bare = makeTarget('bare', 'bare Socket.IO', `http://127.0.0.1:${PORTS.bare}`, `http://127.0.0.1:${PORTS.bare}/broadcast`, { 'content-type': 'application/json' });
    run.targets.push(teamlog, bare);

    Object.assign(results, await measureIdleMemory(teamlog, bare, run.pids, tokens));
    const rounds = await runFanoutRounds(teamlog, bare, run.pids);
    for (const mode of ['paced', 'saturated']) results[mode] = fanoutResult(mode, teamlog, bare, rounds);
    results.integrity = checkDeliveries(run.targets);
    results.replay = await measureReplay(base, teamlog, bare, run.pids.teamlog);
    results.summary = runSummary({ started, loginSeconds, quietAtStart, peak: run.sampler.peak() });
  } finally {
    await tearDown(run);
  }
  if (run.profileDir) log(`Teamlog CPU profile: ${readdirSync(run.profileDir).map((f) => path.join(run.profileDir, f)).join(', ')}`);
  writeReport(results);
}

/** " (429 ×160)": the statuses of refused triggers, when there were any. */
const refusedBy = (i) => {
  const byStatus = Object.entries(i.trigger_refusals ?? {});
  return byStatus.length === 0 ? '' : ` (${byStatus.map(([status, n]) => `${status} ×${n}`).join(', ')})`;
};

function writeReport(results) {
  const { memory, connect, paced, saturated, integrity: integ, replay, summary } = results;
  // RSS that fell while the sockets connected is not a cost per connection: memory held at the
  // first reading was given back meanwhile. Shown as such, not as a negative figure.
  const perConnection = (v) => (v < 0 ? `— (RSS fell by ${-v} KB per socket: not measured)` : `**${v}**`);
  const memRow = (name, m) =>
    `| ${name} | ${m.clients} | ${kb(m.idle0.rss_kb)} | ${kb(m.idle.rss_kb)} | ${perConnection(m.rss_kb_per_connection)} | ${num(m.heap_kb_per_connection)} | ${num(m.external_kb_per_connection)} | ${m.idle.gc ? 'yes' : 'no'} |`;
  const integRow = (name, i) =>
    `| ${name} | ${i.clients_connected} | ${i.connect_errors} | ${i.disconnects} | ${i.messages_sent} | ${i.trigger_errors}${refusedBy(i)} | ${i.clients_that_missed} (${i.deliveries_missed} deliveries) | ${i.clients_with_duplicates} (${i.duplicate_deliveries}) |`;
  const md = [
    `# Real-time benchmark${summary.quick ? ' (quick)' : ''}`,
    '',
    `Machine: ${summary.machine}. ${summary.at.slice(0, 10)}; the run took ${summary.duration_s} s.`,
    `Teamlog: \`node dist/server.js\`, server mode on a fresh \`${DB_NAME}\` PostgreSQL database, one instance (no REDIS_URL), LOG_LEVEL=warn, MALLOC_ARENA_MAX=2 and MALLOC_MMAP_THRESHOLD_=131072 (the README's; the ceiling runs with them too), RATE_LIMIT_PER_MINUTE=0, ACCESS_TOKEN_TTL=3600 (so no socket reaches its token's expiry during the run), TRUST_PROXY=127.0.0.1/32 (each user logs in from an X-Forwarded-For address of its own, as bench/run.mjs does). The ceiling: \`bench/baseline/socketio.mjs\`, a bare Socket.IO ${'4'} server on node:http (same Socket.IO package and options, no auth, no presence, no database) that sends each message with \`io.emit\`.`,
    `Clients: ${summary.clients} socket.io-client sockets per server (\`transports: ['websocket']\`, no reconnection), all in this one benchmark process, connected ${CONNECT_CONCURRENCY} at a time; for Teamlog, one user per socket (${summary.clients} users created in SQL with one password hash, each logged in through \`POST /api/v1/auth/login\`: ${summary.login_seconds} s), every socket in \`general\`. Every message has a ${summary.text_length}-character text naming it, so each delivery is matched to its message and its client.`,
    '',
    '## Fan-out of one message to every client',
    '',
    ...[['Teamlog', integ.teamlog], ['bare Socket.IO', integ.bare]]
      .filter(([, i]) => i.trigger_errors > 0)
      .map(([name, i]) => `**${name}: ${i.trigger_errors} of ${i.messages_sent} triggers were refused${refusedBy(i)}; the figures below count only the messages that were sent.**\n`),
    `Each message is triggered by one HTTP request: Teamlog \`POST /api/v1/messages\` (sent by ${SENDERS} users in turn, none of them a client, room \`general\`; the event is delivered after commit, through the outbox, the relay and the dispatcher), the bare server \`POST /broadcast\` (it emits, then answers). ${summary.warmup} warm-up messages per server, then rounds of ${summary.round} messages in the order Teamlog, bare, bare, Teamlog (both servers' clients stay connected throughout; the idle ones cost nothing). Latency is per delivery, from the moment the trigger request was sent and from the moment its HTTP response arrived (negative when the event beats the response); percentiles over all deliveries. CPU is the server process's (and PostgreSQL's) utime + stime from /proc over the rounds, per delivery; the bench process's CPU share shows when the clients, all in one process on the same two cores, were the limit.`,
    '',
    `### At a steady pace: ${paced.rate_per_s} messages/s (${paced.rate_per_s * paced.clients} deliveries/s offered)`,
    '',
    'Deliveries/s: "rounds", every delivery of the rounds over the sum of each round\'s time from its first send to its last delivery (at a steady pace the pace bounds it); "per message, from send", one message\'s deliveries over the time from its request\'s send to its last delivery (the median message: it holds the HTTP request, the commit and the path to the socket as well as the fan-out); "per message, once started", over the time from its first to its last delivery (the fan-out alone). "first → last client": that time.',
    '',
    fanoutTable([['Teamlog', paced.teamlog], ['bare Socket.IO', paced.bare]]),
    '',
    noiseLine(paced.noise),
    '',
    `Teamlog ÷ ceiling: deliveries/s per message from send **${fx(paced.ratio.deliveries_per_s)}** (target ≥ 0.8×), once started ${fx(paced.ratio.fanout_once_started)}; p99 from send ${fx(paced.ratio.p99_from_send)}; p99 from the response ${fx(paced.ratio.p99_from_response)}${paced.ratio.p99_from_response === null ? ' (the bare server emits before it answers: its deliveries mostly precede its response, so only the figures from send compare)' : ''}; server CPU per delivery ${fx(paced.ratio.server_cpu_per_delivery)}.`,
    '',
    `### Saturated: ${SAT_CONCURRENCY} trigger requests in flight, back to back`,
    '',
    `The sustained ceiling: each server gets ${SAT_CONCURRENCY} trigger requests in flight, each sent as the previous one is answered, as fast as it answers them; deliveries/s is "rounds" as above.`,
    '',
    fanoutTable([['Teamlog', saturated.teamlog], ['bare Socket.IO', saturated.bare]]),
    '',
    noiseLine(saturated.noise),
    '',
    `Teamlog ÷ ceiling: deliveries/s **${fx(saturated.ratio.deliveries_per_s)}** (target ≥ 0.8×), per message once started ${fx(saturated.ratio.fanout_once_started)}; p99 from send ${fx(saturated.ratio.p99_from_send)}; p99 from the response ${fx(saturated.ratio.p99_from_response)}; server CPU per delivery ${fx(saturated.ratio.server_cpu_per_delivery)}.`,
    '',
    '### Deliveries per client',
    '',
    'Over every message sent (warm-up included), each client\'s count of each message: a client that missed one, or got one twice, is counted here.',
    '',
    '| server | clients connected | connect errors | disconnects | messages | failed triggers | clients that missed a message | clients with duplicates |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    integRow('Teamlog', integ.teamlog),
    integRow('bare Socket.IO', integ.bare),
    '',
    '## Memory per idle connection',
    '',
    `The server's VmRSS (/proc/<pid>/status) with no socket and with ${memory.clients} idle sockets, each read after the machine settled (under 10% of a core busy for a second, everything included) and a full garbage collection forced through the inspector (SIGUSR1 opens it on the port given by \`--inspect-port\`, which opens nothing by itself; \`HeapProfiler.collectGarbage\` twice). Teamlog's figure with no socket is after the logins. Connecting took Teamlog ${connect.teamlog.seconds} s (server CPU ${connect.teamlog.server_cpu_us_per_connection} µs per connection, its presence announcements to the other sockets included) and the bare server ${connect.bare.seconds} s (${connect.bare.server_cpu_us_per_connection} µs).`,
    '',
    '| server | sockets | RSS MB, 0 sockets | RSS MB, idle sockets | RSS KB per connection | V8 heap KB per connection | external + array buffers KB per connection | GC forced |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | :---: |',
    memRow('Teamlog', memory.teamlog),
    memRow('bare Socket.IO', memory.bare),
    '',
    `Teamlog ÷ bare, RSS per connection: ${fx(memory.ratio_rss_per_connection)} (target: under 30 KB per connection, about bare Socket.IO's). Peak RSS over the whole run: Teamlog ${summary.peak_rss_mb.teamlog} MB, bare ${summary.peak_rss_mb.bare} MB.`,
    '',
    `## Replay of ${replay.events.toLocaleString('en')} missed events to one reconnecting client`,
    '',
    `One user's socket connected, took the \`event_id\` of its \`presence-snapshot\` (${replay.last_event_id}) and disconnected (with every other socket gone, so nothing else is delivered); ${replay.events.toLocaleString('en')} \`new-message\` outbox rows for \`general\` (payloads shaped like a message, ${summary.text_length}-character texts) were inserted in one SQL transaction (one outbox row each, as ${replay.events.toLocaleString('en')} posted messages leave them), and the relay numbered them within ${replay.numbered_in_s} s. Then the client, built on \`@teamlog/client\` (\`createClient\` with \`realtime.lastEventId\`, logged in before the clock starts), reconnected from that position (the library sends it as \`last_event_id\`), ${replay.runs.length} times in a row (the same events each time); timed from the subscription (the library's \`io()\` call) to the last replayed event reaching its handler.`,
    '',
    '| run | received | time from the connect call s | handshake ms | events/s | duplicates | out of order | server CPU µs / event | PostgreSQL CPU µs / event |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...replay.runs.map((r, i) => `| ${i + 1} | ${r.received} | ${r.seconds_from_connect_call} | ${num(r.handshake_ms)} | ${num(r.events_per_s)} | ${r.duplicates} | ${r.out_of_order} | ${r.cpu_us_per_event.server} | ${r.cpu_us_per_event.postgres} |`),
    '',
    `Median: **${num(replay.events_per_s_median)} events/s**.`,
    '',
  ].join('\n');
  const lines = [paced, saturated, memory, replay, integ, connect, summary].map((r) => JSON.stringify(r)).join('\n') + '\n';
  const outDir = QUICK ? tmpdir() : path.join(ROOT, 'bench/results');
  const base = QUICK ? 'teamlog-realtime-quick' : 'realtime';
  writeFileSync(path.join(outDir, `${base}.md`), md);
  writeFileSync(path.join(outDir, `${base}.jsonl`), lines);
  process.stdout.write(`${md}\n`);
  log(`written: ${path.join(outDir, `${base}.md`)} and .jsonl`);
}

const watchdog = setTimeout(() => {
  log(`watchdog: the run took more than ${WATCHDOG_MS / 60_000} min; stopping`);
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  adminQuery(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`).finally(() => process.exit(2));
}, WATCHDOG_MS);
watchdog.unref();

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
