import { mkdirSync } from 'node:fs';
import { PGlite, types } from '@electric-sql/pglite';
import type { Database, Tx } from './database.js';
import { runTransaction } from './database.js';
import { SESSION_SETTINGS, isoTimestamp } from './timestamps.js';

/**
 * PGlite has exactly one connection. A transaction holds it from BEGIN to COMMIT, so every
 * statement (inside a transaction or not) waits its turn on this mutex; without it two
 * requests would interleave their statements inside each other's transactions.
 */
class Mutex {
  private tail: Promise<void> = Promise.resolve();
  waiting = 0;
  held = false;
  /** Everything that asked for the connection so far. */
  runs = 0;

  async run<T>(fn: () => Promise<T>): Promise<T> {
    this.runs++;
    const previous = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((resolve) => (release = resolve));
    this.waiting++;
    await previous;
    this.waiting--;
    this.held = true;
    try {
      return await fn();
    } finally {
      this.held = false;
      release();
    }
  }
}

/**
 * bytea as a Buffer, as node-postgres gives it, decoded by Buffer (native code). PGlite's own
 * parser decodes the hex text with a parseInt per byte, on the thread that runs the service: a
 * page of the verifier's tile reads held requests back many times longer that way
 * (docs/performance.md, "Audit scans off the request path").
 * bytea_output is `hex` unless someone sets it otherwise: anything else goes to PGlite's parser.
 */
const parseBytea = (v: string): unknown => (v.startsWith('\\x') ? Buffer.from(v.slice(2), 'hex') : types.parsers[types.BYTEA]!(v, types.BYTEA));

/** A PGlite database; `dump` archives its data directory (a test suite's migrated template). */
export interface PgliteDatabase extends Database {
  dump(): Promise<Blob>;
}

/**
 * dataDir undefined = in memory (tests). `loadDataDir`: start from an archive `dump` made, instead
 * of an empty cluster (the tests' migrated template: one migration per test run, not per file).
 */
export async function createPgliteDatabase(dataDir: string | undefined, onError: (err: unknown) => void, opts: { loadDataDir?: Blob } = {}): Promise<PgliteDatabase> {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  const pg = new PGlite({
    dataDir,
    loadDataDir: opts.loadDataDir,
    parsers: { [types.INT8]: (v: string) => Number(v), [types.TIMESTAMPTZ]: isoTimestamp, [types.BYTEA]: parseBytea },
  });
  await pg.waitReady;
  for (const [name, value] of Object.entries(SESSION_SETTINGS)) await pg.query('SELECT set_config($1, $2, false)', [name, value]);
  const mutex = new Mutex();
  const direct = {
    query: async <R>(sql: string, params?: readonly unknown[]) =>
      (await pg.query<R>(sql, params as unknown[] | undefined)).rows,
  };
  let closed = false;

  return {
    kind: 'pglite',
    query: <R>(sql: string, params?: readonly unknown[]) => mutex.run(() => direct.query<R>(sql, params)),
    transaction: <T>(fn: (tx: Tx) => Promise<T>) => mutex.run(() => runTransaction(direct, fn, onError, false)),
    exec: (sql: string) => mutex.run(async () => void (await pg.exec(sql))),
    poolStats: () => ({ total: 1, idle: mutex.held ? 0 : 1, waiting: mutex.waiting, runs: mutex.runs }),
    dump: () => mutex.run(() => pg.dumpDataDir('none')),
    close: async () => {
      if (closed) return;
      closed = true;
      await mutex.run(() => pg.close());
    },
  };
}
