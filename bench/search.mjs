// Audit search (GET /audit-logs?q=, docs/audit-search.md): p50 and p99 of each single-key
// query at one connection, on a database of a million records, and PostgreSQL's own execution
// time (EXPLAIN ANALYZE of the statements the route runs). `npm run bench` runs it too (bench/run.mjs,
// `--only search` for this part alone), from dist/ on a database of its own.
//
//   node --import tsx bench/search.mjs --seed            seed DATABASE_URL (created, or dropped
//                                                        and made again), then measure
//   node --import tsx bench/search.mjs                   measure an already seeded DATABASE_URL
//   options: --records N (1000000) --runs N (200) --url http://host:port (a running server on
//   that database, with BENCH_ADMIN_EMAIL / BENCH_ADMIN_PASSWORD; else one is started from
//   src/ with AUDIT_SEALING=off, so that sealing the seed does not run beside the measure)
//
// DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/teamlog_search_bench; it must be
// a superuser's (the seed writes timestamps past the stamping trigger).
//
// The seed is a year of records, not the uniform one of bench/run.mjs (one address, one result,
// every timestamp within seconds), on which most keys would match all rows or none: 1,000 users
// (some far busier than others), 3 % without an actor, 11 actions in realistic proportions,
// 3 % FAILURE and 1 % DENIED, ~5,000 IPv4 and ~500 IPv6 client addresses, a random request id
// per record, timestamps rising with ids over 365 days.
import { performance } from 'node:perf_hooks';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { login, startProcess, stop, withClient } from './lib.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(`--${name}`) ? args[args.indexOf(`--${name}`) + 1] : fallback);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/teamlog_search_bench';
const RECORDS = Number(opt('records', 1_000_000));
const RUNS = Number(opt('runs', 200));
const PORT = 3431;
const ADMIN = { email: process.env.BENCH_ADMIN_EMAIL ?? 'search-admin@bench.local', password: process.env.BENCH_ADMIN_PASSWORD ?? 'search-admin-password' };
const log = (msg) => process.stderr.write(`${msg}\n`);

/**
 * Creates (or drops and makes again) the database at `url`, migrates it with `migrate` (src/'s
 * or dist/'s migratePostgres), and seeds `records` audit records over a year.
 */
export async function seedSearchDatabase(url, records, migrate, log = () => {}) {
  const target = new URL(url);
  const name = target.pathname.slice(1);
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`database name ${name}: letters, digits and _ only`);
  await withClient(Object.assign(new URL(url), { pathname: '/postgres' }).toString(), async (admin) => {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  });
  await migrate(url);
  await withClient(url, async (c) => {
    await c.query(`INSERT INTO users (email, name, password_hash, role)
      SELECT 'search' || g || '@bench.local', 'Search User ' || g, 'x', 'USER' FROM generate_series(1, 1000) g`);
    // The stamping trigger sets the timestamp to now: off for the seed (replica role), which writes a year.
    await c.query('SET session_replication_role = replica');
    for (let done = 0; done < records; done += 200_000) {
      const n = Math.min(200_000, records - done);
      await c.query(
        `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, "timestamp", result, metadata, ip, user_agent, request_id)
         SELECT CASE WHEN r1 < 0.03 THEN NULL ELSE u.ids[1 + floor(power(r2, 2) * 1000)::int] END,
                a.action, a.rtype, CASE WHEN a.rtype = 'TASK' THEN 1 + floor(r3 * 100000)::int WHEN a.rtype = 'USER' THEN u.ids[1 + floor(r3 * 1000)::int] ELSE 1 + floor(r3 * 200)::int END,
                now() - interval '365 days' * (1 - g::float8 / $3) + interval '1 ms' * floor(r4 * 20),
                CASE WHEN r5 < 0.03 THEN 'FAILURE' WHEN r5 < 0.04 THEN 'DENIED' ELSE 'SUCCESS' END,
                '{"seed":true}',
                CASE WHEN r6 < 0.01 THEN NULL
                     WHEN r6 < 0.06 THEN '2001:db8:' || to_hex(floor(r7 * 500)::int) || '::' || to_hex(1 + floor(r7 * 7)::int)
                     WHEN r6 < 0.56 THEN '10.' || floor(r7 * 20)::int || '.' || floor(r7 * 250)::int % 250 || '.' || 1 + floor(r8 * 10)::int
                     ELSE '192.168.' || floor(r7 * 25)::int || '.' || 1 + floor(r8 * 100)::int END,
                'bench-search',
                md5(g::text || r4::text)::uuid::text
           FROM (SELECT g, random() r1, random() r2, random() r3, random() r4, random() r5, random() r6, random() r7, random() r8, random() r9
                   FROM generate_series($1::int + 1, $1::int + $2::int) g) s,
                LATERAL (SELECT (ARRAY['CREATE_TASK','CHANGE_TASK_STATUS','ASSIGN_TASK','LOGIN_SUCCESS','LOGIN_FAILURE','LOGOUT','DELETE_TASK','CREATE_PROJECT','ADD_PROJECT_MEMBER','CHANGE_USER_ROLE','EXPORT_AUDIT_LOG'])[i] AS action,
                                (ARRAY['TASK','TASK','TASK','USER','USER','USER','TASK','PROJECT','PROJECT','USER','AUDIT_LOG'])[i] AS rtype
                           FROM (SELECT CASE WHEN s.r9 < 0.40 THEN 1 WHEN s.r9 < 0.65 THEN 2 WHEN s.r9 < 0.75 THEN 3 WHEN s.r9 < 0.90 THEN 4 WHEN s.r9 < 0.93 THEN 5
                                             WHEN s.r9 < 0.96 THEN 6 WHEN s.r9 < 0.98 THEN 7 WHEN s.r9 < 0.99 THEN 8 WHEN s.r9 < 0.9985 THEN 9 WHEN s.r9 < 0.9999 THEN 10 ELSE 11 END AS i) k) a,
                (SELECT array_agg(id ORDER BY id) AS ids FROM users) u`,
        [done, n, records],
      );
      log(`seeded ${done + n} records`);
    }
    await c.query('RESET session_replication_role');
    await c.query('VACUUM (ANALYZE)');
    await c.query('CHECKPOINT');
  });
}

/** The baseline row of the measure: no q, the plain list (not a query the target counts). */
export const NO_SEARCH = '';

/** The highest HTTP p99 among the searches (the target's figure), the baseline row left out. */
export const worstSearchP99 = (rows) => Math.max(...rows.filter((r) => r.q !== NO_SEARCH).map((r) => r.p99));

/** Values to search for, taken from the data so that each query is one an investigator would type. */
export async function searchQueries(url) {
  return withClient(url, async (c) => {
    const one = async (sql) => (await c.query(sql)).rows[0];
    const busy = await one('SELECT actor_id AS id, count(*)::int AS n FROM audit_log WHERE actor_id IS NOT NULL GROUP BY 1 ORDER BY 2 DESC LIMIT 1');
    const quiet = await one('SELECT actor_id AS id, count(*)::int AS n FROM audit_log WHERE actor_id IS NOT NULL GROUP BY 1 ORDER BY 2 LIMIT 1');
    const quietEmail = (await one(`SELECT email FROM users WHERE id = ${Number(quiet.id)}`)).email;
    const task = await one("SELECT resource_id AS id FROM audit_log WHERE resource_type = 'TASK' ORDER BY id LIMIT 1 OFFSET 1000");
    const oldRow = await one('SELECT ip, request_id FROM audit_log WHERE ip IS NOT NULL ORDER BY id LIMIT 1 OFFSET 5000');
    // The seed's 10.x.y.0/24 networks hold 900-2,100 records each, its 192.168.x.0/24 ones ~17,600:
    // PostgreSQL walks the newest ids for a dense network and reads a sparse one from its index,
    // so the measure holds one of each, whichever network oldRow is in.
    const sparse = await one("SELECT ip FROM audit_log WHERE ip LIKE '10.%' ORDER BY id LIMIT 1 OFFSET 5000");
    const dense = await one("SELECT ip FROM audit_log WHERE ip LIKE '192.168.%' ORDER BY id LIMIT 1 OFFSET 5000");
    const v6 = await one("SELECT ip FROM audit_log WHERE ip LIKE '2001:%' ORDER BY id LIMIT 1 OFFSET 100");
    const span = await one(`SELECT min("timestamp")::date AS first, max("timestamp")::date AS last FROM audit_log`);
    const day = (d, plus) => new Date(new Date(d).getTime() + plus * 86_400_000).toISOString().slice(0, 10);
    return [
      // No search: the plain list of the newest records on the same route, the baseline beside
      // which the queries' HTTP figures are read (on a busy VM its p99 is itself several ms).
      NO_SEARCH,
      'action:CREATE_TASK',
      'action:CHANGE_USER_ROLE',
      'action:EXPORT_AUDIT_LOG',
      `actor:${busy.id}`,
      `actor:${quiet.id}`,
      `actor:${quietEmail}`,
      'actor:none',
      `resource:TASK/${task.id}`,
      'resource:PROJECT',
      'resource:AUDIT_LOG',
      'result:DENIED',
      'result:FAILURE',
      '-result:SUCCESS',
      `ip:${oldRow.ip}`,
      `ip:${sparse.ip.replace(/\.\d+$/, '.0/24')}`,
      `ip:${dense.ip.replace(/\.\d+$/, '.0/24')}`,
      'ip:10.0.0.0/8',
      `ip:${v6.ip}`,
      'ip:203.0.113.9',
      `request:${oldRow.request_id}`,
      `created:${day(span.first, 40)}..${day(span.first, 40)}`,
      `created:>=${day(span.last, -7)}`,
      `created:<${day(span.first, 30)}`,
      `created:<=${day(span.first, 180)}`,
      `created:${day(span.first, 100)}..${day(span.first, 130)}`,
      // Two windows (the higher of their ceilings), and one that ends yesterday (a ceiling that skips little).
      `created:${day(span.first, 60)}..${day(span.first, 61)} created:${day(span.first, 200)}..${day(span.first, 230)}`,
      `created:<${day(span.last, -1)}`,
    ];
  });
}

/** The service from src/ on the seeded database, with sealing off (the search reads; nothing is written). */
const startServer = () =>
  startProcess('teamlog', path.join(ROOT, 'src/server.ts'), {
    DATABASE_URL: DB_URL, LOG_LEVEL: 'warn', AUDIT_SEALING: 'off',
    JWT_SECRET: 'search-bench-secret-'.padEnd(48, 'x'), ADMIN_EMAIL: ADMIN.email, ADMIN_PASSWORD: ADMIN.password,
    RATE_LIMIT_PER_MINUTE: '10000000', DATA_DIR: `/tmp/teamlog-search-bench-${process.pid}`,
  }, PORT, { readyPath: '/health/ready', flags: ['--import', 'tsx'] });

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

/**
 * PostgreSQL's time for each query, from EXPLAIN ANALYZE (median of 5) of every statement the
 * route runs for it (audit.service.ts, listAuditLog: the id ceiling's lookups, then the list),
 * summed, with the indexes each read. `modules` is src/ (with tsx) or dist/, and `ext` its files'.
 */
export async function explainSearch(url, qs, modules = path.join(ROOT, 'src'), ext = 'ts') {
  const { listAuditLog, resolveSearch } = await import(path.join(modules, `modules/audit/audit.service.${ext}`));
  return withClient(url, async (c) => {
    await c.query("SET plan_cache_mode = 'force_custom_plan'; SET jit = off");
    const plain = { query: async (sql, params) => (await c.query(sql, params)).rows };
    const out = new Map();
    for (const q of qs) {
      const filters = await resolveSearch(plain, { q });
      const runs = [];
      for (let i = 0; i < 5; i++) {
        const run = { ms: 0, plans: [] };
        // Each SELECT is EXPLAINed, then run for the answer the next statement needs; what the
        // service sends without reading (the snapshot, the settings) goes as it is, in order.
        const explaining = {
          query: async (sql, params) => {
            if (!sql.startsWith('SELECT') || sql.includes('set_config')) return (await c.query(sql, params)).rows;
            const p = (await c.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params)).rows[0]['QUERY PLAN'][0];
            run.ms += p['Execution Time'] + p['Planning Time'];
            run.plans.push(p.Plan);
            return (await c.query(sql, params)).rows;
          },
        };
        const db = {
          ...explaining,
          transaction: async (fn) => {
            await c.query('BEGIN');
            let sent = Promise.resolve();
            try {
              const tx = {
                query: async (sql, params) => (await sent, explaining.query(sql, params)),
                send: (sql, params) => void (sent = sent.then(() => c.query(sql, params))),
                afterCommit: () => {},
              };
              const result = await fn(tx);
              await sent;
              await c.query('COMMIT');
              return result;
            } catch (err) {
              await c.query('ROLLBACK');
              throw err;
            }
          },
        };
        await listAuditLog(db, filters, undefined, 20);
        runs.push(run);
      }
      runs.sort((a, b) => a.ms - b.ms);
      const median = runs[2];
      const scans = (plan) => {
        const nodes = [];
        const walk = (n) => {
          if (n['Index Name']) nodes.push(`${n['Node Type']} ${n['Index Name']}`);
          else if (n['Node Type'] === 'Seq Scan') nodes.push('Seq Scan');
          for (const child of n.Plans ?? []) walk(child);
        };
        walk(plan);
        return nodes.join(' + ') || plan['Node Type'];
      };
      out.set(q, { ms: median.ms, plan: median.plans.map(scans).join(' → ') });
    }
    return out;
  });
}

/**
 * p50 and p99 of each query over HTTP, `runs` requests one at a time on one connection (fetch
 * keeps it alive), after ten that warm up; with the rows the first page returned.
 */
export async function measureSearch(base, token, qs, runs) {
  const rows = [];
  // The server warmed up on every query first (its JIT, its statements prepared on each pooled
  // connection), so that the first query measured does not carry the warm-up of all of them.
  for (let round = 0; round < 20; round++) {
    for (const q of qs) await (await fetch(`${base}/api/v1/audit-logs?limit=20&q=${encodeURIComponent(q)}`, { headers: { authorization: `Bearer ${token}` } })).arrayBuffer();
  }
  for (const q of qs) {
    const { p50, p99, body } = await timeGets(`${base}/api/v1/audit-logs?limit=20&q=${encodeURIComponent(q)}`, token, runs, 10, q);
    rows.push({ q, rows: body.data.length, p50, p99 });
  }
  return rows;
}

/**
 * `runs` GETs of `url` one at a time (fetch keeps the connection alive) after `warmup` more, each
 * of which must answer 200 (else it throws, naming `label`): their p50 and p99 in ms, and the
 * last answer's body.
 */
async function timeGets(url, token, runs, warmup, label) {
  const times = [];
  let body;
  for (let i = 0; i < runs + warmup; i++) {
    const t0 = performance.now();
    const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    body = await res.json();
    if (res.status !== 200) throw new Error(`${label}: ${res.status} ${JSON.stringify(body)}`);
    if (i >= warmup) times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99), body };
}

/**
 * The console's activity counts (GET /audit-logs/stats, docs/audit-search.md "Activity counts"):
 * p50 and p99 over HTTP of the windows the console asks for, `runs` requests one at a time after
 * five that warm up. The seed's records rise over the year up to its newest, so "the last 30
 * days" is the window the console opens with (no `q`: the default 30 days, a bar a day).
 */
export async function measureStats(base, token, url, runs) {
  const { busy, newest } = await withClient(url, async (c) => ({
    busy: (await c.query('SELECT actor_id AS id FROM audit_log WHERE actor_id IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC LIMIT 1')).rows[0].id,
    newest: (await c.query('SELECT max("timestamp") AS t FROM audit_log')).rows[0].t,
  }));
  const to = new Date(new Date(newest).getTime() + 1000).toISOString();
  const from = new Date(new Date(to).getTime() - 30 * 86_400_000).toISOString();
  const window = `from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
  const asked = [
    { label: '30 days, a bar a day', query: window },
    { label: '30 days, a bar an hour', query: `${window}&interval=hour` },
    { label: '30 days, `action:CREATE_TASK`', query: `${window}&q=${encodeURIComponent('action:CREATE_TASK')}` },
    { label: '30 days, `actor:<the busiest>`', query: `${window}&q=${encodeURIComponent(`actor:${busy}`)}` },
    { label: '30 days, `-result:SUCCESS`', query: `${window}&q=${encodeURIComponent('-result:SUCCESS')}` },
  ];
  const rows = [];
  for (const { label, query } of asked) {
    const { p50, p99, body } = await timeGets(`${base}/api/v1/audit-logs/stats?${query}`, token, runs, 5, `stats ${label}`);
    rows.push({ label, records: body.total, p50, p99 });
  }
  return rows;
}

/** The Markdown table of measureStats's rows. */
export function statsTable(rows) {
  return [
    '| window | records counted | HTTP p50 ms | HTTP p99 ms |',
    '| --- | ---: | ---: | ---: |',
    ...rows.map((r) => `| ${r.label} | ${r.records.toLocaleString('en')} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} |`),
  ].join('\n');
}

/** The Markdown table of measureSearch's rows beside explainSearch's figures. */
export function searchTable(rows, explained) {
  return [
    '| query | rows | HTTP p50 ms | HTTP p99 ms | PostgreSQL ms (plan + execution, median of 5) | plan |',
    '| --- | ---: | ---: | ---: | ---: | --- |',
    ...rows.map((r) => `| ${r.q === NO_SEARCH ? 'no `q` (the plain list: baseline)' : `\`${r.q}\``} | ${r.rows} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${explained.get(r.q).ms.toFixed(2)} | ${explained.get(r.q).plan} |`),
  ].join('\n');
}

async function main() {
  if (args.includes('--seed')) {
    log(`seeding ${RECORDS.toLocaleString('en')} records into ${DB_URL}…`);
    const { migratePostgres } = await import(path.join(ROOT, 'src/db/migrate.ts'));
    await seedSearchDatabase(DB_URL, RECORDS, migratePostgres, log);
  }
  const qs = await searchQueries(DB_URL);
  let child;
  let base = opt('url');
  if (!base) {
    child = await startServer();
    base = `http://127.0.0.1:${PORT}`;
  }
  try {
    const token = await login(base, ADMIN.email, ADMIN.password);
    const rows = await measureSearch(base, token, qs, RUNS);
    const explained = await explainSearch(DB_URL, qs);
    const stats = await measureStats(base, token, DB_URL, Math.min(RUNS, 50));
    const lines = [
      `Audit search, ${RUNS} requests per query at one connection (limit=20, first page), on ${DB_URL.replace(/\/\/[^@]*@/, '//')}`,
      '',
      searchTable(rows, explained),
      '',
      'Activity counts (GET /audit-logs/stats), one request at a time:',
      '',
      statsTable(stats),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await stop(child);
  }
}

// Run as a script (not when bench/run.mjs imports it).
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
