// The tests' PostgreSQL server: where it is, a database's URL on it, and a superuser's statement
// on its maintenance database (CREATE or DROP DATABASE, roles). A module of its own, with no
// import of the app, so that scripts (helpers/template.ts) use it without loading the service.
import pg from 'pg';

export const PG_BASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** The owner's URL of database `name` on the tests' server (or on `base`). */
export const databaseUrl = (name: string, base: string = PG_BASE_URL): string => Object.assign(new URL(base), { pathname: `/${name}` }).toString();

/** Runs `fn` as the superuser with a connection of its own, closed after: to `database`, or the server's maintenance database. */
export async function withAdminClient<T>(fn: (c: pg.Client) => Promise<T>, database?: string): Promise<T> {
  const c = new pg.Client({ connectionString: database === undefined ? PG_BASE_URL : databaseUrl(database) });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** One superuser statement, on `database` or the maintenance database (names in it are generated, never input); its rows. */
export const adminQuery = <R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, params: unknown[] = [], database?: string): Promise<R[]> =>
  withAdminClient(async (c) => (await c.query<R>(sql, params)).rows, database);
