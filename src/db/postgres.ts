import type { Writable } from 'node:stream';
import pg from 'pg';
import type { Database, QueryOptions, TransactionOptions, Tx } from './database.js';
import { pgErrorCode, runTransaction } from './database.js';
import { LookupLanes } from './lookup-lanes.js';
import { SESSION_SETTINGS, isoTimestamp } from './timestamps.js';

// Ids are bigint columns but always within 1..2^53-1 (the API's id range), so numbers are exact.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
pg.types.setTypeParser(pg.types.builtins.TIMESTAMPTZ, isoTimestamp);

export const APP_ROLE = 'teamlog_app';

export interface PostgresOptions {
  url: string;
  poolSize: number;
  /**
   * Role assumed for every connection of the service (INSERT and SELECT only on the audit
   * tables). Set through the startup packet, so a connection that may not take the role
   * fails to open instead of silently running with more rights.
   */
  role?: string;
  onError: (err: unknown) => void;
  /** How long a connection serves before it is replaced (CONNECTION_LIFETIME_MS; shorter in tests). */
  connectionLifetimeMs?: number;
  /** Connections that plan each statement for its values; PER_CALL_POOL_SIZE when unsaid. */
  perCallPoolSize?: number;
  /** What pg_stat_activity names the connections: `teamlog` when unsaid. */
  applicationName?: string;
  /**
   * A statement waits for a free connection of its pool as long as it takes, instead of failing
   * after CONNECT_TIMEOUT_MS (answered 503). For a thread whose own reads are all its pool
   * serves, and bounded by its design (an audit scan's blocks read ahead, the sealer's rounds):
   * waiting there is its own backpressure, not an overloaded database. The service's pool keeps
   * the bound: a request that cannot get a connection in time is answered 503, not held.
   */
  waitForConnections?: boolean;
  /** How long a pooled connection may sit idle before it is closed: 30 s when unsaid. */
  idleTimeoutMs?: number;
}

/**
 * How long opening a connection may take. node-postgres's pool also applies it to a statement
 * waiting for a free connection (`timeout exceeded when trying to connect`), unless the pool
 * lets statements wait (PostgresOptions.waitForConnections).
 */
const CONNECT_TIMEOUT_MS = 3000;

/** A client whose connecting alone is bounded, for a pool that lets statements wait for a free connection. */
class BoundedConnectClient extends pg.Client {
  constructor(config: pg.ClientConfig) {
    super({ ...config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  }
}

/**
 * Every connection, the pool's and the lookup lanes', is replaced after this long (once its
 * statements in flight are answered). A prepared statement keeps the generic plan its
 * connection made at its first call (PLAN_SETTINGS), and that plan is only made again when
 * the table's statistics change. A key lookup first run on a table that was then empty, or
 * analyzed while empty, is a sequential scan; with autovacuum off (as on these machines) nothing
 * analyzes the table again, and the scan would stay for the connection's life as the table
 * grows. A new connection plans at the table's size as it is (PostgreSQL reads the table's
 * length, not only its statistics), so such a plan lasts ten minutes at most.
 */
export const CONNECTION_LIFETIME_MS = 10 * 60_000;

/**
 * Pipelined statements issued in one turn of the event loop (BEGIN and the first statement;
 * the audit record, the outbox rows and COMMIT) leave in one write instead of one system
 * call each: the connection's socket is corked at the first and uncorked once the turn's
 * promise callbacks have run. Only batching depends on this; order and correctness do not.
 * node-postgres has no public handle on its socket, hence the guarded look-up.
 */
function writeBatcher(client: pg.PoolClient): () => void {
  const stream = (client as unknown as { connection?: { stream?: Partial<Writable> } }).connection?.stream;
  if (typeof stream?.cork !== 'function' || typeof stream.uncork !== 'function') return () => {};
  const socket = stream as Writable;
  let corked = false;
  return () => {
    if (corked) return;
    corked = true;
    socket.cork();
    process.nextTick(() => {
      corked = false;
      socket.uncork();
    });
  };
}

/**
 * Prepared statements (QueryOptions.prepareAs) keep one generic plan instead of being planned
 * again on every call. PostgreSQL's own choice ('auto') keeps re-planning the list statements,
 * because a `LIMIT $n` makes any generic plan look far costlier than it is, and planning on every
 * call was a large share of PostgreSQL's time on GET /tasks (docs/performance.md, "What the
 * profiles showed"). So only statements whose best plan does not depend on the values are
 * prepared: key lookups, inserts, and list filters backed by an index that orders by id
 * (conditions.ts keeps full-text words and time ranges unprepared).
 * Unnamed statements go to connections that plan them for their values (PER_CALL_PLAN_SETTINGS
 * below); the triggers' PL/pgSQL statements (cached plans too) are key updates, whose generic
 * plan is the custom one.
 *
 * JIT compilation is off: it starts when a plan's estimated cost passes jit_above_cost, which
 * a generic plan over a big table does whatever the LIMIT, and then compiles on every
 * execution, which made the verifier's reads of the seal several times slower
 * (docs/performance.md, "What the profiles showed"); no statement of the service runs long
 * enough to earn back a compilation.
 */
const PLAN_SETTINGS = { plan_cache_mode: 'force_generic_plan', jit: 'off' } as const;

/**
 * PostgreSQL applies force_generic_plan to unnamed statements too: a statement "planned per
 * call" (statements.ts) gets a plan made without its values, from the guesses PostgreSQL makes
 * for a parameter (a third of the table for a range, 1/n_distinct for `= ANY`). So statements
 * without prepareAs, outside a transaction, and the transactions that ask for it
 * (TransactionOptions.planEachStatement: the background loops), run on connections of their
 * own that plan each statement for its values. The commit-order reader's batches read every row
 * of the outbox on a generic plan (db/commit-order.ts).
 */
const PER_CALL_PLAN_SETTINGS = { plan_cache_mode: 'force_custom_plan', jit: 'off' } as const;

/** Connections that plan each statement for its values (PER_CALL_PLAN_SETTINGS): the background loops' and the unprepared reads'. */
export const PER_CALL_POOL_SIZE = 4;

/** Pipelined connections for key lookups, beside the pool (see lookup-lanes.ts). */
export const LOOKUP_LANES = 2;

/**
 * A connection kept for LISTEN: reconnected after a failure (with a pause that grows to 5 s),
 * and told about every NOTIFY on the channel. Notices sent while it was down are lost, so its
 * users also look for themselves now and then (see realtime/dispatcher.ts).
 */
async function listenOn(
  config: pg.ClientConfig,
  channel: string,
  onNotify: (payload: string) => void,
  onError: (err: unknown) => void,
  onState: (listening: boolean) => void = () => {},
) {
  if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`not a channel name: ${channel}`);
  let client: pg.Client | undefined;
  let stopped = false;
  let pause = 100;
  const connect = async (): Promise<void> => {
    if (stopped) return;
    const c = new pg.Client({ ...config, application_name: 'teamlog-listen' });
    c.on('notification', (n) => n.channel === channel && onNotify(n.payload ?? ''));
    c.on('error', (err) => {
      onError(err);
      void c.end().catch(() => {});
    });
    c.on('end', () => {
      if (client === c) {
        client = undefined;
        onState(false);
      }
      if (!stopped) setTimeout(() => void connect(), pause).unref();
    });
    try {
      await c.connect();
      // The channel is a fixed identifier checked above; LISTEN takes no parameters.
      await c.query(`LISTEN ${channel}`);
      // Stopped while this connection was being made: it must not outlive the stop (an open
      // connection keeps the process alive, and would report itself listening).
      if (stopped) {
        await c.end().catch(() => {});
        return;
      }
      client = c;
      pause = 100;
      onState(true);
    } catch (err) {
      onError(err);
      pause = Math.min(pause * 2, 5000);
      await c.end().catch(() => {});
    }
  };
  await connect();
  return async () => {
    stopped = true;
    await client?.end().catch(() => {});
  };
}

export function createPostgresDatabase(opts: PostgresOptions): Database {
  const settings = (plans: Record<string, string>): pg.ClientConfig => ({
    connectionString: opts.url,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    options: [...Object.entries(SESSION_SETTINGS), ...Object.entries(plans), ...(opts.role ? [['role', opts.role]] : [])]
      .map(([k, v]) => `-c ${k}=${v}`)
      .join(' '),
    application_name: opts.applicationName ?? 'teamlog',
  });
  const connection = settings(PLAN_SETTINGS);
  const poolOf = (config: pg.ClientConfig, max: number) => {
    const p = new pg.Pool({
      ...config,
      max,
      idleTimeoutMillis: opts.idleTimeoutMs ?? 30_000,
      maxLifetimeSeconds: (opts.connectionLifetimeMs ?? CONNECTION_LIFETIME_MS) / 1000,
      // Statements are written without waiting for the answers before them (see runTransaction).
      pipeline: true,
      // No bound on the wait for a free connection; connecting itself stays bounded.
      ...(opts.waitForConnections ? { connectionTimeoutMillis: 0, Client: BoundedConnectClient } : {}),
    } as pg.PoolConfig);
    // An idle client losing its connection must not crash the process; the next query reconnects.
    p.on('error', opts.onError);
    return p;
  };
  const pool = poolOf(connection, opts.poolSize);
  const perCallPool = poolOf(settings(PER_CALL_PLAN_SETTINGS), opts.perCallPoolSize ?? PER_CALL_POOL_SIZE);
  const lookups = new LookupLanes(connection, LOOKUP_LANES, opts.onError, opts.connectionLifetimeMs ?? CONNECTION_LIFETIME_MS);

  return {
    kind: 'postgres',
    threadAccess: { url: opts.url, ...(opts.role ? { role: opts.role } : {}), ...(opts.connectionLifetimeMs ? { connectionLifetimeMs: opts.connectionLifetimeMs } : {}) },
    async query<R>(sql: string, params?: readonly unknown[], options?: QueryOptions) {
      const values = params as unknown[] | undefined;
      if (!options?.prepareAs) return (await perCallPool.query(sql, values)).rows as R[];
      if (options.lookup) return lookups.query<R>(options.prepareAs, sql, values);
      return (await pool.query({ name: options.prepareAs, text: sql, values })).rows as R[];
    },
    async transaction<T>(fn: (tx: Tx) => Promise<T>, txOpts?: TransactionOptions) {
      const client = await (txOpts?.planEachStatement ? perCallPool : pool).connect();
      const batch = writeBatcher(client);
      let broken: Error | undefined;
      // A checked-out client is no longer watched by the pool: a connection lost mid-transaction
      // is emitted as 'error' on the client, and an 'error' nobody listens to ends the process.
      // Its queries fail with it, and the client is destroyed on release.
      const onLost = (err: Error) => {
        broken = err;
        opts.onError(err);
      };
      client.on('error', onLost);
      try {
        return await runTransaction(
          {
            query: async <R>(sql: string, params?: readonly unknown[], opts?: QueryOptions) => {
              try {
                batch();
                const values = params as unknown[] | undefined;
                const res = opts?.prepareAs ? await client.query({ name: opts.prepareAs, text: sql, values }) : await client.query(sql, values);
                return res.rows as R[];
              } catch (err) {
                // An error the server sent leaves the connection usable; any other does not.
                if (pgErrorCode(err) === undefined) broken = err as Error;
                throw err;
              }
            },
          },
          fn,
          opts.onError,
          true,
        );
      } finally {
        client.off('error', onLost);
        // A client whose socket failed is destroyed rather than returned to the pool.
        client.release(broken);
      }
    },
    async exec(sql: string) {
      await pool.query(sql);
    },
    poolStats: () => ({
      total: pool.totalCount + perCallPool.totalCount,
      idle: pool.idleCount + perCallPool.idleCount,
      waiting: pool.waitingCount + perCallPool.waitingCount,
    }),
    listen: (channel, onNotify, onState) => listenOn(connection, channel, onNotify, opts.onError, onState),
    close: async () => {
      await lookups.close();
      await Promise.all([pool.end(), perCallPool.end()]);
    },
  };
}
