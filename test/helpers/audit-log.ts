// Building an audit log to tamper with and reading what verification says of it: shared by
// the tamper tests (audit-tamper-engine.test.ts, audit-tamper-committed.test.ts,
// audit-personal-values.test.ts); settled, for every test that waits for the log to be sealed
// and signed.
import assert from 'node:assert/strict';
import path from 'node:path';
import type { Database, Queryable } from '../../src/db/database.js';
import { databaseSession, migrate } from '../../src/db/migrate.js';
import { createPgliteDatabase } from '../../src/db/pglite.js';
import type { VerifyReport } from '../../src/modules/audit/evidence/log.verifier.js';
import { Client, type Session } from './client.js';
import { createTestDatabase, onPostgres, type TestDatabase, type TestServer } from './server.js';

/** A checkpoint as GET /audit-logs/checkpoints/latest answers it. */
export interface CheckpointJson { origin: string; tree_size: number; root_hash: string; key_id: string; note: string }

/** Where a log's records are: the sealed records' ids by seq, and its checkpoints. */
export interface Layout {
  /** record_id by seq. */
  seals: number[];
  /** Checkpoints oldest first. */
  checkpoints: Array<{ id: number; tree_size: number }>;
}

export async function layout(q: Queryable): Promise<Layout> {
  const seals = await q.query<{ seq: number; record_id: number }>('SELECT seq, record_id FROM audit_seal ORDER BY seq');
  seals.forEach((s, i) => assert.equal(s.seq, i));
  const checkpoints = await q.query<{ id: number; tree_size: number }>('SELECT id, tree_size FROM audit_checkpoints ORDER BY id');
  return { seals: seals.map((s) => s.record_id), checkpoints };
}

/** A tamper: one record deleted (the guards must be down: behindTheBack). */
export const deleteRecord = (q: Queryable, id: number) => q.query('DELETE FROM audit_log WHERE id = $1', [id]);

/** Audited actions (CREATE_PROJECT), one request each. */
export async function auditedActions(admin: Session, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await admin.client.post('/api/v1/projects', { name: `Tamper ${i}` }, { token: admin.token });
    assert.equal(res.status, 201, res.text);
  }
}

/**
 * Waits until every record is sealed and the newest checkpoint covers them all (signed under
 * `keyId`, when given), and answers that checkpoint as GET /audit-logs/checkpoints/latest shows it.
 */
export async function settled<C extends CheckpointJson = CheckpointJson>(server: TestServer, admin: Session, opts: { keyId?: string } = {}): Promise<C> {
  for (let i = 0; i < 400; i++) {
    // One statement, so one snapshot: counts read apart could straddle a sealing batch.
    const [s] = await server.owner.query<{ records: number; sealed: number; size: number | null; key_id: string | null }>(
      `SELECT (SELECT count(*)::int FROM audit_log) AS records, (SELECT count(*)::int FROM audit_seal) AS sealed, c.tree_size::int AS size, c.key_id
         FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT * FROM audit_checkpoints ORDER BY id DESC LIMIT 1) c ON true`,
    );
    if (s && s.records === s.sealed && s.size === s.sealed && (opts.keyId === undefined || s.key_id === opts.keyId)) {
      const res = await admin.client.get<C>('/api/v1/audit-logs/checkpoints/latest', { token: admin.token });
      if (res.status === 200 && res.body.tree_size === s.size && res.body.key_id === s.key_id) return res.body;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the log did not settle: records left unsealed or no checkpoint${opts.keyId ? ` under ${opts.keyId}` : ''} covers them`);
}

/** Batches of audited actions, each settled (so signed) before the next: a log with several checkpoints. */
export async function buildLog(server: TestServer, admin: Session, batches: number[]): Promise<CheckpointJson> {
  let head: CheckpointJson | undefined;
  for (const n of batches) {
    await auditedActions(admin, n);
    head = await settled(server, admin);
  }
  return head!;
}

/** What GET /audit-logs/verify says. */
export async function verifyRoute(admin: Session): Promise<VerifyReport> {
  const res = await admin.client.get<VerifyReport>('/api/v1/audit-logs/verify', { token: admin.token });
  assert.equal(res.status, 200, res.text);
  return res.body;
}

export function assertOk(report: VerifyReport): void {
  assert.equal(report.ok, true, `expected the log to verify: ${report.problem}`);
  assert.equal(report.first_bad_id, undefined);
}

export function assertBad(report: VerifyReport, firstBadId: number | undefined, problem: RegExp): void {
  assert.equal(report.ok, false, 'the tamper went unnoticed');
  assert.equal(report.first_bad_id, firstBadId, `first_bad_id (problem: ${report.problem})`);
  assert.equal(typeof report.problem, 'string');
  assert.match(report.problem!, problem);
}

/**
 * Runs fn with every trigger on the audit tables disabled (the append-only guards, the seal's
 * checks, audit_log_stamp), then enables each again exactly as it was (ALWAYS, or ordinary).
 */
export async function behindTheBack(q: Queryable, fn: () => Promise<unknown>): Promise<void> {
  const triggers = await q.query<{ table: string; name: string; enabled: string }>(
    `SELECT c.relname AS table, t.tgname AS name, t.tgenabled::text AS enabled FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
     WHERE NOT t.tgisinternal AND c.relname IN ('audit_log', 'audit_seal_batches', 'audit_tiles', 'audit_checkpoints', 'audit_cosignatures') AND t.tgenabled <> 'D'`,
  );
  assert.ok(triggers.some((t) => t.name === 'audit_log_no_update' && t.enabled === 'A'), 'the append-only guard is ENABLE ALWAYS');
  for (const t of triggers) await q.query(`ALTER TABLE ${t.table} DISABLE TRIGGER ${t.name}`);
  await fn();
  const modes: Record<string, string> = { O: '', A: 'ALWAYS', R: 'REPLICA' };
  for (const t of triggers) await q.query(`ALTER TABLE ${t.table} ENABLE ${modes[t.enabled]} TRIGGER ${t.name}`);
}

/** A tamper committed in one owner transaction (the service never sees the guards down). */
export const committed = (db: Database, fn: (q: Queryable) => Promise<unknown>) => db.transaction((tx) => behindTheBack(tx, () => fn(tx)));

class Rollback extends Error {}

/**
 * fn on an owner transaction that is always rolled back: the tamper and the engine's verdict on
 * it, seen by this transaction only.
 */
export async function rolledBack<T>(db: Database, fn: (q: Queryable) => Promise<T>): Promise<T> {
  let result: { value: T } | undefined;
  try {
    await db.transaction(async (tx) => {
      result = { value: await fn(tx) };
      throw new Rollback();
    });
  } catch (err) {
    if (!(err instanceof Rollback)) throw err;
  }
  return result!.value;
}

/** A database the CLI can open too: PGlite under dataDir/pglite (one process at a time), or a new PostgreSQL database. */
export async function sharedDatabase(dataDir: string): Promise<TestDatabase> {
  if (onPostgres) return createTestDatabase();
  const db = await createPgliteDatabase(path.join(dataDir, 'pglite'), () => {});
  await migrate(databaseSession(db));
  return { name: path.basename(dataDir), db, owner: db, databaseUrl: undefined, drop: () => db.close() };
}

/** Records as the service writes them, inserted by the owner (the sealer takes them in commit order like any). */
export async function appendRecords(owner: Queryable, n: number, tag: string): Promise<void> {
  await owner.query(
    `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
     SELECT NULL, 'CREATE_PROJECT', 'PROJECT', g, 'SUCCESS', jsonb_build_object('name', $2 || g), '10.0.0.1', 'tree-test', $2 || g FROM generate_series(1, $1::int) g`,
    [n, tag],
  );
}

/** What /health/ready answers once sealing has stopped (docs/audit-integrity.md §5, check 8). */
export interface StoppedSealing {
  status: string;
  sealing?: { first_unsealed_id: number };
}

/**
 * Writes one audit record at a time with `write` until /health/ready says `degraded` (records
 * waited past AUDIT_SEAL_STALL_MS with no seal made: the sealer refused the evidence), and
 * answers what it said; fails if it never does.
 */
export async function untilSealingStops(server: TestServer, write: (i: number) => Promise<unknown>): Promise<StoppedSealing> {
  let health: StoppedSealing | undefined;
  for (let i = 0; i < 100 && health?.status !== 'degraded'; i++) {
    await write(i);
    await new Promise((r) => setTimeout(r, 150));
    health = (await new Client(server).get<StoppedSealing>('/health/ready')).body;
  }
  assert.equal(health?.status, 'degraded', JSON.stringify(health));
  return health!;
}
