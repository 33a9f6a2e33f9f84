// Statements of a worker thread run on this thread's database: for PGlite, whose one connection
// lives in the main thread (a worker on PostgreSQL opens connections of its own instead:
// Database.threadAccess). The worker holds a Queryable that posts each statement to the main
// thread, which runs it and posts back its rows or its error, across the threads' message
// channel (worker_threads: structured clone). Used by the audit scans (modules/audit/evidence/scan.pool.ts).
import type { Database, Queryable, QueryOptions } from './database.js';

export interface QueryRequest {
  type: 'query';
  qid: number;
  sql: string;
  params: readonly unknown[] | undefined;
  opts: QueryOptions | undefined;
}

export interface QueryAnswer {
  type: 'rows';
  qid: number;
  rows?: unknown[];
  error?: WireError;
}

/** An error as it crosses threads: its message, name, stack and own fields (a database error's code and severity, a domain error's kind). */
export interface WireError {
  message: string;
  name: string;
  stack?: string;
  fields: Record<string, unknown>;
}

/** An error as data that survives a structured clone, the fields that classify it included (pgErrorCode, isUnavailableError). */
export function errorToWire(err: unknown): WireError {
  if (!(err instanceof Error)) return { message: String(err), name: 'Error', fields: {} };
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(err)) {
    if (value === undefined || typeof value === 'function') continue;
    try {
      fields[key] = structuredClone(value);
    } catch {
      // Not cloneable (a socket, say): left out.
    }
  }
  return { message: err.message, name: err.name, ...(err.stack ? { stack: err.stack } : {}), fields };
}

/** An Error with the wire error's message, name, stack and fields. */
export function errorFromWire(wire: WireError): Error {
  const err = new Error(wire.message);
  Object.assign(err, wire.fields);
  err.name = wire.name;
  if (wire.stack) err.stack = wire.stack;
  return err;
}

/**
 * A Uint8Array as a Buffer over the same bytes: what a Buffer becomes once cloned across threads,
 * made a Buffer again, as the code that reads bytea columns expects (toString('base64'), equals).
 */
export const asBuffer = (v: Uint8Array): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);

function revive(value: unknown): unknown {
  if (value instanceof Uint8Array) return Buffer.isBuffer(value) ? value : asBuffer(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (v instanceof Uint8Array || (typeof v === 'object' && v !== null)) value[i] = revive(v);
    }
  }
  return value;
}

/** Rows as they arrive from another thread: their byte values Buffers again (one level of arrays in: bytea[] columns). */
function reviveRows(rows: unknown[]): unknown[] {
  for (const row of rows as Array<Record<string, unknown>>) {
    for (const key in row) {
      const v = row[key];
      if (v instanceof Uint8Array || Array.isArray(v)) row[key] = revive(v);
    }
  }
  return rows;
}

/**
 * The main thread's side: runs the workers' statements on `db`, one at a time, as a background
 * job that gives way to the service's own. PGlite runs a statement on this thread, start to end:
 * while it runs no request is even read, so none can be seen waiting for the database the moment
 * it ends. The server lets the event loop run for PROBE_MS after each statement, and if the
 * service took the database meanwhile (PoolStats.runs; or someone holds it or waits for it), the
 * next statement waits until `(1 − share) ÷ share` times as long as this one took has passed; if
 * not, it goes at once. So the workers take at most `share` of this thread while requests come,
 * and nearly all of it while none do. (Whether the event loop was busy would not tell: relaying an
 * export's output to its client keeps it busy too.)
 */
export function createQueryServer(db: Database, share: number) {
  const queue: Array<{ request: QueryRequest; post: (answer: QueryAnswer) => void }> = [];
  let running = false;
  let notBefore = 0;
  let timer: NodeJS.Timeout | undefined;

  const pump = (): void => {
    if (running || timer || queue.length === 0) return;
    const wait = notBefore - performance.now();
    if (wait > 0) {
      timer = setTimeout(() => {
        timer = undefined;
        pump();
      }, wait);
      return;
    }
    const { request, post } = queue.shift()!;
    running = true;
    const started = performance.now();
    const params = request.params?.map((p) => (p instanceof Uint8Array ? asBuffer(p) : p));
    db.query(request.sql, params, request.opts)
      .then(
        (rows) => post({ type: 'rows', qid: request.qid, rows }),
        (err: unknown) => post({ type: 'rows', qid: request.qid, error: errorToWire(err) }),
      )
      .finally(() => {
        const ended = performance.now();
        const runsThen = db.poolStats().runs;
        running = false;
        timer = setTimeout(() => {
          timer = undefined;
          const now = db.poolStats();
          const serviceUsedIt = (now.runs !== undefined && runsThen !== undefined && now.runs > runsThen) || now.waiting > 0 || now.idle === 0;
          notBefore = nextStatementAt(started, ended, share, serviceUsedIt);
          pump();
        }, PROBE_MS);
      });
  };

  return {
    answer(request: QueryRequest, post: (answer: QueryAnswer) => void): void {
      queue.push({ request, post });
      pump();
    },
    close(): void {
      clearTimeout(timer);
      timer = undefined;
      queue.length = 0;
    },
  };
}

/**
 * When the workers' next statement may start (performance.now() ms), after one that ran from
 * `started` to `ended`: at once if the service left the database alone meanwhile; else once the
 * service has had `(1 − share) ÷ share` times that statement's time, so that the workers take at
 * most `share` of the thread.
 */
export function nextStatementAt(started: number, ended: number, share: number, serviceUsedIt: boolean): number {
  return serviceUsedIt ? ended + ((ended - started) * (1 - share)) / share : ended;
}

/**
 * How long the event loop runs between two of the workers' statements, ms: requests read
 * meanwhile reach the database. (A timer of 1 ms: a longer one slowed a lone export on PGlite;
 * docs/performance.md, "Audit scans off the request path".)
 */
const PROBE_MS = 1;

export type QueryServer = ReturnType<typeof createQueryServer>;

/**
 * The worker's side: a Queryable whose statements go to the main thread through `post`;
 * `settle` takes each answer, `failAll` fails what is still waiting (the thread is going).
 */
export function remoteQueryable(post: (request: QueryRequest) => void) {
  let next = 0;
  const waiting = new Map<number, { resolve: (rows: unknown[]) => void; reject: (err: Error) => void }>();
  const db: Queryable = {
    query<R>(sql: string, params?: readonly unknown[], opts?: QueryOptions): Promise<R[]> {
      const qid = ++next;
      return new Promise<R[]>((resolve, reject) => {
        waiting.set(qid, { resolve: resolve as (rows: unknown[]) => void, reject });
        post({ type: 'query', qid, sql, params, opts });
      });
    },
  };
  return {
    db,
    settle(answer: QueryAnswer): void {
      const w = waiting.get(answer.qid);
      if (!w) return;
      waiting.delete(answer.qid);
      if (answer.error) w.reject(errorFromWire(answer.error));
      else w.resolve(reviveRows(answer.rows ?? []));
    },
    failAll(err: Error): void {
      for (const w of waiting.values()) w.reject(err);
      waiting.clear();
    },
  };
}
