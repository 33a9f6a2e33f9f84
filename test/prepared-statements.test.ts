// How list statements reach PostgreSQL's plan cache (db/postgres.ts, db/conditions.ts): a
// combination of index-backed filters is prepared once per connection and keeps one generic
// plan, never planned again; a full-text word or a time range is planned for its value on
// every call instead of being prepared. PGlite ignores prepared statement names.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { xactCeiling } from '../src/db/commit-order.js';
import type { Database, Queryable } from '../src/db/database.js';
import { createPostgresDatabase, LOOKUP_LANES } from '../src/db/postgres.js';
import { declaredStatements } from '../src/db/statements.js';
import { queryAuditLog } from '../src/modules/audit/audit.repository.js';
import '../src/modules/audit/evidence/evidence.repository.js';
import '../src/modules/audit/evidence/export.repository.js';
import '../src/modules/audit/evidence/webhook.repository.js';
import '../src/modules/outbox/outbox.repository.js';
import { listTasks } from '../src/modules/tasks/tasks.repository.js';
import { useTestDatabase } from './helpers/harness.js';
import { createTestDatabase, needsPostgres, type TestDatabase } from './helpers/server.js';
import { sleep } from './helpers/sockets.js';

const h = useTestDatabase();

interface Prepared {
  name: string;
  generic_plans: number;
  custom_plans: number;
}

/** This connection's prepared list statements and how often each plan kind was used. */
function preparedLists(q: Queryable): Promise<Prepared[]> {
  return q.query<Prepared>(
    `SELECT name, generic_plans::int, custom_plans::int FROM pg_prepared_statements
      WHERE name LIKE 'tasks\\_list\\_%' OR name LIKE 'audit\\_list\\_%' ORDER BY name`,
  );
}

describe('list statements and the plan cache', { skip: needsPostgres }, () => {
  test('one combination of filters is prepared once and runs on one generic plan, whatever the values', async () => {
    await h.database.db.transaction(async (tx) => {
      for (let i = 1; i <= 8; i++) await listTasks(tx, { memberId: null, project_id: i, status: i % 2 ? 'TODO' : 'DONE' }, undefined, 10 * i);
      for (let i = 1; i <= 8; i++) await queryAuditLog(tx, { actor_id: i }, undefined, 5 * i);
      const prepared = await preparedLists(tx);
      assert.deepEqual(prepared.map((p) => [p.generic_plans, p.custom_plans]), [[8, 0], [8, 0]], JSON.stringify(prepared));
      assert.equal(prepared.length, 2, 'one statement per combination, not per value');
    });
  });

  test('a full-text word or a time range is planned for its value on each call, never prepared', async () => {
    await h.database.db.transaction(async (tx) => {
      // The connection may hold statements prepared by an earlier test: none may be added.
      const before = await preparedLists(tx);
      for (const word of ['alpha', 'beta', 'gamma']) await listTasks(tx, { memberId: null, q: word, status: 'TODO' }, undefined, 50);
      await queryAuditLog(tx, { actor_id: 1, from: '2026-01-01T00:00:00Z' }, undefined, 50);
      await queryAuditLog(tx, { to: '2026-01-01T00:00:00Z' }, undefined, 50);
      assert.deepEqual(await preparedLists(tx), before);
    });
  });
});

// A prepared statement keeps the generic plan it got on its connection's first use. On tables
// whose statistics say "empty" (analyzed before their first rows, as the benchmark's seeded
// database was, and with nothing to analyze them again: autovacuum is off on these machines)
// that plan is a sequential scan, and it stays while the table grows. Once the sealer's reads
// were prepared and a backlog of a million records sealed at 1,950 records/s instead of
// 24,000, scanning the whole seal in every batch. So they are planned per call, and the
// control here shows what preparing them would do.
describe("the sealer's reads, on a database analyzed while empty that then grows", { skip: needsPostgres }, () => {
  const ROWS = 200_000;
  const SEALER_READS: Array<[string, unknown[]]> = [
    ['evidence.lastBatch', []],
    ['audit-reader.committedAfterSnapshot', ['{}', '999999999', xactCeiling('999999999'), 500]],
    ['evidence.tiles', ['{1,0}', '{0,7}', '{5,256}']],
    ['evidence.leaves', [0, 1024]],
    ['evidence.sealOf', [7]],
    ['evidence.latestCheckpoint', []],
  ];
  const args = (params: unknown[]) => (params.length ? `(${params.map((p) => `'${String(p)}'`).join(', ')})` : '');
  let database: TestDatabase;
  /**
   * One connection for the prepared statements (a pool would hand each statement any of its
   * connections), planning as the service's main pool does: a prepared statement keeps its
   * generic plan (db/postgres.ts, PLAN_SETTINGS).
   */
  let session: pg.Client;
  /** The sealer's reads prepared, and run once, while the tables were empty. */
  const preparedEmpty = new Map<string, string>();

  before(async () => {
    if (needsPostgres) return;
    // A database of its own: its statistics are made to say "empty", which the other tests here must not inherit.
    database = await createTestDatabase();
    session = new pg.Client({ connectionString: database.databaseUrl, options: '-c plan_cache_mode=force_generic_plan -c jit=off' });
    await session.connect();
    const owner = database.owner;
    // Autovacuum would analyze the grown tables behind the test's back, and an ANALYZE makes
    // PostgreSQL plan a prepared statement again: the control would then find no scan at all.
    for (const table of ['audit_log', 'audit_seal_batches', 'audit_tiles', 'audit_checkpoints']) {
      await owner.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
    }
    // The checkpoints inserted below need only be well formed, not chained: the guard that holds
    // each to extending the newest (migrations/0016) is off in this database. Before the reads are
    // prepared: an ALTER TABLE afterwards would make PostgreSQL plan them again.
    await owner.query('ALTER TABLE audit_checkpoints DISABLE TRIGGER audit_checkpoints_extend');
    await owner.query('VACUUM (ANALYZE) audit_log, audit_seal_batches, audit_tiles, audit_checkpoints');
    for (const [i, [name, params]] of SEALER_READS.entries()) {
      await session.query(`PREPARE sealer_${i} AS ${declaredStatements().get(name)!.text}`);
      await session.query(`EXECUTE sealer_${i}${args(params)}`); // the generic plan is made here, and kept
      preparedEmpty.set(name, `sealer_${i}`);
    }
    await sealedRecords(owner, ROWS);
    // A checkpoint every 5 s for a week or so.
    await owner.query(
      `INSERT INTO audit_checkpoints (tree_size, root_hash, key_id, signature, note, created_at)
       SELECT g, sha256(g::text::bytea), 'test', sha512(g::text::bytea), 'note', now() FROM generate_series(1, $1::int / 2) g`,
      [ROWS],
    );
  });
  after(async () => {
    await session?.end();
    await database?.drop();
  });

  const scans = async (statement: string, params: unknown[]) => {
    const { rows: [row] } = await session.query<{ 'QUERY PLAN': Array<{ Plan: unknown }> }>(`EXPLAIN (FORMAT JSON) EXECUTE ${statement}${args(params)}`);
    return seqScans(row!['QUERY PLAN'][0]!.Plan);
  };

  test('the control: prepared while the tables were empty, the reads now scan the seal and the log from their start', async () => {
    assert.deepEqual(await scans(preparedEmpty.get('evidence.lastBatch')!, []), ['audit_seal_batches']);
    assert.ok((await scans(preparedEmpty.get('audit-reader.committedAfterSnapshot')!, ['{}', '999999999', xactCeiling('999999999'), 500])).includes('audit_log'));
    assert.deepEqual(await scans(preparedEmpty.get('evidence.latestCheckpoint')!, []), ['audit_checkpoints']);
  });

  test('so none of them is prepared, and planned now, at the size the tables have, none reads a table from its start', async () => {
    const scanning: string[] = [];
    // As the sealer's connections plan (db/postgres.ts, PER_CALL_PLAN_SETTINGS): for the values.
    await session.query('SET plan_cache_mode = force_custom_plan');
    for (const [name, params] of SEALER_READS) {
      const declared = declaredStatements().get(name)!;
      assert.equal(declared.mode, 'planned per call', `${name} is planned per call`);
      await session.query(`PREPARE now_planned AS ${declared.text}`);
      for (const table of await scans('now_planned', params)) scanning.push(`${name} scans ${table}`);
      await session.query('DEALLOCATE now_planned');
    }
    await session.query('SET plan_cache_mode = force_generic_plan');
    assert.deepEqual(scanning, []);
  });
});

// Every prepared statement is at risk of the same: a key lookup first run while its table was
// empty keeps a sequential scan. So every connection, the pool's and the lookup lanes', is
// replaced after a lifetime (CONNECTION_LIFETIME_MS, ten minutes; five seconds here), and the
// new one plans at the table's size. Which scan ran is read from PostgreSQL's counters.
describe('a connection replaced after its lifetime, and with it the plans it kept', { skip: needsPostgres }, () => {
  const LIFETIME_MS = 5000;
  const BY_ID = 'SELECT pad FROM lifetime_probe WHERE id = $1';
  let database: TestDatabase;
  let db: Database;
  let setup = { seq: 0, idx: 0 };

  before(async () => {
    if (needsPostgres) return;
    database = await createTestDatabase();
    // Made on one connection of its own, whose counts (the primary key's build reads the table)
    // are reported before the test starts: pg_stat_force_next_flush makes it report when it
    // goes idle, which it has by the time it answers the next statement. (The owner's pool
    // could run each statement on a different connection.)
    const maker = new pg.Client({ connectionString: database.databaseUrl });
    await maker.connect();
    try {
      await maker.query('CREATE TABLE lifetime_probe (id bigint PRIMARY KEY, pad text NOT NULL)');
      await maker.query('ANALYZE lifetime_probe');
      await maker.query('SELECT pg_stat_force_next_flush()');
      await maker.query('SELECT 1');
    } finally {
      await maker.end();
    }
    setup = await counts();
    db = createPostgresDatabase({ url: database.databaseUrl!, poolSize: 2, onError: () => {}, connectionLifetimeMs: LIFETIME_MS });
  });
  after(async () => {
    await db?.close();
    await database?.drop();
  });

  /** On a lookup lane (two, taken in turn) and on the pool. */
  const onLane = (id: number) => db.query(BY_ID, [id], { prepareAs: 'probe.byIdOnLane', lookup: true });
  const onPool = (id: number) => db.query(BY_ID, [id], { prepareAs: 'probe.byIdOnPool' });

  /**
   * The table's scans since it was made, once `n` are counted. A backend reports its counts as
   * it goes idle, at most once a second (else ten seconds later) or when told to: each lane
   * and the pool's connection are told to, and the test waits for the counts to arrive.
   */
  async function scans(n: number) {
    const flush = 'SELECT pg_stat_force_next_flush()';
    for (let lane = 0; lane < LOOKUP_LANES; lane++) await db.query(flush, [], { prepareAs: 'probe.reportOnLane', lookup: true });
    await db.query(flush, [], { prepareAs: 'probe.reportOnPool' });
    for (let waited = 0; ; waited += 100) {
      const now = await counts();
      const since = { seq: now.seq - setup.seq, idx: now.idx - setup.idx };
      if (since.seq + since.idx >= n || waited >= 20_000) return since;
      await sleep(100);
    }
  }
  async function counts() {
    const [row] = await database.owner.query<{ seq: number; idx: number }>(
      `SELECT seq_scan::int AS seq, COALESCE(idx_scan, 0)::int AS idx FROM pg_stat_user_tables WHERE relname = 'lifetime_probe'`,
    );
    return row!;
  }

  test('a lookup prepared on an empty table scans it for as long as its connection lives, and looks its key up on the next', async () => {
    const opened = Date.now();
    // Each connection (the two lanes, the pool's) prepares the lookup while the table is empty.
    await onLane(1);
    await onLane(1);
    await onPool(1);
    // Every connection had connected by now, so each one's lifetime ends by this plus LIFETIME_MS.
    // (Counting from `opened` left 200 ms for three connections to open, which a slow VM spent:
    // the pool's connection, whose lifetime starts once it has connected, kept its plan.)
    const allOpened = Date.now();
    await database.owner.query(`INSERT INTO lifetime_probe SELECT g, repeat('x', 200) FROM generate_series(1, 100000) g`);

    // The control: on those connections the lookups scan the table of 100,000 rows.
    await Promise.all([onLane(5), onLane(6), onPool(7)]);
    assert.ok(Date.now() - opened < LIFETIME_MS, 'the control ran within the lifetime');
    assert.deepEqual(await scans(6), { seq: 6, idx: 0 });

    // Past the lifetime, new connections plan it at the table's size: by its key.
    await sleep(Math.max(0, allOpened + LIFETIME_MS + 200 - Date.now()));
    const rows = await Promise.all([onLane(8), onLane(9), onPool(10)]);
    assert.deepEqual(rows.map((r) => r.length), [1, 1, 1]);
    assert.deepEqual(await scans(9), { seq: 6, idx: 3 });
  });

  test('lookups in flight on a lane as it is replaced are all answered, and both lanes are replaced', async () => {
    const lanePids = async () => new Set((await Promise.all([0, 1].map(() => db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid', [], { prepareAs: 'probe.pid', lookup: true })))).map((r) => r[0]!.pid));
    const before = await lanePids();
    // Lookups sent without pause for longer than a lifetime: some are in flight on each lane
    // whenever it is replaced.
    const echo = (n: number) => db.query<{ n: number }>('SELECT $1::int AS n', [n], { prepareAs: 'probe.echo', lookup: true });
    const answers: Array<Promise<Array<{ n: number }>>> = [];
    for (let n = 0, until = Date.now() + LIFETIME_MS + 500; Date.now() < until; n++) {
      answers.push(echo(n));
      if (n % 20 === 19) await sleep(10);
    }
    const rows = await Promise.all(answers);
    assert.deepEqual(rows.flatMap((r, n) => (r.length === 1 && r[0]!.n === n ? [] : [n])), [], `every one of ${rows.length} lookups answered, each with its own answer`);
    const after = await lanePids();
    assert.equal(after.size, LOOKUP_LANES);
    assert.deepEqual([...after].filter((pid) => before.has(pid)), [], 'no lane kept its connection');
  });
});

/** `rows` audit records, each sealed (with a stand-in leaf), 500 a batch, and their full level-0 tiles: a big log, as a poll or a batch sees one. */
async function sealedRecords(owner: Queryable, rows: number): Promise<void> {
  await owner.query(
    `INSERT INTO audit_log (action, resource_type, resource_id, result, metadata, request_id)
     SELECT 'CREATE_TASK', 'TASK', g, 'SUCCESS', '{}', 'big-' || g FROM generate_series(1, $1::int) g`,
    [rows],
  );
  await owner.query(
    `INSERT INTO audit_seal_batches (first_seq, record_ids, leaves, record_span, after_snapshot, snapshot)
     SELECT min(n), array_agg(id ORDER BY n), array_agg(sha256(id::text::bytea) ORDER BY n), int8range(min(id), max(id), '[]'), pg_current_snapshot(), pg_current_snapshot()
       FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM audit_log) s GROUP BY n / 500`,
  );
  await owner.query(
    `INSERT INTO audit_tiles (level, idx, width, hashes)
     SELECT 0, seq / 256, 256, string_agg(leaf_hash, ''::bytea ORDER BY seq) FROM audit_seal GROUP BY seq / 256 HAVING count(*) = 256`,
  );
}

/** The relations a plan reads with a sequential scan. */
function seqScans(plan: unknown): string[] {
  const node = plan as { 'Node Type'?: string; 'Relation Name'?: string; Plans?: unknown[] };
  const own = node['Node Type'] === 'Seq Scan' && node['Relation Name'] ? [node['Relation Name']] : [];
  return [...own, ...(node.Plans ?? []).flatMap(seqScans)];
}

// The background loops (sealer, relay, webhook) look while idle: "is anything past where I
// stand?". On a big table, a plan that reads it from its start for the first row past a position
// at its end (a generic plan of an EXISTS over a range expects a third of the rows to match) cost
// 190 ms and churned the buffer cache at every poll on a million records, a quarter of every
// request's speed. Each look must be an index descent whatever the size. The readers' statements
// are planned per call (their plan depends on how wide the range is), so they are checked with
// the values an idle loop gives them; the EXISTS form is checked to scan here, so that the table
// is big enough for the assertion to mean something.
describe("the loops' idle looks on big tables", { skip: needsPostgres }, () => {
  const ROWS = 200_000;
  h.before(async () => {
    if (needsPostgres) return;
    const owner = h.database.owner;
    await sealedRecords(owner, ROWS);
    await owner.query(
      `INSERT INTO outbox (items) SELECT json_build_array(json_build_object('name', 'task.created', 'room', 'project:1', 'payload', '{}'::json)) FROM generate_series(1, $1::int) g`,
      [ROWS],
    );
    await owner.query(
      `INSERT INTO outbox_batches (first_event_id, event_count, row_ids, after_snapshot, snapshot)
       SELECT min(n) + 1, count(*), array_agg(id ORDER BY n), pg_current_snapshot(), pg_current_snapshot()
         FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM outbox) s GROUP BY n / 500`,
    );
    await owner.query('VACUUM (ANALYZE) audit_log, audit_seal_batches, audit_tiles, outbox, outbox_batches');
  });

  const planScans = (prepared: boolean) => async (text: string, params: unknown[]): Promise<string[]> =>
    h.database.owner.transaction(async (tx) => {
      // As the service's connections plan: prepared statements generic, the others for their values (db/postgres.ts).
      await tx.query(`SET LOCAL plan_cache_mode = ${prepared ? 'force_generic_plan' : 'force_custom_plan'}`);
      await tx.query(`PREPARE idle_look AS ${text}`);
      const [row] = await tx.query<{ 'QUERY PLAN': Array<{ Plan: unknown }> }>(
        `EXPLAIN (FORMAT JSON) EXECUTE idle_look${params.length ? `(${params.map((p) => (typeof p === 'number' ? String(p) : `'${String(p)}'`)).join(', ')})` : ''}`,
      );
      await tx.query('DEALLOCATE idle_look');
      return seqScans(row!['QUERY PLAN'][0]!.Plan);
    });
  const genericPlanScans = planScans(true);
  /** As a statement planned per call is: for the values it is given. */
  const customPlanScans = planScans(false);

  const statement = (name: string) => {
    const s = declaredStatements().get(name);
    assert.ok(s, `${name} is declared`);
    return s.text;
  };

  test('the EXISTS form scans audit_log from its start (the control: the table is big enough)', async () => {
    const exists = 'SELECT EXISTS (SELECT 1 FROM audit_log WHERE (xact_id, id) > ($1::xid8, $2::bigint)) AS waiting';
    assert.deepEqual(await genericPlanScans(exists, ['999999999', 1]), ['audit_log']);
  });

  test("the sealer's, the relay's and the webhook's looks read no big table from its start", async () => {
    const [now] = await h.database.owner.query<{ xmax: string }>('SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS xmax');
    // Caught up: the lower snapshot is a moment ago, nothing running then.
    for (const reader of ['audit-reader', 'outbox-reader']) {
      assert.deepEqual(await customPlanScans(statement(`${reader}.committedAfterSnapshot`), ['{}', now!.xmax, xactCeiling(now!.xmax), 500]), [], reader);
    }
    assert.deepEqual(await genericPlanScans(statement('evidence.lastBatch'), []), []);
    assert.deepEqual(await genericPlanScans(statement('outbox.lastBatch'), []), []);
    // The cursor table is one row (a scan of it is its lookup); the seal and the checkpoints are read by their keys.
    assert.deepEqual(await genericPlanScans(statement('webhook.state'), ['someone', 'http://receiver.test/audit']), ['audit_webhook_cursor']);
  });
});
