// One interface over the two ways Teamlog reaches PostgreSQL: node-postgres (server mode)
// and PGlite (embedded). Services only ever see Queryable / Tx; SQL is always parameterized.

export interface QueryOptions {
  /**
   * Prepare the statement once per connection under this name (PostgreSQL; ignored by
   * PGlite): parsed and planned once, with one generic plan for every value (postgres.ts).
   * Only for hot statements of a fixed text whose best plan does not depend on the values:
   * key lookups, inserts, list filters backed by an index (conditions.ts). A name must
   * always go with the same text.
   */
  prepareAs?: string;
  /**
   * A short key lookup outside a transaction (with prepareAs): it runs on a shared pipelined
   * connection (lookup-lanes.ts), answered in order with other requests' lookups, instead of
   * checking a connection out of the pool. Never for a statement that may run long: everything
   * queued behind it on its lane waits.
   */
  lookup?: boolean;
  /**
   * The statement only reads and locks: run again with the same values in the same transaction,
   * it answers the same rows and changes nothing. Runs that share a transaction (a batch,
   * db/shared-transaction.ts) then share one execution of it.
   */
  shareable?: boolean;
  /**
   * A one-row insert with a many-row form (statements.ts `gathered`): runs that share a
   * transaction (a batch) and send it in the same turn of the event loop send one statement
   * for all their rows, each run answered with its own.
   */
  gather?: GatheredForm;
}

/** The many-row form of a one-row statement: its i-th parameter an array of every row's i-th value; it answers each row with its `ord` (1-based). */
export interface GatheredForm {
  name: string;
  text: string;
}

export interface Queryable {
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[], opts?: QueryOptions): Promise<R[]>;
}

/** A transaction in progress. afterCommit callbacks run once it has committed, never on rollback. */
export interface Tx extends Queryable {
  /**
   * Sends a statement whose answer the use case does not need (an audit record, an outbox
   * row) without waiting for it. On PostgreSQL it travels pipelined behind the statements
   * before it, so it costs no round trip of its own; on PGlite it runs in turn. Every sent
   * statement is settled before COMMIT: if one fails, the transaction rolls back and
   * transaction() throws that statement's error, exactly as if it had been awaited.
   */
  send(sql: string, params?: readonly unknown[], opts?: QueryOptions): void;
  afterCommit(fn: () => void): void;
}

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
  /**
   * PGlite: statements and transactions that have taken its one connection so far, whoever ran
   * them; a background job tells from it whether the service used the database meanwhile
   * (db/thread-queries.ts).
   */
  runs?: number;
}

export interface TransactionOptions {
  /**
   * Plan every statement for its values, prepared ones included (PostgreSQL; PGlite always
   * does): for the background loops, whose reads' best plan depends on where the consumer
   * stands (db/commit-order.ts), and which run a few times a second, not per request.
   */
  planEachStatement?: boolean;
}

/** What another thread needs to open connections of its own to a PostgreSQL database, as the service's own connections open them. */
export interface PostgresAccess {
  url: string;
  role?: string;
  connectionLifetimeMs?: number;
}

export interface Database extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /**
   * How a worker thread of this process reaches the same database with connections of its own
   * (audit scans: modules/audit/evidence/scan.pool.ts). None on PGlite, whose one connection
   * lives in this thread: a worker's statements come here (db/thread-queries.ts).
   */
  readonly threadAccess?: PostgresAccess;
  /** Runs fn inside BEGIN … COMMIT on one connection; rolls back when fn throws. */
  transaction<T>(fn: (tx: Tx) => Promise<T>, opts?: TransactionOptions): Promise<T>;
  /** Runs a multi-statement script (migrations). */
  exec(sql: string): Promise<void>;
  poolStats(): PoolStats;
  /**
   * Calls onNotify with each NOTIFY on `channel` (PostgreSQL: a dedicated connection that
   * reconnects by itself; answers a function that stops listening). onState, if given, hears
   * when the LISTEN is up (true) and when its connection is lost (false): notices sent
   * meanwhile are lost. Undefined on PGlite, whose one process needs no notice between instances.
   */
  listen?(channel: string, onNotify: (payload: string) => void, onState?: (listening: boolean) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/**
 * Shared by both drivers: BEGIN, fn, then COMMIT or ROLLBACK, then the after-commit hooks.
 *
 * `pipelined` (node-postgres in pipeline mode): statements are written without waiting for
 * the answers to the ones before them, and PostgreSQL answers in order. BEGIN then travels
 * with the transaction's first statement, and sent statements (Tx.send) with the next one or
 * with COMMIT, so an audited creation costs two round trips instead of five. Without it
 * (PGlite, in process: no round trips to save) every statement waits for the one before.
 */
export async function runTransaction<T>(
  q: Queryable,
  fn: (tx: Tx) => Promise<T>,
  onAfterCommitError: (err: unknown) => void,
  pipelined: boolean,
): Promise<T> {
  const hooks: Array<() => void> = [];
  // Resolves once every statement sent so far has answered; `failed` keeps the first error.
  let settled: Promise<void> = Promise.resolve();
  let failed: { error: unknown } | undefined;
  const send = (sql: string, params?: readonly unknown[], opts?: QueryOptions) => {
    const answer = pipelined ? q.query(sql, params, opts) : settled.then(() => q.query(sql, params, opts));
    const outcome = answer.then(
      () => undefined,
      (error: unknown) => void (failed ??= { error }),
    );
    settled = Promise.all([settled, outcome]).then(() => undefined);
  };
  const tx: Tx = {
    async query(sql, params, opts) {
      if (!pipelined) await settled;
      return q.query(sql, params, opts);
    },
    send,
    afterCommit: (hook) => hooks.push(hook),
  };

  // BEGIN can only fail with the connection itself, and then so does everything behind it.
  send('BEGIN');
  let result: T;
  try {
    result = await fn(tx);
  } catch (err) {
    // A broken connection fails the ROLLBACK too; the caller's error is the one worth reporting.
    await Promise.allSettled([tx.query('ROLLBACK'), settled]);
    // A sent statement that failed is the cause: the statements after it only saw an aborted transaction.
    throw failed ? failed.error : err;
  }
  const [commit] = await Promise.allSettled([tx.query('COMMIT'), settled]);
  // PostgreSQL answers COMMIT of a transaction aborted by a failed statement with a rollback.
  if (failed) throw failed.error;
  if (commit.status === 'rejected') throw commit.reason;
  for (const hook of hooks) {
    try {
      hook();
    } catch (err) {
      onAfterCommitError(err);
    }
  }
  return result;
}

/** PostgreSQL error codes that mean "the database is not reachable", answered with 503. */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH',
  '57P01', '57P02', '57P03', '08000', '08003', '08006', '08001', '08004', '53300',
]);

export function isUnavailableError(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e.code === 'string' && UNAVAILABLE_CODES.has(e.code)) return true;
  const msg = typeof e.message === 'string' ? e.message : '';
  // node-postgres's own messages: a lost connection; a pool's wait for a free connection past its
  // bound; a connection not opened within its bound (`timeout expired`: a server that accepts and
  // never answers, seen by a lookup lane's or a thread's connection: lookup-lanes.ts, postgres.ts).
  return /Connection terminated|timeout exceeded when trying to connect|^timeout expired$|Client has encountered a connection error|connection is closed/i.test(msg);
}

/**
 * The SQLSTATE of an error the database raised, or undefined. Only an error the server sent
 * counts (both drivers' DatabaseError carry a `severity`): Node's and Fastify's errors carry
 * string codes too (EPIPE, FST_ERR_…), and taking one of those for the database's would
 * misreport a client's mistake as the database's.
 */
export function pgErrorCode(err: unknown): string | undefined {
  if (!err || typeof err !== 'object') return undefined;
  const { code, severity } = err as { code?: unknown; severity?: unknown };
  return typeof code === 'string' && typeof severity === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** The constraint a database error names (a unique or foreign key violation), if any. */
export function pgConstraint(err: unknown): string | undefined {
  const c = err && typeof err === 'object' ? (err as { constraint?: unknown }).constraint : undefined;
  return typeof c === 'string' ? c : undefined;
}
