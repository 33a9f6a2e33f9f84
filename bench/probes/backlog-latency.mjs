// Probe (not part of npm run bench): a lone user's GET /tasks?limit=50 latency while a fresh
// server seals a backlog of audit records written behind its back, then with nothing to seal.
// node bench/probes/backlog-latency.mjs <checkout whose dist/ to run> [records]
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { generateEd25519PrivateKeyPem } from '../../dist/tlog/signed-note.js';
import { waitSealed } from '../audit-evidence.mjs';
import { MALLOC_ENV, login, startProcess, stop } from '../lib.mjs';

const root = path.resolve(process.argv[2] ?? '.');
const records = Number(process.argv[3] ?? 300_000);
const DB = 'teamlog_probe_backlog';
const base = 'postgres://postgres@127.0.0.1:5432/';
const admin = new pg.Client({ connectionString: `${base}postgres` });
await admin.connect();
await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
await admin.query(`CREATE DATABASE ${DB}`);
await admin.end();
const { migratePostgres } = await import(path.join(root, 'dist/db/migrate.js'));
await migratePostgres(`${base}${DB}`);
const env = {
  JWT_SECRET: 'probe-'.padEnd(48, 'x'), ADMIN_EMAIL: 'probe@probe.local', ADMIN_PASSWORD: 'probe-password-1', LOG_LEVEL: 'warn', ...MALLOC_ENV,
  RATE_LIMIT_PER_MINUTE: '10000000', AUDIT_SIGNING_KEY: generateEd25519PrivateKeyPem(), DATABASE_URL: `${base}${DB}`, DATA_DIR: mkdtempSync(path.join(tmpdir(), 'probe-')),
};
// A first start creates the admin; its records are sealed; then the backlog is written with the server stopped.
let child = await startProcess('teamlog', path.join(root, 'dist/server.js'), env, 3411, { readyPath: '/health/ready' });
await waitSealed(`${base}${DB}`, () => {});
await stop(child);
const c = new pg.Client({ connectionString: `${base}${DB}` });
await c.connect();
const [{ id: adminId }] = (await c.query(`SELECT id FROM users LIMIT 1`)).rows;
await c.query(`INSERT INTO projects (name, description, created_by) VALUES ('P', 'p', $1)`, [adminId]);
await c.query(`INSERT INTO tasks (project_id, title, description, created_by) SELECT (SELECT min(id) FROM projects), 'Task ' || g, 'Description ' || g, $1 FROM generate_series(1, 5000) g`, [adminId]);
await c.query(
  `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
   SELECT $1, 'CREATE_TASK', 'TASK', g, 'SUCCESS', '{"seed":true}', '10.0.0.1', 'probe', 'probe-' || g FROM generate_series(1, $2::int) g`,
  [adminId, records],
);
await c.query('VACUUM (ANALYZE)');
await c.query('CHECKPOINT');
await c.end();

child = await startProcess('teamlog', path.join(root, 'dist/server.js'), env, 3411, { readyPath: '/health/ready' });
const url = 'http://127.0.0.1:3411';
const token = await login(url, env.ADMIN_EMAIL, env.ADMIN_PASSWORD);
const run = (seconds) =>
  new Promise((resolve, reject) => {
    const inst = autocannon({ url, connections: 1, duration: seconds, requests: [{ method: 'GET', path: '/api/v1/tasks?limit=50', headers: { authorization: `Bearer ${token}` } }] }, (err, r) => (err ? reject(err) : resolve(r)));
    run.stop = () => inst.stop();
  });
const during = run(120);
const sealing = await waitSealed(`${base}${DB}`, () => {}, { pollMs: 200 });
run.stop();
const d = await during;
const idle = await run(5);
const fig = (r) => ({ requests: r.requests.total, rps: r.requests.average, p50: r.latency.p50, p97_5: r.latency.p97_5, p99: r.latency.p99, max: r.latency.max });
console.log(JSON.stringify({ root, records, sealing, during: fig(d), idle: fig(idle) }));
await stop(child);
const a2 = new pg.Client({ connectionString: `${base}postgres` });
await a2.connect();
await a2.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
await a2.end();
process.exit(0);
