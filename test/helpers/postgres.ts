// The tests' PostgreSQL server: where it is, a database's URL on it, and a superuser's statement
// on its maintenance database (CREATE or DROP DATABASE, roles). A module of its own, with no
// import of the app, so that scripts (helpers/template.ts) use it without loading the service.
import pg from 'pg';

export const PG_BASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** The owner's URL of database `name` on the tests' server (or on `base`). */
export const databaseUrl = (name: string, base: string = PG_BASE_URL): string => Object.assign(new URL(base), { pathname: `/${name}` }).toString();

/** Runs `fn` with a connection of its own to the server's maintenance database, closed after. */
export async function withAdminClient<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: PG_BASE_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** One superuser statement on the maintenance database (names in it are generated, never input). */
export const adminQuery = async (sql: string): Promise<void> => void (await withAdminClient((c) => c.query(sql)));
