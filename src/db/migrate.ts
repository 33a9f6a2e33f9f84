// Versioned migrations (migrations/NNNN_name.sql, applied once, in order, each in its own
// transaction, with a checksum so an edited migration is caught) plus repeatable scripts
// (migrations/R__name.sql, server mode only: privileges). The same files serve PGlite and
// PostgreSQL.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Database } from './database.js';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

/** One database session: migrations need the same connection from lock to unlock. */
export interface MigrationSession {
  kind: 'pglite' | 'postgres';
  exec(sql: string): Promise<void>;
  query<R>(sql: string, params?: unknown[]): Promise<R[]>;
}

// Arbitrary, fixed: serializes migration runs of instances starting together.
const MIGRATION_LOCK = 7_245_001;

interface MigrationFile {
  version: string;
  sql: string;
  checksum: string;
}

function readMigrations(): { versioned: MigrationFile[]; repeatable: MigrationFile[] } {
  const files = readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql')).sort();
  const load = (f: string): MigrationFile => {
    const sql = readFileSync(MIGRATIONS_DIR + f, 'utf8');
    return { version: f.replace(/\.sql$/, ''), sql, checksum: createHash('sha256').update(sql).digest('hex') };
  };
  return {
    versioned: files.filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).map(load),
    repeatable: files.filter((f) => f.startsWith('R__')).map(load),
  };
}

export async function migrate(session: MigrationSession): Promise<string[]> {
  const { versioned, repeatable } = readMigrations();
  if (session.kind === 'postgres') await session.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  try {
    await session.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const applied = new Map(
      (await session.query<{ version: string; checksum: string }>('SELECT version, checksum FROM schema_migrations')).map(
        (r) => [r.version, r.checksum],
      ),
    );
    const done: string[] = [];
    for (const m of versioned) {
      const known = applied.get(m.version);
      if (known !== undefined) {
        if (known !== m.checksum) throw new Error(`migration ${m.version} was changed after it was applied`);
        continue;
      }
      await session.exec('BEGIN');
      try {
        await session.exec(m.sql);
        await session.query('INSERT INTO schema_migrations (version, checksum) VALUES ($1, $2)', [m.version, m.checksum]);
        await session.exec('COMMIT');
      } catch (err) {
        await session.exec('ROLLBACK');
        throw new Error(`migration ${m.version} failed: ${(err as Error).message}`, { cause: err });
      }
      done.push(m.version);
    }
    if (session.kind === 'postgres') {
      for (const r of repeatable) await session.exec(r.sql);
    }
    return done;
  } finally {
    if (session.kind === 'postgres') await session.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
  }
}

export async function migratePostgres(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url, application_name: 'teamlog-migrate' });
  await client.connect();
  try {
    return await migrate({
      kind: 'postgres',
      exec: async (sql) => void (await client.query(sql)),
      query: async <R>(sql: string, params?: unknown[]) => (await client.query(sql, params)).rows as R[],
    });
  } finally {
    await client.end();
  }
}

/** PGlite has one connection, so the database itself is the session. */
export function databaseSession(db: Database): MigrationSession {
  return { kind: db.kind, exec: (sql) => db.exec(sql), query: (sql, params) => db.query(sql, params) };
}
