#!/usr/bin/env node
// npm run bench [-- --quick] [-- --no-embedded]
// Starts Teamlog in server mode on a freshly seeded PostgreSQL database (100,000 tasks,
// 1,000,000 audit records, 1,000 users), starts the same-schema baseline server on the same
// data and the bare app on a database of its own (two tables, primary keys only), and runs
// autocannon scenarios (warm-up, then 10 s at 50 connections) against them. The write
// scenarios also get what a request writes (WAL, tuples, index entries: bench/write-cost.mjs).
// Then audit search (GET /audit-logs?q=, bench/search.mjs): each single-key query at one
// connection on a database of its own, a million records spread over a year (this seed's are
// written within seconds, on which time windows would select all or nothing).
// Then the same scenarios against embedded PGlite (a smaller seed: WASM seeding is slow).
// Writes bench/results/latest.md and one JSON line per scenario to bench/results/latest.jsonl.
// Then what two audit verifications through the API cost the other users (bench/scan-impact.mjs).
// `--only search` runs the search part alone and writes it to a report of its own in
// bench/results/, not over latest.md (with --quick: 100,000 records, 50 requests a query).
// Timings are reported, never asserted.
import { execSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { auditEvidenceBench, auditEvidenceMarkdown, waitSealed, waitSealedHttp } from './audit-evidence.mjs';
import { cpuMeter as meterCpu, machineMeter } from './cpu.mjs';
import { scanImpactBench } from './scan-impact.mjs';
import { MALLOC_ENV, login, rssSampler, startProcess, stop, withClient } from './lib.mjs';
import { explainSearch, measureSearch, measureStats, searchQueries, searchTable, seedSearchDatabase, statsTable, worstSearchP99 } from './search.mjs';
import { installWalInspect, writeCost, writeCostText, writeCounters } from './write-cost.mjs';

const args = process.argv.slice(2);
const QUICK = args.includes('--quick');
const EMBEDDED = !args.includes('--no-embedded') && !QUICK;
// --profile: the Teamlog server writes a V8 CPU profile to bench/results/profiles/ at exit.
const PROFILE = args.includes('--profile');
const ONLY = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;
const PG_BASE = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB_NAME = 'teamlog_bench';
// The bare app's database (bench/baseline/bare.mjs): its two tables and nothing else.
const BARE_DB_NAME = 'teamlog_bench_bare';
// Audit search's database (bench/search.mjs's seed): records spread over a year.
const SEARCH_DB_NAME = 'teamlog_bench_search';
// The copy of the benchmark's database that the sealing pairs' "off" instance runs on (twinDatabase).
const TWIN_DB_NAME = `${DB_NAME}_sealing_off`;
// --quick: about three minutes with its build (of which the write scenarios' waits for the
// table counters, 22 s a run: bench/write-cost.mjs), for before and after a change to a hot path.
// --seconds N and --rounds N override a run's length and its rounds (a side-by-side check of
// one change, with --only <scenario>).
const numberArg = (name) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : undefined);
const DURATION = numberArg('--seconds') ?? (QUICK ? 2 : 10);
const WARMUP = QUICK ? 1 : 3;
const CONNECTIONS = 50;
// Scenarios with a baseline run this many rounds, each a Teamlog run paired with a run of each
// of its baselines; each ratio is its median pair's. This VM's speed drifts by a third from
// minute to minute, so only runs close in time compare.
const ROUNDS = numberArg('--rounds') ?? (QUICK ? 1 : 5);
// What two audit verifications running through the API cost the other users' GET /tasks
// (bench/scan-impact.mjs): rounds of idle, one and two scans, each measure this many seconds.
const SCAN_IMPACT = QUICK ? { rounds: 1, duration: 3 } : { rounds: 3, duration: 5 };
// Runs of each audit-evidence measure (verification, export), reported by their median.
const EVIDENCE_RUNS = QUICK ? 1 : 3;
// Sealing on ÷ off: pairs of short runs on two instances that run side by side
// (bench/audit-evidence.mjs says why). Sealing's effect (a few per cent) is smaller than this
// VM's drift over the half minute between two runs of separately started instances: nine such
// pairs ranged from 0.76× to 1.07× in one run.
const SEALING_PAIRS = QUICK ? 3 : 15;
const SEALING_RUN_SECONDS = QUICK ? 2 : 4;
const VOLUME = QUICK
  ? { users: 1000, tasks: 20_000, audit: 100_000 }
  : { users: 1000, tasks: 100_000, audit: 1_000_000 };
const EMBEDDED_VOLUME = { users: 1000, tasks: 20_000, audit: 100_000 };
const SEARCH = QUICK ? { records: 100_000, runs: 50 } : { records: 1_000_000, runs: 200 };
const PASSWORD = 'bench-password-1';
const ADMIN = { email: 'bench-admin@bench.local', password: 'bench-admin-password' };
const JWT_SECRET = 'bench-secret-'.padEnd(48, 'x');
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

const dbUrl = (name) => Object.assign(new URL(PG_BASE), { pathname: `/${name}` }).toString();

function log(msg) {
  process.stderr.write(`${msg}\n`);
}

// ── seeding ────────────────────────────────────────────────────────────────────────────
/** The seed, as SQL over any Queryable-like `q(sql, params)`; ids come from the data. */
async function seed(q, volume, passwordHash) {
  await q(
    `INSERT INTO users (email, name, password_hash, role)
     SELECT 'bench' || g || '@bench.local', 'Bench User ' || g, $1, 'USER' FROM generate_series(1, $2::int) g`,
    [passwordHash, volume.users],
  );
  const bench = (await q(`SELECT id FROM users WHERE email = 'bench1@bench.local'`))[0].id;
  await q(`INSERT INTO projects (name, description, created_by) SELECT 'Project ' || g, 'Bench project ' || g, $1 FROM generate_series(1, 100) g`, [bench]);
  // Ten members per project; the bench user owns the first ten projects.
  await q(
    `INSERT INTO project_members (project_id, user_id, role)
     SELECT p.id, u.id, 'MEMBER' FROM projects p JOIN users u ON u.id % 100 = p.id % 100 AND u.role = 'USER' AND u.id <> $1`,
    [bench],
  );
  await q(`INSERT INTO project_members (project_id, user_id, role) SELECT id, $1, 'OWNER' FROM projects ORDER BY id LIMIT 10`, [bench]);
  await q(
    `INSERT INTO tasks (project_id, title, description, status, created_by)
     SELECT a.pids[1 + g % 100], 'Task ' || g || ' ' || md5(g::text), 'Description of bench task number ' || g,
            (ARRAY['TODO','IN_PROGRESS','IN_REVIEW','DONE','CANCELED'])[1 + g % 5], $2
       FROM generate_series(1, $1::int) g, (SELECT array_agg(id ORDER BY id) AS pids FROM projects) a`,
    [volume.tasks, bench],
  );
  for (let done = 0; done < volume.audit; done += 250_000) {
    const n = Math.min(250_000, volume.audit - done);
    await q(
      `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
       SELECT u.ids[1 + g % array_length(u.ids, 1)],
              (ARRAY['CREATE_TASK','CHANGE_TASK_STATUS','ASSIGN_TASK','LOGIN_SUCCESS','DELETE_TASK'])[1 + g % 5],
              'TASK', g, 'SUCCESS', '{"seed":true}', '10.0.0.1', 'bench-seed', 'seed-' || g
         FROM generate_series($1::int + 1, $1::int + $2::int) g, (SELECT array_agg(id) AS ids FROM users) u`,
      [done, n],
    );
  }
  // Leave autovacuum nothing to do on the fresh million rows and flush the seed's dirty pages
  // now, or a vacuum and a checkpoint would land inside the first scenarios' runs.
  await q('VACUUM (ANALYZE)');
  await q('CHECKPOINT');
  const projectId = (await q('SELECT min(project_id) AS id FROM project_members WHERE user_id = $1', [bench]))[0].id;
  const taskIds = (await q(
    `SELECT id FROM tasks WHERE project_id IN (SELECT project_id FROM project_members WHERE user_id = $1) AND status IN ('TODO','IN_PROGRESS') ORDER BY id DESC LIMIT 2000`,
    [bench],
  )).map((r) => r.id);
  const actorIds = (await q(`SELECT id FROM users WHERE role = 'USER' ORDER BY id LIMIT 200`)).map((r) => r.id);
  return { bench, projectId, taskIds, actorIds };
}

async function seedPostgres(volume, passwordHash) {
  const admin = new pg.Client({ connectionString: PG_BASE });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB_NAME}`);
  await admin.end();
  const { migratePostgres } = await import(path.join(ROOT, 'dist/db/migrate.js'));
  await migratePostgres(dbUrl(DB_NAME));
  const c = new pg.Client({ connectionString: dbUrl(DB_NAME) });
  await c.connect();
  pg.types.setTypeParser(20, Number);
  try {
    return await seed(async (sql, params) => (await c.query(sql, params)).rows, volume, passwordHash);
  } finally {
    await c.end();
  }
}

/**
 * The bare app's database: its two tables, primary keys only (no other index, no trigger, no
 * foreign key), and for its list the memberships (primary key only too) and a copy of the
 * seeded tasks, so that it lists what Teamlog lists.
 */
async function createBareDatabase() {
  await withClient(PG_BASE, async (admin) => {
    await admin.query(`DROP DATABASE IF EXISTS ${BARE_DB_NAME} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${BARE_DB_NAME}`);
  });
  await withClient(dbUrl(BARE_DB_NAME), async (c) => {
    await c.query(`CREATE TABLE tasks (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, project_id bigint NOT NULL, title text NOT NULL,
      description text NOT NULL DEFAULT '', assignee_id bigint, created_by bigint, created_at timestamptz NOT NULL DEFAULT now(),
      status text NOT NULL DEFAULT 'TODO', updated_at timestamptz NOT NULL DEFAULT now())`);
    await c.query(`CREATE TABLE audit_log (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, actor_id bigint, action text NOT NULL, resource_type text NOT NULL,
      resource_id bigint, "timestamp" timestamptz NOT NULL DEFAULT clock_timestamp(), result text NOT NULL, metadata jsonb NOT NULL,
      ip text, user_agent text, request_id text NOT NULL)`);
    await c.query('CREATE TABLE project_members (project_id bigint, user_id bigint, PRIMARY KEY (project_id, user_id))');
  });
  // The seeded rows, copied over COPY: the bare database has no foreign data wrapper to read them.
  await withClient(dbUrl(DB_NAME), async (from) => {
    await withClient(dbUrl(BARE_DB_NAME), async (to) => {
      const members = (await from.query('SELECT project_id, user_id FROM project_members')).rows;
      await to.query('INSERT INTO project_members SELECT * FROM unnest($1::bigint[], $2::bigint[])', [members.map((m) => m.project_id), members.map((m) => m.user_id)]);
      const columns = ['project_id', 'title', 'description', 'assignee_id', 'created_by', 'created_at', 'status', 'updated_at'];
      const tasks = (await from.query(`SELECT ${columns.join(', ')} FROM tasks ORDER BY id`)).rows;
      await to.query(
        `INSERT INTO tasks (${columns.join(', ')})
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::timestamptz[], $7::text[], $8::timestamptz[])`,
        columns.map((k) => tasks.map((t) => t[k])),
      );
      await to.query('VACUUM (ANALYZE)');
    });
  });
}

async function dropDatabases(...names) {
  await withClient(PG_BASE, async (admin) => {
    for (const name of names) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });
}

/**
 * A copy of the benchmark's database (TWIN_DB_NAME), for an instance that must run beside
 * another on the same data without sharing its work (the sealing pairs: bench/audit-evidence.mjs).
 * A file copy: no server may be connected to the original meanwhile.
 */
async function twinDatabase() {
  await withClient(PG_BASE, async (admin) => {
    await admin.query(`DROP DATABASE IF EXISTS ${TWIN_DB_NAME} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${TWIN_DB_NAME} TEMPLATE ${DB_NAME} STRATEGY FILE_COPY`);
  });
  return { name: TWIN_DB_NAME, url: dbUrl(TWIN_DB_NAME), drop: () => dropDatabases(TWIN_DB_NAME) };
}

async function seedPglite(dataDir, volume, passwordHash) {
  const { createPgliteDatabase } = await import(path.join(ROOT, 'dist/db/pglite.js'));
  const { migrate, databaseSession } = await import(path.join(ROOT, 'dist/db/migrate.js'));
  const db = await createPgliteDatabase(path.join(dataDir, 'pglite'), () => {});
  await migrate(databaseSession(db));
  try {
    return await seed((sql, params) => db.query(sql, params), volume, passwordHash);
  } finally {
    await db.close();
  }
}

// ── processes ──────────────────────────────────────────────────────────────────────────
/** What each server answers once it is ready (its database included). */
const READY_PATH = { teamlog: '/health/ready', baseline: '/tasks?limit=1', bare: '/health' };

/** Starts one of the servers compared, and waits until it answers READY_PATH. */
function startServer(name, script, env, port) {
  const flags = PROFILE && name === 'teamlog' ? ['--cpu-prof', `--cpu-prof-dir=${path.join(ROOT, 'bench/results/profiles')}`] : [];
  return startProcess(name, script, env, port, { readyPath: READY_PATH[name], flags });
}

// ── scenarios ──────────────────────────────────────────────────────────────────────────
function scenarios(ctx) {
  const pick = (arr) => arr[Math.floor(Math.random() * arr.length)];
  // Reads carry no body and so no content-type, as a real client sends them.
  const read = { authorization: `Bearer ${ctx.token}` };
  const auth = { ...read, 'content-type': 'application/json' };
  const adminAuth = { authorization: `Bearer ${ctx.adminToken}` };
  const taskBody = JSON.stringify({ project_id: ctx.projectId, title: 'Benchmark task', description: 'Created by the benchmark' });
  const baselinePost = { method: 'POST', path: '/tasks', headers: { 'content-type': 'application/json' }, body: taskBody };
  const baselineList = { method: 'GET', path: '/tasks?limit=50' };
  const teamlogPost = { method: 'POST', path: '/api/v1/tasks', headers: auth, body: taskBody };
  // Each call a cursor not asked for in the last VOLUME.tasks calls, from the newest id down.
  let pagesAsked = 0;
  const anotherCursor = () => Buffer.from(JSON.stringify({ b: VOLUME.tasks + 1 - (pagesAsked++ % VOLUME.tasks) })).toString('base64url');
  // Reads first, on the seeded data alone: had they run after the writes, what they read (and
  // how much of it) would depend on how fast each server had just been inserting.
  return [
    {
      name: 'GET /tasks?limit=50',
      teamlog: { method: 'GET', path: '/api/v1/tasks?limit=50', headers: read },
      baseline: baselineList,
      bare: baselineList,
    },
    {
      // One request at a time: a lone request's latency, which batching must not lengthen.
      name: 'GET /tasks?limit=50 (1 connection)',
      connections: 1,
      teamlog: { method: 'GET', path: '/api/v1/tasks?limit=50', headers: read },
      bare: baselineList,
    },
    {
      // A page read once: each request asks for another cursor, so no copy of it is kept
      // (http/page-cache.ts) and every answer is read, presented and hashed afresh.
      name: 'GET /tasks?limit=50&cursor=… (another page each time)',
      teamlog: { method: 'GET', headers: read, setup: (r) => ({ ...r, path: `/api/v1/tasks?limit=50&cursor=${anotherCursor()}` }) },
      bare: baselineList,
    },
    { name: 'GET /tasks/:id', teamlog: { method: 'GET', headers: read, setup: (r) => ({ ...r, path: `/api/v1/tasks/${pick(ctx.taskIds)}` }) } },
    {
      name: 'GET /audit-logs?actor_id=…&limit=50',
      teamlog: { method: 'GET', headers: adminAuth, setup: (r) => ({ ...r, path: `/api/v1/audit-logs?actor_id=${pick(ctx.actorIds)}&limit=50` }) },
    },
    {
      // The same query one at a time: its latency without 50 connections queueing on 2 cores.
      name: 'GET /audit-logs?actor_id=…&limit=50 (1 connection)',
      connections: 1,
      teamlog: { method: 'GET', headers: adminAuth, setup: (r) => ({ ...r, path: `/api/v1/audit-logs?actor_id=${pick(ctx.actorIds)}&limit=50` }) },
    },
    {
      name: 'POST /tasks',
      writes: true,
      writeCost: true,
      teamlog: teamlogPost,
      baseline: baselinePost,
      bare: baselinePost,
    },
    {
      // A lone write goes at once, alone: no batch waits for company (use-cases/batch.ts).
      name: 'POST /tasks (1 connection)',
      writes: true,
      connections: 1,
      teamlog: teamlogPost,
      bare: baselinePost,
    },
    {
      name: 'PUT /tasks/:id/status',
      writes: true,
      writeCost: true,
      teamlog: {
        method: 'PUT',
        headers: auth,
        // TODO ⇄ IN_PROGRESS are both allowed, and the same status again is a 200 no-op.
        setup: (r) => ({ ...r, path: `/api/v1/tasks/${pick(ctx.taskIds)}/status`, body: JSON.stringify({ status: Math.random() < 0.5 ? 'TODO' : 'IN_PROGRESS' }) }),
      },
      // Issue 39 compares an audited status change with the bare app's creation.
      bare: baselinePost,
    },
    {
      name: 'POST /auth/login',
      apart: 'its cost is the scrypt hash, by design',
      // Many users behind a trusted proxy, each from their own address, as production sees
      // them: one address or one account hammered in parallel is what the throttle stops.
      teamlog: {
        method: 'POST',
        path: '/api/v1/auth/login',
        setup: (r) => {
          const n = 1 + Math.floor(Math.random() * 1000);
          return {
            ...r,
            headers: { 'content-type': 'application/json', 'x-forwarded-for': `10.${n >> 8}.${n & 255}.${1 + Math.floor(Math.random() * 250)}` },
            body: JSON.stringify({ email: `bench${n}@bench.local`, password: PASSWORD }),
          };
        },
      },
    },
  ];
}

/** CPU time from now on of a server process and of its database's PostgreSQL processes. */
const cpuMeter = (pid, database = DB_NAME) => meterCpu(pid, database);

/**
 * One autocannon run against a server, with the CPU time per request that the server process
 * and PostgreSQL spent meanwhile: this VM's requests per second drift from minute to minute,
 * CPU per request far less, so it tells what a change costs where throughput cannot.
 */
async function measure(server, spec, duration, connections = CONNECTIONS) {
  const request = { method: spec.method, path: spec.path ?? '/', headers: spec.headers, body: spec.body };
  if (spec.setup) request.setupRequest = spec.setup;
  const opts = { url: `http://127.0.0.1:${server.port}`, connections, duration, requests: [request] };
  const cpu = cpuMeter(server.child.pid, server.db?.name);
  const machine = machineMeter();
  const loadgen = process.cpuUsage();
  const result = await autocannon(opts);
  const used = cpu.since();
  const loadgenUsed = process.cpuUsage(loadgen);
  const busy = machine.busy();
  const total = result.requests.total;
  const perRequest = (micros) => (total > 0 ? Math.round(micros / total) : null);
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    total,
    // Sent includes the requests in flight when the run stopped, which the server still completes.
    sent: result.requests.sent,
    cpu_us_per_request: { server: perRequest(used.server), server_main_thread: perRequest(used.main), server_threads: used.threads.map(([t, c]) => [t, perRequest(c)]), db: perRequest(used.db), load_generator: perRequest(loadgenUsed.user + loadgenUsed.system) },
    // The share of both cores busy meanwhile (all processes): below 1, the run was not CPU-bound.
    machine_busy: busy,
  };
}

/**
 * Brings the server-mode databases to rest before a measured run: the rows the previous runs
 * inserted are vacuumed and analyzed and their dirty pages flushed now, so an autovacuum or a
 * checkpoint they set off does not land in the next run and decide its figures (the list
 * scenario ran after 100,000 fresh tasks and paid for their vacuum). Every database, whichever
 * server runs next: an autovacuum of one takes the CPU of a run on the other. PGlite has no
 * autovacuum or background checkpointer, and its database is inside the server: no databases,
 * no-op.
 */
function settler(databases) {
  if (!databases.length) return async () => {};
  return async () => {
    // Every table, not only those the writes grow: this machine runs PostgreSQL with autovacuum
    // off (as CI does), so a table nobody analyzes keeps the statistics of the seed. The logins
    // grew sessions from none to hundreds, and each write's caller check then read all of them
    // (a sequential scan planned for an empty table) on the benchmark's database but not on the
    // sealing pairs' copy, which is analyzed whole: sealing on ÷ off measured 0.59× for it.
    for (const { url } of databases) await withClient(url, (c) => c.query('VACUUM (ANALYZE)'));
    await withClient(databases[0].url, (c) => c.query('CHECKPOINT'));
  };
}

/**
 * One measured run of a scenario on a server: the settle, a warm-up, then the run. A write
 * scenario on a server-mode database also gets its write cost over the measured run alone
 * (the counters are read at rest on either side of it: bench/write-cost.mjs).
 */
async function measuredRun(server, spec, sc, { settle, inspectUrl }) {
  await settle();
  await measure(server, spec, WARMUP, sc.connections);
  if (!sc.writeCost || !server.db) return measure(server, spec, DURATION, sc.connections);
  const before = await writeCounters(server.db.url);
  const run = await measure(server, spec, DURATION, sc.connections);
  const after = await writeCounters(server.db.url);
  return { ...run, write_cost: await writeCost(server.db.url, before, after, run.sent, inspectUrl) };
}

/** The baselines a scenario may name (its specs of the same keys), in the order they run around Teamlog in a round. */
const BASELINES = [
  { key: 'baseline', label: 'same-schema baseline' },
  { key: 'bare', label: 'bare app' },
];

/**
 * Paired rounds: in each, one Teamlog run and one run of each baseline in `keys`, Teamlog in
 * the middle and the order reversed every other round (B1, T, B2 then B2, T, B1), so that each
 * baseline's run is back to back with Teamlog's, before it in one round and after it in the
 * next: a pair's ratio compares the two servers on the machine as it was at that moment.
 * Answers, for each baseline, the pair whose ratio is the median, with every round's ratio.
 */
async function pairedRounds(keys, run) {
  const rounds = [];
  for (let round = 0; round < ROUNDS; round++) {
    const order = [keys[0], 'teamlog', ...keys.slice(1)];
    const runs = {};
    for (const key of round % 2 === 0 ? order : order.reverse()) runs[key] = await run(key);
    rounds.push(runs);
  }
  return Object.fromEntries(keys.map((key) => [key, medianPair(rounds.map((r) => ({ teamlog: r.teamlog, other: r[key], ratio: r.teamlog.rps / r[key].rps })))]));
}

/** The pair with the median ratio (its figures give its ratio), and every pair's ratio in round order. */
function medianPair(pairs) {
  const median = [...pairs].sort((x, y) => x.ratio - y.ratio)[Math.floor(pairs.length / 2)];
  return { ...median, round_ratios: pairs.map((p) => Number(p.ratio.toFixed(3))) };
}

/**
 * A scenario's row: Teamlog's figures are those of its median pair against the same-schema
 * baseline (or its only run); `bare` holds the median pair against the bare app, which may be
 * another round's.
 */
function scenarioRow(label, sc, pairs, alone, rss) {
  const same = pairs.baseline;
  const bare = pairs.bare;
  return {
    mode: label,
    scenario: sc.name,
    teamlog: same?.teamlog ?? bare?.teamlog ?? alone,
    baseline: same?.other ?? null,
    ratio: same?.ratio ?? null,
    ...(same ? { round_ratios: same.round_ratios } : {}),
    bare: bare ? { teamlog: bare.teamlog, bare: bare.other, ratio: bare.ratio, round_ratios: bare.round_ratios } : null,
    peak_rss_mb: Math.round(rss / 1048576),
    apart: sc.apart ?? null,
  };
}

function logRow(row) {
  const { teamlog: t, baseline: b, bare } = row;
  const versus = (name, m, ratio, rounds) => ` | ${name} ${m.rps.toFixed(0)} req/s (×${ratio.toFixed(2)}; rounds ${rounds.join(', ')})`;
  log(`${row.mode} ${row.scenario}: ${t.rps.toFixed(0)} req/s p99 ${t.p99} ms${b ? versus('baseline', b, row.ratio, row.round_ratios) : ''}${bare ? versus('bare app', bare.bare, bare.ratio, bare.round_ratios) : ''} | non-2xx ${t.non2xx} | RSS ${row.peak_rss_mb} MB`);
  for (const [name, m] of [['Teamlog', t], ['same-schema baseline', b], ['bare app', bare?.bare]]) {
    if (m?.write_cost) log(`  write cost per request, ${name}: ${writeCostText(m.write_cost)}`);
  }
}

/** servers: { teamlog, baseline?, bare? }; options: { settle, inspectUrl } (see measuredRun). */
async function runScenarios(label, servers, ctx, options) {
  const { teamlog } = servers;
  const baselinesOf = (sc) => BASELINES.map((b) => b.key).filter((key) => servers[key] && sc[key]);
  const rows = [];
  // A freshly started server compiles its hot paths and opens its connections during its
  // first seconds; the read scenarios get that time first (--quick too: without it the first
  // scenario measured a cold server at half speed). Not the writes: their rows would be what
  // the reads then list. Each run still has a warm-up of its own.
  for (const sc of scenarios(ctx).filter((x) => (!ONLY || x.name === ONLY) && !x.apart && !x.writes)) {
    await measure(teamlog, sc.teamlog, WARMUP, sc.connections);
    for (const key of baselinesOf(sc)) await measure(servers[key], sc[key], WARMUP);
  }
  for (const sc of scenarios(ctx).filter((x) => !ONLY || x.name === ONLY)) {
    const sampler = rssSampler({ teamlog: teamlog.child.pid });
    const run = (key) => measuredRun(servers[key], sc[key], sc, options);
    const keys = baselinesOf(sc);
    const pairs = keys.length ? await pairedRounds(keys, run) : {};
    const alone = keys.length ? undefined : await run('teamlog');
    const row = scenarioRow(label, sc, pairs, alone, sampler.stop().teamlog * 1024);
    rows.push(row);
    logRow(row);
  }
  return rows;
}

/**
 * PostgreSQL's own timing of the application's audit query (queryAuditLog, the code the
 * route runs) on the seeded million records, for 20 actors.
 */
async function explainAuditQuery(actorIds) {
  const { queryAuditLog } = await import(path.join(ROOT, 'dist/modules/audit/audit.repository.js'));
  const c = new pg.Client({ connectionString: dbUrl(DB_NAME) });
  await c.connect();
  const times = [];
  try {
    for (const actor of actorIds.slice(0, 20)) {
      const plan = await queryAuditLog({ query: async (sql, params) => (await c.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`, params)).rows }, { actor_id: actor }, undefined, 50);
      times.push(plan[0]['QUERY PLAN'][0]['Execution Time']);
    }
  } finally {
    await c.end();
  }
  times.sort((a, b) => a - b);
  return { median: times[Math.floor(times.length / 2)], max: times[times.length - 1], runs: times.length };
}

/**
 * Audit search (bench/search.mjs): seeds its database, starts Teamlog from dist/ on it with
 * sealing off (the queries read; sealing the seed would run beside them), and measures each
 * single-key query over HTTP at one connection, then PostgreSQL's own time for it.
 */
async function searchBench(serverEnv) {
  const url = dbUrl(SEARCH_DB_NAME);
  const { migratePostgres } = await import(path.join(ROOT, 'dist/db/migrate.js'));
  log(`audit search: seeding ${SEARCH.records.toLocaleString('en')} records over a year…`);
  await seedSearchDatabase(url, SEARCH.records, migratePostgres, log);
  const qs = await searchQueries(url);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-bench-search-'));
  let child;
  try {
    child = await startServer('teamlog', path.join(ROOT, 'dist/server.js'), { ...serverEnv, DATABASE_URL: url, DATA_DIR: dataDir, AUDIT_SEALING: 'off' }, 3405);
    const base = 'http://127.0.0.1:3405';
    log(`audit search: ${qs.length} queries, ${SEARCH.runs} requests each at one connection…`);
    const rows = await measureSearch(base, await login(base, ADMIN.email, ADMIN.password), qs, SEARCH.runs);
    const explained = await explainSearch(url, qs, path.join(ROOT, 'dist'), 'js');
    log('audit search: the activity counts (GET /audit-logs/stats)…');
    const stats = await measureStats(base, await login(base, ADMIN.email, ADMIN.password), url, Math.min(SEARCH.runs, 50));
    return { records: SEARCH.records, runs: SEARCH.runs, rows: rows.map((r) => ({ ...r, ...explained.get(r.q) })), table: searchTable(rows, explained), stats, statsTable: statsTable(stats) };
  } finally {
    await stop(child);
    rmSync(dataDir, { recursive: true, force: true });
    await dropDatabases(SEARCH_DB_NAME);
  }
}

const searchTarget = () => `each single-key q= query p99 < 10 ms (${SEARCH.records.toLocaleString('en')} records, 1 connection)`;
const statsTarget = () => `GET /audit-logs/stats of a 30-day window, p50 < 50 ms (${SEARCH.records.toLocaleString('en')} records over a year, 1 connection)`;
/** The console's opening window: the last 30 days, a bar a day (measureStats's first row). */
const statsP50 = (search) => search?.stats?.[0]?.p50 ?? null;

function searchMarkdown(search) {
  return [
    `### Audit search (\`q=\`, ${search.records.toLocaleString('en')} records over a year, ${search.runs} requests a query at one connection)`,
    '',
    'HTTP p50 and p99 of `GET /api/v1/audit-logs?limit=20&q=…` (first page), one request at a time; PostgreSQL\'s own time is the sum over the statements the route runs for the query (the id ceiling\'s lookups, then the list: docs/audit-search.md), EXPLAIN ANALYZE, median of five.',
    '',
    search.table,
    '',
    `Activity counts (\`GET /api/v1/audit-logs/stats\`, the console's chart and top lists), ${Math.min(search.runs, 50)} requests a window at one connection; the windows end at the seed's newest record.`,
    '',
    search.statsTable,
    '',
  ].join('\n');
}

// ── report ─────────────────────────────────────────────────────────────────────────────
const num = (n) => (n === undefined || n === null ? '—' : typeof n === 'number' ? (Number.isInteger(n) ? String(n) : n.toFixed(1)) : n);
const times = (ratio) => (ratio ? `${ratio.toFixed(2)}×` : '—');

function table(rows) {
  const figures = (m) => (m ? `${num(Math.round(m.rps))} | ${num(m.p50)} | ${num(m.p99)}` : '— | — | —');
  const lines = [
    '| scenario | Teamlog req/s | p50 ms | p99 ms | same-schema baseline req/s | p50 ms | p99 ms | ratio vs same-schema baseline | bare app req/s | p50 ms | p99 ms | ratio vs bare app | non-2xx | peak RSS MB |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    lines.push(`| ${r.scenario}${r.apart ? ' ¹' : ''} | ${figures(r.teamlog)} | ${figures(r.baseline)} | ${times(r.ratio)} | ${figures(r.bare?.bare)} | ${times(r.bare?.ratio)} | ${r.teamlog.non2xx} | ${r.peak_rss_mb} |`);
  }
  return lines.join('\n');
}

/** CPU per request (Node server process, PostgreSQL processes) for the rows of one mode, against each baseline in its median pair. */
function cpuTable(rows) {
  const cpu = (m) => m?.cpu_us_per_request ?? null;
  const sum = (c) => (c && c.server !== null && c.db !== null ? c.server + c.db : null);
  const ratio = (t, b) => (sum(cpu(t)) && sum(cpu(b)) ? `${(sum(cpu(t)) / sum(cpu(b))).toFixed(2)}×` : '—');
  const rounds = (r) =>
    [r.round_ratios && `same-schema ${r.round_ratios.map((x) => x.toFixed(2)).join(', ')}`, r.bare && `bare ${r.bare.round_ratios.map((x) => x.toFixed(2)).join(', ')}`].filter(Boolean).join('; ') || '—';
  const lines = [
    '| scenario | Teamlog server µs | Teamlog PostgreSQL µs | same-schema baseline server µs | PostgreSQL µs | CPU per request, Teamlog ÷ same-schema baseline | bare app server µs | PostgreSQL µs | CPU per request, Teamlog ÷ bare app | ratio of each pair (req/s) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const r of rows) {
    const t = cpu(r.teamlog);
    const b = cpu(r.baseline);
    const bare = cpu(r.bare?.bare);
    lines.push(`| ${r.scenario} | ${t?.server ?? '—'} | ${t?.db ?? '—'} | ${b?.server ?? '—'} | ${b?.db ?? '—'} | ${ratio(r.teamlog, r.baseline)} | ${bare?.server ?? '—'} | ${bare?.db ?? '—'} | ${ratio(r.bare?.teamlog, r.bare?.bare)} | ${rounds(r)} |`);
  }
  return lines.join('\n');
}

/** The main thread's and the load generator's CPU per request, and how busy the machine was, for Teamlog's and the bare app's runs. */
function coresTable(rows) {
  const lines = [
    '| scenario | Teamlog main thread µs | load generator µs | both cores busy | bare app server µs | load generator µs | both cores busy |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  const busy = (m) => (typeof m?.machine_busy === 'number' ? `${Math.round(m.machine_busy * 100)}%` : '—');
  for (const r of rows) {
    const t = r.teamlog?.cpu_us_per_request;
    const b = r.bare?.bare?.cpu_us_per_request;
    lines.push(`| ${r.scenario} | ${t?.server_main_thread ?? '—'} | ${t?.load_generator ?? '—'} | ${busy(r.teamlog)} | ${b?.server ?? '—'} | ${b?.load_generator ?? '—'} | ${busy(r.bare?.bare)} |`);
  }
  return lines.join('\n');
}

/** What a request writes, for each server of each write scenario (their median pairs' runs). */
function writeCostTable(rows) {
  const lines = [
    '| scenario | server | WAL bytes | heap inserts | heap updates (HOT) | index entries (est.) |',
    '| --- | --- | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    for (const [server, m] of [['Teamlog', r.teamlog], ['same-schema baseline', r.baseline], ['bare app', r.bare?.bare]]) {
      const w = m?.write_cost;
      if (w) lines.push(`| ${r.scenario} | ${server} | ${num(w.wal_bytes)} | ${w.heap_inserts} | ${w.heap_updates} (${w.hot_updates}) | ${w.index_entries_est} |`);
    }
  }
  return lines.join('\n');
}

/**
 * Where each write scenario's WAL goes, relation by relation, Teamlog beside its baselines (the
 * median pairs' runs): what Teamlog writes that the baseline does not, and what both write.
 */
function walByRelationTables(rows) {
  const out = [];
  for (const r of rows) {
    const servers = [['Teamlog', r.teamlog], ['same-schema baseline', r.baseline], ['bare app', r.bare?.bare]].filter(([, m]) => m?.write_cost?.wal_bytes_by_relation);
    if (servers.length === 0) continue;
    const of = (m, name) => m.write_cost.wal_bytes_by_relation[name] ?? 0;
    const names = [...new Set(servers.flatMap(([, m]) => Object.keys(m.write_cost.wal_bytes_by_relation)))]
      .sort((a, b) => of(servers[0][1], b) - of(servers[0][1], a) || a.localeCompare(b));
    // The relations that make up most of it; the rest on one line.
    const shown = names.filter((name) => servers.some(([, m]) => of(m, name) >= 10));
    const rest = names.filter((name) => !shown.includes(name));
    out.push(`**${r.scenario}**, WAL bytes per request:`, '', `| relation or record | ${servers.map(([s]) => s).join(' | ')} |`, `| --- |${servers.map(() => ' ---: |').join('')}`);
    for (const name of shown) out.push(`| ${name} | ${servers.map(([, m]) => of(m, name)).join(' | ')} |`);
    if (rest.length > 0) out.push(`| ${rest.length} others | ${servers.map(([, m]) => rest.reduce((acc, name) => acc + of(m, name), 0)).join(' | ')} |`);
    out.push('');
  }
  return out.join('\n');
}

function writeCostNotes(rows) {
  const costs = rows.flatMap((r) => [r.teamlog, r.baseline, r.bare?.bare]).map((m) => m?.write_cost).filter(Boolean);
  const others = costs.map((w) => w.wal_bytes_other_databases);
  const wal = others.includes(null)
    ? 'the WAL position is the whole cluster\'s, and here other databases\' WAL could not be told apart (pg_walinspect missing or unreadable): whatever else the server ran is in these figures'
    : `the WAL position is the whole cluster's, so the WAL records of other databases written meanwhile (tests on the same server) were read back with pg_walinspect and left out (${Math.max(...others) > 0 ? `at most ${Math.max(...others)} B a request here` : 'none here'}): a record counts for the database in its block references, or else for its transaction's`;
  return [
    `Per request of each row's measured run (not its warm-up), server mode: per request the server completed, those in flight when the run stopped included. WAL: \`pg_wal_lsn_diff\` of \`pg_current_wal_lsn()\` after and before the run, divided by the requests; ${wal}. It includes the background work the requests caused in that time, the sealer's and the relay's batches and the signed checkpoints: the honest cost of a request. Heap inserts and updates (HOT ones in brackets): the deltas of \`n_tup_ins\`, \`n_tup_upd\`, \`n_tup_hot_upd\` summed over \`pg_stat_user_tables\` of the server's database. Index entries (est.): for each table, (inserts + updates − HOT updates) × its number of indexes (\`pg_index\`), summed: a HOT update adds no index entry, any other new tuple one per index. Both readings are taken at rest, 11 s after the warm-up and after the run: a backend that goes idle within a second of its last report keeps its counters for 10 s (read after 1.5 s, they missed a sixth of a run's inserts), and the sealer and the relay have caught up by then.`,
    '',
    'The same-schema baseline shares Teamlog\'s database, where Teamlog, idle meanwhile, seals every audit record: its figures include the sealing of its own records (the sealer\'s batch rows and tiles; the JSON lines have each table\'s counts). The bare app has a database of its own.',
  ].join('\n');
}

/**
 * The issue's targets, judged on the server-mode rows. The audit p99 is the single-connection
 * run's: at 50 connections on two cores a p99 measures the queue, not the query.
 */
function evaluateTargets(results, explain, search, scanImpact) {
  const pgRows = results.filter((r) => r.mode === 'postgres');
  const row = (name) => pgRows.find((r) => r.scenario === name);
  const ratio = (name) => row(name)?.ratio ?? null;
  const postWal = row('POST /tasks')?.teamlog.write_cost?.wal_bytes;
  const auditOne = row('GET /audit-logs?actor_id=…&limit=50 (1 connection)');
  const peakRss = pgRows.length ? Math.max(...pgRows.map((r) => r.peak_rss_mb)) : null;
  const t = (target, value, met, unit = '') => ({ target, value, unit, met: value === null ? null : met(value) });
  const bareRatio = (name) => row(name)?.bare?.ratio ?? null;
  // A lone request (1 connection): Teamlog's p50 and p99 against the bare app's, in ms.
  const loneGap = (name, p) => {
    const r = row(name);
    return r?.bare ? r.bare.teamlog[p] - r.bare.bare[p] : null;
  };
  // p99 at 50 connections: Teamlog's ÷ the bare app's.
  const p99Ratio = (name) => {
    const r = row(name);
    return r?.bare ? r.bare.teamlog.p99 / r.bare.bare.p99 : null;
  };
  return [
    // Issue 39: the bare app is the reference.
    t('POST /tasks ≥ 1.5× the bare app', bareRatio('POST /tasks'), (v) => v >= 1.5, '×'),
    t('PUT /tasks/:id/status ≥ 1.2× the bare app\'s POST', bareRatio('PUT /tasks/:id/status'), (v) => v >= 1.2, '×'),
    t('GET /tasks?limit=50 ≥ 1.5× the bare app', bareRatio('GET /tasks?limit=50'), (v) => v >= 1.5, '×'),
    t('a lone POST /tasks (1 connection): p50 ≤ the bare app\'s + 1 ms', loneGap('POST /tasks (1 connection)', 'p50'), (v) => v <= 1, ' ms above'),
    t('a lone POST /tasks (1 connection): p99 ≤ the bare app\'s + 1 ms', loneGap('POST /tasks (1 connection)', 'p99'), (v) => v <= 1, ' ms above'),
    t('a lone GET /tasks?limit=50 (1 connection): p50 ≤ the bare app\'s + 1 ms', loneGap('GET /tasks?limit=50 (1 connection)', 'p50'), (v) => v <= 1, ' ms above'),
    t('a lone GET /tasks?limit=50 (1 connection): p99 ≤ the bare app\'s + 1 ms', loneGap('GET /tasks?limit=50 (1 connection)', 'p99'), (v) => v <= 1, ' ms above'),
    t('POST /tasks p99 at 50 connections ≤ the bare app\'s', p99Ratio('POST /tasks'), (v) => v <= 1, '× the bare app\'s'),
    t('GET /tasks?limit=50 p99 at 50 connections ≤ the bare app\'s', p99Ratio('GET /tasks?limit=50'), (v) => v <= 1, '× the bare app\'s'),
    // KB of 1,024 bytes.
    t('WAL per POST /tasks ≤ 2.3 KB', postWal === undefined ? null : postWal / 1024, (v) => v <= 2.3, ' KB'),
    t('POST /tasks ÷ the same-schema baseline (reported)', ratio('POST /tasks'), () => null, '×'),
    t(`audit query p99 < 10 ms (${VOLUME.audit.toLocaleString('en')} records, 1 connection)`, auditOne?.teamlog.p99 ?? null, (v) => v < 10, ' ms'),
    t('audit query in PostgreSQL (EXPLAIN ANALYZE, max of 20 actors) < 10 ms', explain.max, (v) => v < 10, ' ms'),
    t('server RSS < 300 MB throughout (server mode, every scenario)', peakRss, (v) => v < 300, ' MB'),
    t(searchTarget(), search ? worstSearchP99(search.rows) : null, (v) => v < 10, ' ms'),
    t(statsTarget(), statsP50(search), (v) => v < 50, ' ms'),
    t('GET /tasks?limit=50 p50 while two audit verifications run < 2× its idle p50 (server mode)', scanImpact?.ratio_two_p50 ?? null, (v) => v < 2, '×'),
  ];
}

function targetTable(targets) {
  // Ratios to three places: a 0.797× rounded to "0.80×" beside "no" reads as a contradiction.
  const f = (v, unit) => (v === null ? '—' : `${Number.isInteger(v) ? v : v.toFixed(unit === '×' ? 3 : 2)}${unit}`);
  return [
    '| target | measured | met |',
    '| --- | ---: | :---: |',
    ...targets.map((x) => `| ${x.target} | ${f(x.value, x.unit)} | ${x.met === null ? '—' : x.met ? 'yes' : '**no**'} |`),
  ].join('\n');
}

async function main() {
  log('building…');
  execSync('npm run build', { cwd: ROOT, stdio: 'ignore' });
  const { hashPassword, DEFAULT_PASSWORD_HASH_COST } = await import(path.join(ROOT, 'dist/modules/auth/auth.passwords.js'));
  const passwordHash = await hashPassword(PASSWORD, DEFAULT_PASSWORD_HASH_COST);
  const results = [];
  let sealingAtStart;
  let evidence;
  let scanImpact;
  // MALLOC_ENV: the production settings the README recommends on glibc (lib.mjs says why).
  // RATE_LIMIT_PER_MINUTE: high enough that the general limit never refuses the load, so that
  // its counting is measured with the rest while every answer is the route's own.
  // AUDIT_SIGNING_KEY: every instance the benchmark starts on a database signs with one key.
  const { generateEd25519PrivateKeyPem } = await import(path.join(ROOT, 'dist/tlog/signed-note.js'));
  const serverEnv = {
    JWT_SECRET, ADMIN_EMAIL: ADMIN.email, ADMIN_PASSWORD: ADMIN.password, LOG_LEVEL: 'warn', TRUST_PROXY: '127.0.0.1/32', ...MALLOC_ENV,
    RATE_LIMIT_PER_MINUTE: '10000000', AUDIT_SIGNING_KEY: generateEd25519PrivateKeyPem(),
    // The benchmark logs in once and works for longer than the default 15 minutes of a token.
    ACCESS_TOKEN_TTL: '14400',
  };

  if (ONLY === 'search') return searchOnly(serverEnv);

  log(`seeding PostgreSQL: ${VOLUME.users} users, ${VOLUME.tasks} tasks, ${VOLUME.audit} audit records…`);
  const t0 = Date.now();
  const ctxPg = await seedPostgres(VOLUME, passwordHash);
  log(`seeded in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  await createBareDatabase();
  // The write cost reads other databases' WAL back through the benchmark database (bench/write-cost.mjs).
  const inspectUrl = (await installWalInspect(dbUrl(DB_NAME), log)) ? dbUrl(DB_NAME) : undefined;
  const teamlogDb = { name: DB_NAME, url: dbUrl(DB_NAME) };
  const bareDb = { name: BARE_DB_NAME, url: dbUrl(BARE_DB_NAME) };
  const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-bench-'));
  let teamlog, baseline, bare;
  try {
    teamlog = { port: 3401, db: teamlogDb, child: await startServer('teamlog', path.join(ROOT, 'dist/server.js'), { ...serverEnv, DATABASE_URL: teamlogDb.url, DATA_DIR: dataDir }, 3401) };
    baseline = { port: 3402, db: teamlogDb, child: await startServer('baseline', path.join(ROOT, 'bench/baseline/server.mjs'), { DATABASE_URL: teamlogDb.url, BENCH_USER_ID: String(ctxPg.bench) }, 3402) };
    bare = { port: 3404, db: bareDb, child: await startServer('bare', path.join(ROOT, 'bench/baseline/bare.mjs'), { DATABASE_URL: bareDb.url, BENCH_USER_ID: String(ctxPg.bench) }, 3404) };
    const base = `http://127.0.0.1:${teamlog.port}`;
    // The seeded records were written behind the service's back: it seals them first, and the
    // scenarios start once it has (what that takes is a figure of its own).
    log(`sealing the ${VOLUME.audit.toLocaleString('en')} seeded audit records…`);
    sealingAtStart = await waitSealed(dbUrl(DB_NAME), log);
    log(`sealed ${sealingAtStart.records.toLocaleString('en')} records in ${sealingAtStart.seconds.toFixed(1)} s (${sealingAtStart.per_second.toLocaleString('en')}/s)`);
    const ctx = { ...ctxPg, token: await login(base, 'bench1@bench.local', PASSWORD), adminToken: await login(base, ADMIN.email, ADMIN.password) };
    results.push(...(await runScenarios('postgres', { teamlog, baseline, bare }, ctx, { settle: settler([teamlogDb, bareDb]), inspectUrl })));
    if (!ONLY || ONLY === 'scan impact') {
      scanImpact = await scanImpactBench({ baseUrl: base, userToken: ctx.token, adminToken: ctx.adminToken, log, ...SCAN_IMPACT });
    }
    if (!ONLY || ONLY === 'audit evidence') {
      await stop(teamlog.child);
      await stop(baseline.child);
      await stop(bare.child);
      const startTeamlog = async (env, port, database = DB_NAME) => ({
        port,
        db: { name: database },
        child: await startServer('teamlog', path.join(ROOT, 'dist/server.js'), { ...serverEnv, DATABASE_URL: dbUrl(database), DATA_DIR: dataDir, ...env }, port),
      });
      evidence = await auditEvidenceBench({
        root: ROOT, url: dbUrl(DB_NAME), dataDir, serverEnv, startTeamlog, stop, measure, settle: settler([teamlogDb]), rssSampler, cpuMeter, log,
        twinDatabase,
        token: ctx.token, adminToken: ctx.adminToken, projectId: ctx.projectId, rounds: SEALING_PAIRS, sealingRunSeconds: SEALING_RUN_SECONDS,
        evidenceRuns: EVIDENCE_RUNS, duration: DURATION, warmup: WARMUP, tmp: dataDir,
      });
    }
  } finally {
    await stop(teamlog?.child);
    await stop(baseline?.child);
    await stop(bare?.child);
    rmSync(dataDir, { recursive: true, force: true });
  }
  const explain = await explainAuditQuery(ctxPg.actorIds);
  log(`EXPLAIN ANALYZE of the audit query: median ${explain.median.toFixed(2)} ms, max ${explain.max.toFixed(2)} ms (${explain.runs} actors)`);
  const search = ONLY ? undefined : await searchBench(serverEnv);

  if (EMBEDDED) {
    const dir = mkdtempSync(path.join(tmpdir(), 'teamlog-bench-pglite-'));
    try {
      log(`seeding PGlite: ${EMBEDDED_VOLUME.tasks} tasks, ${EMBEDDED_VOLUME.audit} audit records…`);
      const ctxLite = await seedPglite(dir, EMBEDDED_VOLUME, passwordHash);
      teamlog = { port: 3403, child: await startServer('teamlog', path.join(ROOT, 'dist/server.js'), { ...serverEnv, DATA_DIR: dir }, 3403) };
      const base = `http://127.0.0.1:${teamlog.port}`;
      const ctx = { ...ctxLite, token: await login(base, 'bench1@bench.local', PASSWORD), adminToken: await login(base, ADMIN.email, ADMIN.password) };
      log('PGlite: sealing the seeded audit records…');
      await waitSealedHttp(base, ctx.adminToken, EMBEDDED_VOLUME.audit, log);
      results.push(...(await runScenarios('pglite', { teamlog }, ctx, { settle: settler([]) })));
    } finally {
      await stop(teamlog?.child);
      rmSync(dir, { recursive: true, force: true });
    }
  }

  await dropDatabases(DB_NAME, BARE_DB_NAME, TWIN_DB_NAME);

  const targets = evaluateTargets(results, explain, search, scanImpact);
  const machine = machineLine();
  const pgRows = results.filter((r) => r.mode === 'postgres');
  const liteRows = results.filter((r) => r.mode === 'pglite');
  const md = [
    `# Benchmark results${QUICK ? ' (quick)' : ''}`,
    '',
    `Machine: ${machine}. autocannon, ${CONNECTIONS} connections, ${DURATION} s per run after a ${WARMUP} s warm-up, load generator on the same machine. Scenarios with a baseline run ${ROUNDS} round${ROUNDS > 1 ? 's' : ''}, each a Teamlog run between runs of its baselines${ROUNDS > 1 ? " (the order reversed every other round, so each baseline runs back to back with Teamlog, before it and after it in turn); each ratio is the median pair's, and Teamlog's figures in a row are those of its median pair against the same-schema baseline" : ''}.`,
    `Teamlog runs \`node dist/server.js\` (LOG_LEVEL=warn, MALLOC_ARENA_MAX=2 and MALLOC_MMAP_THRESHOLD_=131072 as the README recommends, RATE_LIMIT_PER_MINUTE=10000000: the limit counts every request and refuses none). The same-schema baseline is \`bench/baseline/server.mjs\` (bare Fastify + pg on Teamlog's database, same SQL, no auth/validation/audit hooks); the bare app (\`POST /tasks\` only) is \`bench/baseline/bare.mjs\`, the same handler on a database of its own with only \`tasks\` and \`audit_log\`, primary keys and no other index, trigger or constraint.`,
    '',
    `## Server mode: PostgreSQL (${VOLUME.users} users, ${VOLUME.tasks.toLocaleString('en')} tasks, ${VOLUME.audit.toLocaleString('en')} audit records)`,
    '',
    table(pgRows),
    '',
    '### CPU per request',
    '',
    'CPU time spent during each row\'s measured run by the server process and by the PostgreSQL processes, per request (the load generator is not counted). It moves far less with the VM\'s drift than requests per second do.',
    '',
    cpuTable(pgRows),
    '',
    'Where the two cores went in the same runs: the Teamlog server\'s main thread (its event loop, which every request passes; the rest of the process is its worker threads: the audit sealer\'s on PostgreSQL, the scans\', the garbage collector\'s helpers), the load generator (autocannon, in the benchmark\'s own process), and the share of both cores busy with anything meanwhile. Below 100%, a run was not bound by the CPU but by waits (round trips, commits).',
    '',
    coresTable(pgRows),
    '',
    '### Write cost per request (server mode)',
    '',
    writeCostTable(pgRows),
    '',
    writeCostNotes(pgRows),
    '',
    'By relation (pg_walinspect: the records of the run in the server\'s database, by the relation their block belongs to, or, with no block, by their kind: a commit, a multixact, a row lock\'s is its table\'s):',
    '',
    walByRelationTables(pgRows),
    '### Targets',
    '',
    targetTable(targets),
    '',
    `The audit query itself (EXPLAIN ANALYZE of the route's SQL, 20 actors, ${VOLUME.audit.toLocaleString('en')} records): median ${explain.median.toFixed(2)} ms, max ${explain.max.toFixed(2)} ms.`,
    '',
    ...(search ? [searchMarkdown(search)] : []),
    ...(scanImpact ? [scanImpact.markdown] : []),
    ...(evidence ? [auditEvidenceMarkdown(evidence, sealingAtStart)] : []),
    ...(liteRows.length
      ? [`## Embedded mode: PGlite (${EMBEDDED_VOLUME.tasks.toLocaleString('en')} tasks, ${EMBEDDED_VOLUME.audit.toLocaleString('en')} audit records)`, '', table(liteRows), '']
      : []),
    '¹ Reported apart: its cost is the password hash (scrypt), by design.',
    '',
  ].join('\n');
  const outDir = path.join(ROOT, 'bench/results');
  writeFileSync(path.join(outDir, QUICK ? 'quick.md' : 'latest.md'), md);
  writeFileSync(path.join(outDir, QUICK ? 'quick.jsonl' : 'latest.jsonl'), [...results, ...(evidence ? [{ audit_evidence: { ...evidence, sealing_at_start: sealingAtStart } }] : []), ...(search ? [{ audit_search: search.rows }] : []), ...(scanImpact ? [{ scan_impact: { ...scanImpact, markdown: undefined } }] : []), { targets }].map((r) => JSON.stringify(r)).join('\n') + '\n');
  process.stdout.write(`${md}\n`);
  for (const r of results) process.stdout.write(`${JSON.stringify(r)}\n`);
  process.stdout.write(`${JSON.stringify({ targets })}\n`);
}

/** The machine a report was measured on, as its first line names it. */
const machineLine = () => `${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${execSync('psql --version').toString().trim()}`;

/** `--only search`: the search part alone, in a report of its own (search, or search-quick with --quick), not over latest.md. */
async function searchOnly(serverEnv) {
  const search = await searchBench(serverEnv);
  const p99 = worstSearchP99(search.rows);
  const machine = machineLine();
  const md = [
    `# Benchmark results: audit search only${QUICK ? ' (quick)' : ''}`,
    '',
    `Machine: ${machine}. \`npm run bench -- --only search${QUICK ? ' --quick' : ''}\`; the full run has the same section in latest.md.`,
    '',
    searchMarkdown(search),
    targetTable([{ target: searchTarget(), value: p99, unit: ' ms', met: p99 < 10 }, { target: statsTarget(), value: statsP50(search), unit: ' ms', met: statsP50(search) < 50 }]),
    '',
  ].join('\n');
  writeFileSync(path.join(ROOT, 'bench/results', QUICK ? 'search-quick.md' : 'search.md'), md);
  process.stdout.write(`${md}\n`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
