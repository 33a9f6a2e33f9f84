// The `teamlog` CLI as a child process (src/cli, compiled or through tsx: helpers/paths.ts; no build needed),
// with exactly the environment a test gives it: nothing inherited but PATH and HOME, so that a
// developer's own DATABASE_URL or .env never reaches it. useCliDatabase gives a test file the
// data directory and database that the CLI and its test servers share, and runCli on them.
import assert from 'node:assert/strict';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { after, before } from 'node:test';
import { databaseSession, migrate } from '../../src/db/migrate.js';
import { createPgliteDatabase } from '../../src/db/pglite.js';
import { APP_ROLE, createPostgresDatabase } from '../../src/db/postgres.js';
import { loginAdmin, type Session } from './client.js';
import { entryArgs, ROOT } from './paths.js';
import { adminQuery, databaseUrl } from './postgres.js';
import { createTestDatabase, onPostgres, SERVICE_LOGIN, startTestServer, type TestDatabase, type TestServer } from './server.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Variables given as undefined are left out (unset), as a shell would. */
export function runTeamlog(args: string[], env: Record<string, string | undefined>): Promise<CliResult> {
  const given = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
  const child = spawn(process.execPath, [...entryArgs('src/cli'), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...given },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return outcomeOf(child);
}

/** A child process's exit code and everything it printed, once it has closed. */
export function outcomeOf(child: ChildProcessByStdio<null, Readable, Readable>): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** What useCliDatabase sets up: a data directory and a database that a test server and the CLI take turns on. */
export interface CliDatabaseOptions {
  /** The data directory's name prefix (under the system's temporary directory). */
  prefix: string;
  /**
   * 'migrated' (default): a test database; the CLI logs in as the service (DATABASE_URL) and
   * as the owner (MIGRATION_DATABASE_URL), as an operator runs it. 'empty': a new database
   * that nothing has migrated, for the CLI to migrate; the CLI gets only the owner's
   * DATABASE_URL.
   */
  database?: 'migrated' | 'empty';
  /** Variables every run of the CLI gets (after the data directory and the database's). */
  env?: Record<string, string>;
}

export interface CliDatabase<Admin extends Session | undefined = Session> {
  /** DATA_DIR of every run; the embedded database lives under it (pglite/). */
  readonly dataDir: string;
  /** The owner's connection string on the PostgreSQL pass; undefined on PGlite. */
  readonly databaseUrl: string | undefined;
  /** `teamlog …` on the file's database; `env` adds to (or, given undefined, unsets) the variables it gets. */
  runCli(args: string[], env?: Record<string, string | undefined>): Promise<CliResult>;
  /** The file's database for one server's life (PGlite: opened from DATA_DIR, and closed by drop). */
  openDatabase(): Promise<TestDatabase>;
  /**
   * A test server on the file's database for the length of fn (PGlite allows one process: not
   * while the CLI runs), with the first ADMIN logged in; on an 'empty' database, none (the
   * CLI made whatever ADMIN there is).
   */
  withServer<T>(fn: (server: TestServer, admin: Admin) => Promise<T>, opts?: { env?: Record<string, string> }): Promise<T>;
}

/**
 * A data directory and a database shared by the CLI and test servers, for the whole file:
 * called at the top level, it registers the hooks that make them before the first test and
 * remove them after the last. Use them from a test or a describe's before hook, not from a
 * top-level before of the file's own: Node 20 runs a file's top-level before hooks side by
 * side, so that one may start before the database exists.
 */
export function useCliDatabase(opts: CliDatabaseOptions & { database: 'empty' }): CliDatabase<undefined>;
export function useCliDatabase(opts: CliDatabaseOptions & { database?: 'migrated' }): CliDatabase;
export function useCliDatabase(opts: CliDatabaseOptions): CliDatabase<Session | undefined> {
  const empty = opts.database === 'empty';
  let dataDir: string | undefined;
  let pgDatabase: TestDatabase | undefined;
  let emptyName: string | undefined;
  let emptyUrl: string | undefined;
  before(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), opts.prefix));
    if (!onPostgres) return;
    if (!empty) {
      pgDatabase = await createTestDatabase();
      return;
    }
    emptyName = `teamlog_cli_${process.pid}_${randomBytes(4).toString('hex')}`; // generated here, never input
    await adminQuery(`CREATE DATABASE ${emptyName}`);
    emptyUrl = databaseUrl(emptyName);
  });
  after(async () => {
    await pgDatabase?.drop();
    if (emptyName) await adminQuery(`DROP DATABASE IF EXISTS ${emptyName} WITH (FORCE)`);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  const dir = () => dataDir ?? assert.fail('useCliDatabase: the data directory is made in a before hook; use it inside a test');
  const ownerUrl = () => (empty ? emptyUrl : pgDatabase?.databaseUrl);
  const databaseEnv = (): Record<string, string> => {
    const url = ownerUrl();
    if (url === undefined) return {};
    if (empty) return { DATABASE_URL: url };
    return { DATABASE_URL: Object.assign(new URL(url), { username: SERVICE_LOGIN, password: '' }).toString(), MIGRATION_DATABASE_URL: url };
  };

  const world: CliDatabase<Session | undefined> = {
    get dataDir() {
      return dir();
    },
    get databaseUrl() {
      return ownerUrl();
    },
    runCli: (args, env = {}) => runTeamlog(args, { DATA_DIR: dir(), ...databaseEnv(), ...opts.env, ...env }),
    async openDatabase() {
      if (pgDatabase) return { ...pgDatabase, drop: async () => {} };
      if (emptyUrl) {
        // As the CLI left it: the owner's connection, the app's role set on it.
        const db = createPostgresDatabase({ url: emptyUrl, poolSize: 3, role: APP_ROLE, onError: () => {} });
        const owner = createPostgresDatabase({ url: emptyUrl, poolSize: 2, onError: () => {} });
        return { name: emptyName!, db, owner, databaseUrl: emptyUrl, drop: async () => void (await Promise.all([db.close(), owner.close()])) };
      }
      const db = await createPgliteDatabase(path.join(dir(), 'pglite'), () => {});
      if (!empty) await migrate(databaseSession(db));
      return { name: path.basename(dir()), db, owner: db, databaseUrl: undefined, drop: () => db.close() };
    },
    async withServer(fn, serverOpts = {}) {
      const database = await world.openDatabase();
      try {
        const server = await startTestServer({ database, env: serverOpts.env });
        try {
          return await fn(server, empty ? undefined : await loginAdmin(server));
        } finally {
          await server.close();
        }
      } finally {
        await database.drop();
      }
    },
  };
  return world;
}
