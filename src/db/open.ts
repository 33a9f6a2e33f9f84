// Opens the configured database and brings its schema up to date: PGlite under DATA_DIR when
// DATABASE_URL is unset, else PostgreSQL, where the service runs as the restricted role.
import path from 'node:path';
import type { Config } from '../config.js';
import type { Database } from './database.js';
import { databaseSession, migrate, migratePostgres } from './migrate.js';
import { createPgliteDatabase } from './pglite.js';
import { APP_ROLE, createPostgresDatabase } from './postgres.js';

export async function openDatabase(config: Config, onError: (err: unknown) => void): Promise<Database> {
  if (config.databaseUrl) {
    await migratePostgres(config.migrationDatabaseUrl ?? config.databaseUrl);
    return createPostgresDatabase({ url: config.databaseUrl, poolSize: config.databasePoolSize, role: APP_ROLE, onError });
  }
  const db = await createPgliteDatabase(path.join(config.dataDir, 'pglite'), onError);
  await migrate(databaseSession(db));
  return db;
}
