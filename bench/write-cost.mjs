// What a run of write requests cost PostgreSQL, per request (bench/run.mjs, server mode): WAL
// bytes, heap inserts, heap updates (HOT ones apart) and index entries. Throughput on this VM
// drifts from minute to minute; what a request writes does not, so it says what a change to the
// write path bought where req/s cannot.
//
// WAL: pg_current_wal_lsn() before and after the measured run. The position is the cluster's,
// and tests of other databases may be writing on the same server, so the WAL records of other
// databases in between are read back with pg_walinspect (PostgreSQL 15+) and taken out: a
// record belongs to the database in its block references, or else to its transaction's. What
// is left includes the background work the requests caused in that time (the sealer's and the
// relay's batches, a signed checkpoint): the honest cost of a request.
// Tuples: the deltas of pg_stat_user_tables over the server's database.
// Index entries (an estimate): each table's inserted and non-HOT-updated tuples times its number
// of indexes; a HOT update adds none, every other new tuple one per index (partial ones too).
import { sleep, withClient } from './lib.mjs';


// A backend reports its table counters when it goes idle, but at most once a second: what it
// counted within a second of its last report waits for the idle timeout, 10 s (PostgreSQL 15's
// PGSTAT_IDLE_INTERVAL). Read 1.5 s after a run, the counters missed a sixth of its inserts (a
// bare insert app's pool: 5,808 of the 6,513 rows there were; all of them at 11 s). So each
// reading waits 11 s after the last request, by when the sealer and the relay have also
// finished the batches the requests left them.
const STATS_DELAY_MS = 11_000;
// Where the benchmark installs pg_walinspect: a schema of its own, out of the application's way.
const WALINSPECT_SCHEMA = 'bench_wal';

/** Installs pg_walinspect in database `url` (a superuser's work); answers whether it is there. */
export async function installWalInspect(url, log) {
  try {
    await withClient(url, async (c) => {
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${WALINSPECT_SCHEMA}`);
      await c.query(`CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA ${WALINSPECT_SCHEMA}`);
    });
    return true;
  } catch (err) {
    log(`write cost: no pg_walinspect (${err.message}); WAL figures are the whole cluster's`);
    return false;
  }
}

/** The counters of database `url` at rest: its WAL position, its oid, and each table's tuple counters with its number of indexes. */
export async function writeCounters(url) {
  await sleep(STATS_DELAY_MS);
  return withClient(url, async (c) => {
    await c.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await c.query(
      `SELECT pg_current_wal_lsn()::text AS lsn,
              (SELECT oid FROM pg_database WHERE datname = current_database())::text AS db_oid,
              (SELECT COALESCE(json_object_agg(s.schemaname || '.' || s.relname, json_build_object(
                        'ins', s.n_tup_ins, 'upd', s.n_tup_upd, 'hot_upd', s.n_tup_hot_upd,
                        'indexes', (SELECT count(*) FROM pg_index i WHERE i.indrelid = s.relid))), '{}')
                 FROM pg_stat_user_tables s) AS tables`,
    );
    return rows[0];
  });
}

/** Byte offset of a WAL position ('16/B374D848'); exact below 2^53 bytes. */
const lsnBytes = (lsn) => {
  const [hi, lo] = lsn.split('/');
  return parseInt(hi, 16) * 2 ** 32 + parseInt(lo, 16);
};

/**
 * The WAL records between two positions, read back with pg_walinspect: the bytes other
 * databases' work wrote, and this database's bytes by what they wrote to (a relation by its
 * relfilenode, or a record with no block, as "resource manager:record type": commits,
 * multixacts); null when the WAL cannot be read (not installed, or recycled meanwhile).
 */
async function walByDatabase(inspectUrl, from, to, dbOid) {
  if (!inspectUrl) return null;
  try {
    return await withClient(inspectUrl, async (c) => {
      const { rows } = await c.query(
        `WITH r AS (
           SELECT xid::text AS xid, record_length, resource_manager || ':' || record_type AS kind,
                  substring(block_ref FROM 'rel \\d+/(\\d+)/')::oid AS db,
                  substring(block_ref FROM 'rel \\d+/\\d+/(\\d+)')::oid AS relfile
             FROM ${WALINSPECT_SCHEMA}.pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)
         ), xact AS (
           SELECT xid, min(db) AS db FROM r WHERE xid <> '0' AND db <> 0 GROUP BY xid
         ), owned AS (
           SELECT r.*, COALESCE(NULLIF(r.db, 0), x.db) AS owner FROM r LEFT JOIN xact x ON x.xid = r.xid AND r.xid <> '0'
         )
         SELECT CASE WHEN owner <> $3::oid THEN 'other' WHEN relfile IS NULL THEN kind ELSE relfile::text END AS what,
                sum(record_length)::float8 AS bytes
           FROM owned GROUP BY 1`,
        [from, to, dbOid],
      );
      const others = rows.find((row) => row.what === 'other')?.bytes ?? 0;
      return { others, mine: rows.filter((row) => row.what !== 'other') };
    });
  } catch {
    return null;
  }
}

/** `mine` (walByDatabase) with each relfilenode named by database `url`'s catalog. */
async function namedWal(url, mine) {
  const names = await withClient(url, async (c) =>
    new Map((await c.query(`SELECT relfilenode::text AS file, relname FROM pg_class WHERE relfilenode <> 0`)).rows.map((row) => [row.file, row.relname])),
  );
  const byName = new Map();
  for (const { what, bytes } of mine) {
    const name = /^\d+$/.test(what) ? (names.get(what) ?? `relfilenode ${what}`) : what;
    byName.set(name, (byName.get(name) ?? 0) + bytes);
  }
  return byName;
}

/** Each table's counter deltas between two readings, for the tables that moved. */
function tableDeltas(before, after) {
  const moved = {};
  for (const [name, a] of Object.entries(after.tables)) {
    const b = before.tables[name] ?? { ins: 0, upd: 0, hot_upd: 0 };
    const d = { ins: a.ins - b.ins, upd: a.upd - b.upd, hot_upd: a.hot_upd - b.hot_upd, indexes: a.indexes };
    if (d.ins || d.upd) moved[name] = d;
  }
  return moved;
}

/**
 * The write cost per request of `requests` requests between two readings (writeCounters) of
 * database `url`; `inspectUrl`: the database pg_walinspect is installed in (none: WAL is the cluster's).
 * `requests`: those the server completed, autocannon's `sent` (the ones still in flight when a
 * run stops are answered after it; a bare insert app wrote exactly `sent` rows).
 */
export async function writeCost(url, before, after, requests, inspectUrl) {
  const per = (n) => (requests > 0 && n !== null ? Number((n / requests).toFixed(2)) : null);
  const cluster = lsnBytes(after.lsn) - lsnBytes(before.lsn);
  const wal = await walByDatabase(inspectUrl, before.lsn, after.lsn, after.db_oid);
  const others = wal?.others ?? null;
  // What each relation's WAL was, per request, largest first: where a write's WAL goes.
  const byRelation = wal ? [...(await namedWal(url, wal.mine))].map(([name, bytes]) => [name, Math.round(per(bytes))]).sort((a, b) => b[1] - a[1]) : null;
  const tables = tableDeltas(before, after);
  const sum = (f) => Object.values(tables).reduce((acc, d) => acc + f(d), 0);
  return {
    requests,
    wal_bytes: Math.round(per(cluster - (others ?? 0))),
    wal_bytes_cluster: Math.round(per(cluster)),
    wal_bytes_other_databases: others === null ? null : Math.round(per(others)),
    heap_inserts: per(sum((d) => d.ins)),
    heap_updates: per(sum((d) => d.upd)),
    hot_updates: per(sum((d) => d.hot_upd)),
    index_entries_est: per(sum((d) => (d.ins + d.upd - d.hot_upd) * d.indexes)),
    wal_bytes_by_relation: byRelation && Object.fromEntries(byRelation),
    tables,
  };
}

/** One line of figures per request, for the log. */
export const writeCostText = (w) => {
  const others = w.wal_bytes_other_databases === null ? ' (other databases\' not told apart)' : w.wal_bytes_other_databases > 0 ? ` (other databases' ${w.wal_bytes_other_databases} B left out)` : '';
  return `WAL ${w.wal_bytes} B${others}, heap inserts ${w.heap_inserts}, updates ${w.heap_updates} (HOT ${w.hot_updates}), index entries ≈ ${w.index_entries_est}`;
};
