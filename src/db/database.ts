// One interface over the two ways Teamlog reaches PostgreSQL: node-postgres (server mode)
// and PGlite (embedded). Services only ever see Queryable / Tx; SQL is always parameterized.

export interface QueryOptions {
  /**
   * Prepare the statement once per connection under this name (PostgreSQL; ignored by
   * PGlite). For hot statements whose plan does not depend on the parameters (key
   * lookups), not for catch-all filters that need a plan per call.
   */
  prepareAs?: string;
}

export interface Queryable {
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[], opts?: QueryOptions): Promise<R[]>;
}

/** A transaction in progress. afterCommit callbacks run once it has committed, never on rollback. */
export interface Tx extends Queryable {
  afterCommit(fn: () => void): void;
}

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

export interface Database extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /** Runs fn inside BEGIN … COMMIT on one connection; rolls back when fn throws. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /** Runs a multi-statement script (migrations). */
  exec(sql: string): Promise<void>;
  poolStats(): PoolStats;
  close(): Promise<void>;
}

/** Shared by both drivers: run fn, commit or roll back, then fire the after-commit hooks. */
export async function runTransaction<T>(
  q: Queryable,
  fn: (tx: Tx) => Promise<T>,
  onAfterCommitError: (err: unknown) => void,
): Promise<T> {
  const hooks: Array<() => void> = [];
  const tx: Tx = {
    query: (sql, params, opts) => q.query(sql, params, opts),
    afterCommit: (hook) => hooks.push(hook),
  };
  await q.query('BEGIN');
  let result: T;
  try {
    result = await fn(tx);
  } catch (err) {
    try {
      await q.query('ROLLBACK');
    } catch {
      // The connection is already broken; the caller's error is the one worth reporting.
    }
    throw err;
  }
  await q.query('COMMIT');
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
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|connection is closed/i.test(msg);
}

export function pgErrorCode(err: unknown): string | undefined {
  if (err && typeof err === 'object' && typeof (err as { code?: unknown }).code === 'string') {
    return (err as { code: string }).code;
  }
  return undefined;
}
