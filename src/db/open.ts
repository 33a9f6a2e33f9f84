// Opens the configured database and brings its schema up to date: PGlite under DATA_DIR when
// DATABASE_URL is unset, else PostgreSQL, where the service runs as the restricted role.
import path from 'node:path';
import type { Config } from '../config.js';
import type { Database } from './database.js';
import { databaseSession, migrate, migrateAtStart } from './migrate.js';
import { createPgliteDatabase } from './pglite.js';
import { APP_ROLE, createPostgresDatabase } from './postgres.js';

export async function openDatabase(config: Config, onError: (err: unknown) => void): Promise<Database> {
  if (config.databaseUrl) {
    await migrateAtStart(config.databaseUrl, config.migrationDatabaseUrl);
    return createPostgresDatabase({ url: config.databaseUrl, poolSize: config.databasePoolSize, role: APP_ROLE, onError });
  }
  const db = await createPgliteDatabase(path.join(config.dataDir, 'pglite'), onError);
  await migrate(databaseSession(db));
  return db;
}

/**
 * A service that logs in as a superuser can SET ROLE NONE out of teamlog_app and past the
 * audit log's privileges (the triggers still hold). Fine for a laptop, not for production:
 * the start-up log says so.
 */
export async function superuserLoginWarning(db: Database): Promise<string | undefined> {
  if (db.kind !== 'postgres') return undefined;
  const rows = await db.query<{ login: string; superuser: boolean }>(
    'SELECT session_user AS login, rolsuper AS superuser FROM pg_roles WHERE rolname = session_user',
  );
  const row = rows[0];
  if (!row?.superuser) return undefined;
  return (
    `DATABASE_URL logs in as the superuser "${row.login}": the service runs as teamlog_app, but a superuser login ` +
    'could leave that role. In production use a login that is only a member of teamlog_app (docs/operations.md, "Running on PostgreSQL").'
  );
}
