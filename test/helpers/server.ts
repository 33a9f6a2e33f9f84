// Starts a real, listening Teamlog on a fresh database: PGlite in memory, or a PostgreSQL
// database created for this server and dropped when it closes (TEST_DB=postgres). The app
// connects exactly as in production (on PostgreSQL: as the restricted teamlog_app role);
// `owner` is a separate superuser connection for the tests' own inspection and sabotage.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../src/config.js';
import { generateEd25519PrivateKeyPem } from '../../src/tlog/signed-note.js';
import type { Database } from '../../src/db/database.js';
import { databaseSession, migrate, migratePostgres } from '../../src/db/migrate.js';
import { createPgliteDatabase } from '../../src/db/pglite.js';
import { APP_ROLE, createPostgresDatabase } from '../../src/db/postgres.js';
import type { Deps } from '../../src/deps.js';
import { ensureFirstAdmin } from '../../src/first-admin.js';
import { createLogger } from '../../src/logger.js';
import type { TestHooks } from '../../src/deps.js';
import { createApp, createDeps } from '../../src/runtime.js';
import type { App } from '../../src/app.js';
import { adminQuery, databaseUrl } from './postgres.js';

export const DB_KIND: 'pglite' | 'postgres' = process.env.TEST_DB === 'postgres' ? 'postgres' : 'pglite';
export const onPostgres = DB_KIND === 'postgres';
/** For `test(name, { skip: needsPostgres }, fn)`: real concurrency and several instances need a server. */
export const needsPostgres: string | false = onPostgres ? false : 'needs PostgreSQL (runs in the PostgreSQL pass)';

export { PG_BASE_URL } from './postgres.js';
/** Redis for the PostgreSQL pass (scripts/test.mjs sets it empty when none answers). */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
/** For `test(name, { skip: needsRedis }, fn)`: shared state across instances needs Redis. */
export const needsRedis: string | false = !onPostgres ? 'needs PostgreSQL and Redis (runs in the PostgreSQL pass)' : TEST_REDIS_URL ? false : 'needs Redis, and none answers';

/**
 * The pass's migrated template (scripts/test.mjs, test/helpers/template.ts): a new database
 * starts as a copy of it. Unset (a file run on its own): each database is migrated from empty.
 */
const PGLITE_TEMPLATE = process.env.TEST_PGLITE_TEMPLATE || undefined;
const POSTGRES_TEMPLATE = process.env.TEST_POSTGRES_TEMPLATE || undefined;
let pgliteTemplate: Blob | undefined;
const pgliteTemplateData = () => (PGLITE_TEMPLATE ? (pgliteTemplate ??= new Blob([readFileSync(PGLITE_TEMPLATE)])) : undefined);

export const ADMIN_EMAIL = 'admin@test.local';
/** The audit checkpoint signing key of every test server (PKCS#8 PEM). */
export const TEST_SIGNING_KEY = generateEd25519PrivateKeyPem();
export const ADMIN_PASSWORD = 'admin-password-1';

export interface TestServer {
  url: string;
  app: App;
  deps: Deps;
  config: Config;
  /** The app's own connection (restricted role on PostgreSQL). */
  db: Database;
  /** Superuser/owner connection for inspecting and sabotaging the database in tests. */
  owner: Database;
  /** Owner connection string of this server's database (PostgreSQL only). */
  databaseUrl: string | undefined;
  /** The database, to start a second instance on it (startTestServer({ database })). */
  database: TestDatabase;
  close(): Promise<void>;
}

/**
 * The environment of a server process (helpers/process.ts) that is another instance of `server`:
 * its PostgreSQL database and Redis keys, its JWT secret, the log's signing key (an instance
 * with another refuses to start: log.identity.ts) and the first ADMIN; no general limit.
 */
export function siblingInstanceEnv(server: TestServer, dataDir: string): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    DATABASE_URL: server.databaseUrl!,
    REDIS_URL: TEST_REDIS_URL,
    REDIS_KEY_PREFIX: `${server.database.name}:`,
    JWT_SECRET: server.config.jwtSecret!,
    AUDIT_SIGNING_KEY: TEST_SIGNING_KEY,
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    RATE_LIMIT_PER_MINUTE: '0',
    LOG_LEVEL: 'warn',
  };
}

export interface TestDatabase {
  /** Unique among the databases of every test file running at once (names Redis keys too). */
  name: string;
  db: Database;
  owner: Database;
  databaseUrl: string | undefined;
  drop(): Promise<void>;
}

export const SERVICE_LOGIN = 'teamlog_test_service';
/** How long the test databases' pools keep an idle connection (createTestDatabase says why). */
const TEST_IDLE_MS = 2000;

/**
 * Creates (once per cluster) the login the tests' services use. Roles are cluster-wide and
 * test files run in parallel, so a concurrent creation or grant is retried.
 */
export async function ensureServiceLogin(): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await adminQuery(`DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${SERVICE_LOGIN}') THEN
          CREATE ROLE ${SERVICE_LOGIN} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
        END IF;
        IF NOT pg_has_role('${SERVICE_LOGIN}', '${APP_ROLE}', 'MEMBER') THEN
          GRANT ${APP_ROLE} TO ${SERVICE_LOGIN};
        END IF;
      END $$`);
      return;
    } catch (err) {
      if (attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 50 * (attempt + 1)));
    }
  }
}

/** A fresh, migrated database: in-memory PGlite, or a new PostgreSQL database. */
export async function createTestDatabase(onError: (err: unknown) => void = () => {}): Promise<TestDatabase> {
  if (!onPostgres) return openTestDatabase({ name: `pglite_${process.pid}_${randomBytes(4).toString('hex')}` }, onError);
  const name = `teamlog_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  // Names are generated here and in scripts/test.mjs, never input.
  await adminQuery(POSTGRES_TEMPLATE ? `CREATE DATABASE ${name} TEMPLATE ${POSTGRES_TEMPLATE}` : `CREATE DATABASE ${name}`);
  const database = await openTestDatabase({ name, databaseUrl: databaseUrl(name) }, onError);
  return {
    ...database,
    async drop() {
      await database.drop();
      await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/**
 * A new DATA_DIR whose PGlite database (DATA_DIR/pglite, where the service opens it: src/db/open.ts)
 * is already migrated, for a spawned server whose test is not about a first start: it opens that
 * database instead of running initdb and every migration. The saving is the PGlite pass's, where
 * the database is a copy of the pass's template (seconds of CPU); the PostgreSQL pass makes no
 * PGlite template, so there this runs initdb and the migrations itself, as the server would have.
 */
export async function migratedDataDir(prefix: string): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const database = await openTestDatabase({ name: path.basename(dir), pgliteDir: path.join(dir, 'pglite') });
  await database.drop();
  return dir;
}

/** Where a test database is: PGlite in a data directory (none: in memory), or an existing PostgreSQL database. */
export interface DatabaseLocation {
  /** Unique among the databases of every test file running at once (names Redis keys too). */
  name: string;
  pgliteDir?: string;
  /** The owner's connection string of an existing PostgreSQL database. */
  databaseUrl?: string;
}

/**
 * A database migrated by this checkout, and the app's and the owner's connections to it: on
 * PostgreSQL the app logs in as a non-superuser that is only a member of teamlog_app, as the
 * README tells production to (a superuser login could SET ROLE NONE out of the role). `drop`
 * closes the connections and leaves the data.
 */
export async function openTestDatabase(where: DatabaseLocation, onError: (err: unknown) => void = () => {}): Promise<TestDatabase> {
  if (where.databaseUrl === undefined) {
    // A directory that already holds a database is opened as it is; a new one starts from the template.
    const fresh = where.pgliteDir === undefined || !existsSync(path.join(where.pgliteDir, 'PG_VERSION'));
    const db = await createPgliteDatabase(where.pgliteDir, onError, { loadDataDir: fresh ? pgliteTemplateData() : undefined });
    try {
      // Nothing pending on a copy of the template: this checks the applied migrations' checksums.
      await migrate(databaseSession(db));
    } catch (err) {
      await db.close();
      throw err;
    }
    return { name: where.name, db, owner: db, databaseUrl: undefined, drop: () => db.close() };
  }
  const url = where.databaseUrl;
  await migratePostgres(url);
  await ensureServiceLogin();
  const serviceUrl = Object.assign(new URL(url), { username: SERVICE_LOGIN, password: '' }).toString();
  // Idle connections closed after 2 s rather than 30: four test files at once, some with two or
  // three instances, kept over 50 connections open and nearly all of them idle; at the default
  // max_connections of 100 a burst on top of that left an audit scan's thread none to open (503).
  const db = createPostgresDatabase({ url: serviceUrl, poolSize: 10, role: APP_ROLE, onError, idleTimeoutMs: TEST_IDLE_MS });
  const owner = createPostgresDatabase({ url, poolSize: 3, onError, idleTimeoutMs: TEST_IDLE_MS });
  let closed = false;
  return {
    name: where.name,
    db,
    owner,
    databaseUrl: url,
    async drop() {
      if (closed) return;
      closed = true;
      await Promise.all([db.close(), owner.close()]);
    },
  };
}

export interface StartOptions {
  /** Extra environment for loadConfig (e.g. TRUST_PROXY, ACCESS_TOKEN_TTL). */
  env?: Record<string, string>;
  /** Reuse an existing database (a second instance on the same data). */
  database?: TestDatabase;
  /** Test hooks the service is wired with (src/deps.ts TestHooks), e.g. shorter webhook timings. */
  hooks?: TestHooks;
}

export async function startTestServer(opts: StartOptions = {}): Promise<TestServer> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-test-'));
  const logLevel = process.env.TEST_LOG_LEVEL ?? 'silent';
  const database = opts.database ?? (await createTestDatabase((err) => createLogger(logLevel).error({ err }, 'db error')));
  const config = loadConfig({
    DATA_DIR: dataDir,
    LOG_LEVEL: logLevel,
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    JWT_SECRET: 'test-secret-'.padEnd(48, 'x'),
    TRUST_PROXY: '127.0.0.1/32,::1/128',
    // scrypt at N=2^10 (64 times less work than the default): the suite creates thousands of users.
    PASSWORD_HASH_COST: '10',
    // One checkpoint key for every server of this process: instances of one database must share it.
    AUDIT_SIGNING_KEY: TEST_SIGNING_KEY,
    // The PostgreSQL pass runs as production does with several instances: with Redis. Keys
    // are per database, so that the servers of one database share them and no other does.
    ...(onPostgres && TEST_REDIS_URL ? { REDIS_URL: TEST_REDIS_URL, REDIS_KEY_PREFIX: `${database.name}:` } : {}),
    ...opts.env,
  });
  const log = createLogger(config.logLevel);
  const deps = createDeps(config, database.db, log, opts.hooks);
  await ensureFirstAdmin(deps);
  const { app } = await createApp(deps);
  try {
    await app.listen({ port: 0, host: '127.0.0.1' });
  } catch (err) {
    // A start refused by the app (e.g. its onReady hooks) must not leave connections open.
    await app.close().catch(() => {});
    if (!opts.database) await database.drop();
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  let closed = false;
  return {
    url: `http://127.0.0.1:${port}`,
    app,
    deps,
    config,
    db: database.db,
    owner: database.owner,
    databaseUrl: database.databaseUrl,
    database,
    async close() {
      if (closed) return;
      closed = true;
      await app.close();
      if (!opts.database) await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
