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

/** Whether schema_migrations exists yet (creating it is DDL: only an owner's session may). */
async function hasMigrationTable(session: MigrationSession): Promise<boolean> {
  const [row] = await session.query<{ present: boolean }>(`SELECT to_regclass('schema_migrations') IS NOT NULL AS present`);
  return row?.present ?? false;
}

async function appliedChecksums(session: MigrationSession): Promise<Map<string, string>> {
  if (!(await hasMigrationTable(session))) return new Map();
  const rows = await session.query<{ version: string; checksum: string }>('SELECT version, checksum FROM schema_migrations');
  return new Map(rows.map((r) => [r.version, r.checksum]));
}

/**
 * What a migration run would do, read without any right to change the schema: the versioned
 * migrations not applied yet and (server mode) the repeatable scripts whose text changed since
 * they last ran. Empty: the schema is current, and a service may start as the restricted role.
 */
export async function pendingMigrations(session: MigrationSession): Promise<string[]> {
  const { versioned, repeatable } = readMigrations();
  const applied = await appliedChecksums(session);
  const pending: string[] = [];
  for (const m of versioned) {
    const known = applied.get(m.version);
    if (known === undefined) pending.push(m.version);
    else if (known !== m.checksum) throw new Error(`migration ${m.version} was changed after it was applied`);
  }
  if (session.kind === 'postgres') {
    for (const r of repeatable) if (pending.length > 0 || applied.get(r.version) !== r.checksum) pending.push(r.version);
  }
  return pending;
}

export async function migrate(session: MigrationSession): Promise<string[]> {
  const { versioned, repeatable } = readMigrations();
  if (session.kind === 'postgres') await session.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  try {
    if (!(await hasMigrationTable(session))) {
      await session.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    }
    const applied = await appliedChecksums(session);
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
    // A repeatable script (the privileges) runs when its text changed or a migration ran (its
    // grants cover the tables that migration added), and its checksum is kept beside theirs:
    // so a start on a current schema changes nothing, and needs no right to.
    if (session.kind === 'postgres') {
      for (const r of repeatable) {
        if (done.length === 0 && applied.get(r.version) === r.checksum) continue;
        await session.exec('BEGIN');
        try {
          await session.exec(r.sql);
          await session.query(
            `INSERT INTO schema_migrations (version, checksum) VALUES ($1, $2)
             ON CONFLICT (version) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()`,
            [r.version, r.checksum],
          );
          await session.exec('COMMIT');
        } catch (err) {
          await session.exec('ROLLBACK');
          throw new Error(`${r.version} failed: ${(err as Error).message}`, { cause: err });
        }
        done.push(r.version);
      }
    }
    return done;
  } finally {
    if (session.kind === 'postgres') await session.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
  }
}

/** Runs `fn` in a session of its own on PostgreSQL at `url`. */
async function withPostgresSession<T>(url: string, fn: (session: MigrationSession) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'teamlog-migrate' });
  await client.connect();
  try {
    return await fn({
      kind: 'postgres',
      exec: async (sql) => void (await client.query(sql)),
      query: async <R>(sql: string, params?: unknown[]) => (await client.query(sql, params)).rows as R[],
    });
  } finally {
    await client.end();
  }
}

export const migratePostgres = (url: string): Promise<string[]> => withPostgresSession(url, migrate);

/** Thrown when migrations are pending and the login at hand may not apply them. */
export class MigrationRightsError extends Error {}

/**
 * Brings the schema up to date at start. A current schema is left alone: nothing is run, so a
 * service that logs in as the restricted role starts without any right to change it. Pending
 * migrations are applied with MIGRATION_DATABASE_URL (the owner) when it is set apart from
 * DATABASE_URL, else tried with DATABASE_URL; a login that may not apply them stops the start
 * with a message that says what to do.
 */
export async function migrateAtStart(databaseUrl: string, ownerUrl: string | undefined): Promise<string[]> {
  if (ownerUrl && ownerUrl !== databaseUrl) return migratePostgres(ownerUrl);
  const pending = await withPostgresSession(databaseUrl, pendingMigrations);
  if (pending.length === 0) return [];
  try {
    return await migratePostgres(databaseUrl);
  } catch (err) {
    const code = ((err as Error).cause as { code?: string } | undefined)?.code ?? (err as { code?: string }).code;
    // 42501 insufficient_privilege (also "must be owner of …")
    if (code !== '42501') throw err;
    throw new MigrationRightsError(
      `${pending.length} migration${pending.length === 1 ? ' is' : 's are'} pending (${pending.join(', ')}) and the login of DATABASE_URL may not apply ${pending.length === 1 ? 'it' : 'them'} ` +
        `(${(err as Error).message}). Apply them as the database's owner before starting, with MIGRATION_DATABASE_URL=postgres://<owner>@…/<database> npx teamlog migrate, ` +
        'or set MIGRATION_DATABASE_URL to the owner\'s URL for this start.',
      { cause: err },
    );
  }
}

/** PGlite has one connection, so the database itself is the session. */
export function databaseSession(db: Database): MigrationSession {
  return { kind: db.kind, exec: (sql) => db.exec(sql), query: (sql, params) => db.query(sql, params) };
}
