import pg from 'pg';
import type { Database, QueryOptions, Tx } from './database.js';
import { runTransaction } from './database.js';

// Ids are bigint columns but always within 1..2^53-1 (the API's id range), so numbers are exact.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

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
}

export function createPostgresDatabase(opts: PostgresOptions): Database {
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.poolSize,
    connectionTimeoutMillis: 3000,
    idleTimeoutMillis: 30_000,
    options: opts.role ? `-c role=${opts.role}` : undefined,
    application_name: 'teamlog',
  });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', opts.onError);

  return {
    kind: 'postgres',
    async query<R>(sql: string, params?: readonly unknown[], opts?: QueryOptions) {
      const res = opts?.prepareAs
        ? await pool.query({ name: opts.prepareAs, text: sql, values: params as unknown[] | undefined })
        : await pool.query(sql, params as unknown[] | undefined);
      return res.rows as R[];
    },
    async transaction<T>(fn: (tx: Tx) => Promise<T>) {
      const client = await pool.connect();
      let broken: Error | undefined;
      try {
        return await runTransaction(
          {
            query: async <R>(sql: string, params?: readonly unknown[], opts?: QueryOptions) => {
              try {
                const values = params as unknown[] | undefined;
                const res = opts?.prepareAs ? await client.query({ name: opts.prepareAs, text: sql, values }) : await client.query(sql, values);
                return res.rows as R[];
              } catch (err) {
                if (!(err as { code?: string }).code) broken = err as Error;
                throw err;
              }
            },
          },
          fn,
          opts.onError,
        );
      } finally {
        // A client whose socket failed is destroyed rather than returned to the pool.
        client.release(broken);
      }
    },
    async exec(sql: string) {
      await pool.query(sql);
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: () => pool.end(),
  };
}
