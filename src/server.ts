// Process entry: configuration, database, first ADMIN, listen, graceful shutdown.
import './process/heap-settings.js';
import path from 'node:path';
import { existsSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import net from 'node:net';
import { ConfigError, loadConfig, loadEnvFile, unknownEnvFileKeys, type Config } from './config.js';
import { openDatabase, superuserLoginWarning } from './db/open.js';
import { DatabaseUnavailableError, waitForPostgres } from './db/wait.js';
import { MigrationRightsError } from './db/migrate.js';
import { ensureFirstAdmin, INITIAL_PASSWORD_FILE } from './first-admin.js';
import { createLogger } from './logger.js';
import { SIGNING_KEY_FILE } from './modules/audit/evidence/signing-key.loader.js';
import { embeddedSecretsBeside, JWT_SECRET_FILE, secretsDir } from './secrets.js';
import { lockDataDir } from './ops/data-dir-lock.js';
import { maintenanceLoop } from './ops/maintenance.js';
import { countRequests } from './process/request-gauge.js';
import { SOCKET_IO_PATH } from './realtime/realtime.js';
import { createApp, createDeps } from './runtime.js';

const SHUTDOWN_DEADLINE_MS = 10_000;

/** A start that cannot go on, for a reason the message says in full (exit code 1). */
class StartupError extends Error {}

/** Where an operator reads how the service's PostgreSQL login is meant to be made. */
const POSTGRES_DOC = 'docs/operations.md, "Running on PostgreSQL"';

/** The SQLSTATE of a database error, or of the error it wraps (a migration's). */
function sqlState(err: unknown): string | undefined {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

/**
 * What a start that failed on the database should say: the error, and the fix. A DATABASE_URL
 * login that is not a member of teamlog_app meets "permission denied for table schema_migrations"
 * on its first read; alone, that names neither the role nor the grant.
 */
function databaseStartError(err: unknown, config: Config): StartupError | undefined {
  if (!config.databaseUrl) return undefined;
  const message = (err as Error).message ?? String(err);
  const login = decodeURIComponent(new URL(config.databaseUrl).username) || '<the login of DATABASE_URL>';
  const code = sqlState(err);
  if (/role "teamlog_app" does not exist/.test(message)) {
    return new StartupError(
      `the role teamlog_app does not exist in DATABASE_URL's database (${message}). The migrations create it: ` +
        `apply them as the database's owner, MIGRATION_DATABASE_URL=postgres://<owner>@…/<database> npx teamlog migrate, then start again (${POSTGRES_DOC}).`,
    );
  }
  if (code === '42501' && !(err instanceof MigrationRightsError)) {
    return new StartupError(
      `the login of DATABASE_URL ("${login}") was refused: ${message}. The service's login must be a member of teamlog_app: ` +
        `as the database's owner, run GRANT teamlog_app TO "${login}"; then start again (${POSTGRES_DOC}). ` +
        '(A superuser or the owner also works, for a try, but production gives the service the role alone.)',
    );
  }
  return undefined;
}

/** The fix for a PostgreSQL that refused the connection, by its SQLSTATE in the message (db/wait.ts). */
function unavailableHint(message: string): string {
  if (/\b(28P01|28000)\b/.test(message)) return ' Check the login and password in the URL it names.';
  if (/\b3D000\b/.test(message)) return ' Create the database as its owner (createdb <name>), or correct the database name in the URL.';
  return '';
}

/**
 * Binds the port once and lets it go, so that a port already taken is reported at once, before
 * any database work (migrations, the first ADMIN), not after it.
 */
async function ensurePortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ host, port, exclusive: true }, resolve);
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new StartupError(`PORT ${port} is already in use on ${host}: another process (another Teamlog?) listens there. Stop it, or set PORT to a free port.`);
    if (code === 'EACCES') throw new StartupError(`PORT ${port} on ${host} may not be opened by this user (ports below 1024 need privileges): set PORT to 1024 or above.`);
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') throw new StartupError(`HOST ${host} is not an address of this machine: set HOST to one (127.0.0.1, or 0.0.0.0 for every interface).`);
    throw err;
  } finally {
    await new Promise((resolve) => probe.close(resolve));
  }
}

/** Waits for PostgreSQL (DATABASE_STARTUP_TIMEOUT_MS): the migrations' login first, then the service's. */
async function waitForDatabase(config: Config, warn: (message: string) => void): Promise<void> {
  const urls: Array<[string, string]> = [];
  if (config.migrationDatabaseUrl && config.migrationDatabaseUrl !== config.databaseUrl) urls.push(['MIGRATION_DATABASE_URL', config.migrationDatabaseUrl]);
  if (config.databaseUrl) urls.push(['DATABASE_URL', config.databaseUrl]);
  const deadline = Date.now() + config.databaseStartupTimeoutMs;
  for (const [name, url] of urls) {
    await waitForPostgres(url, { name, timeoutMs: Math.max(0, deadline - Date.now()), onRetry: warn });
  }
}

/**
 * A DATABASE_URL deployment keeps its generated secrets apart from the embedded database's
 * (secrets.ts, secretsDir). One that was served before that, with the ones in DATA_DIR, would
 * now get new ones (and be refused for a signing key the log does not know): say which to copy.
 */
function warnOfEmbeddedSecrets(config: Config, warn: (message: string) => void): void {
  const unset = [
    ...(config.jwtSecret ? [] : [JWT_SECRET_FILE]),
    ...(config.auditSigningKey ? [] : [SIGNING_KEY_FILE]),
  ];
  const files = embeddedSecretsBeside(config, unset);
  if (files.length === 0) return;
  warn(
    `${files.join(' and ')} belong${files.length === 1 ? 's' : ''} to the embedded database; this DATABASE_URL deployment keeps its own in ` +
      `${secretsDir(config)}. If this PostgreSQL database was served before with ${files.length === 1 ? 'that file' : 'those files'}, ` +
      `stop, copy ${files.length === 1 ? 'it' : 'them'} there (cp ${files.join(' ')} ${secretsDir(config)}/) and start again; ` +
      'better, set JWT_SECRET and AUDIT_SIGNING_KEY in its environment (docs/operations.md, "Secrets").',
  );
}

async function main(): Promise<void> {
  // .env first: its variables are configuration like any other (those already set win).
  const envFile = loadEnvFile();
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  if (envFile) {
    log.info(`Environment read from ${envFile} (a variable already set keeps its value)`);
    for (const warning of unknownEnvFileKeys(envFile)) log.warn(warning);
  }
  await ensurePortFree(config.host, config.port);
  // The embedded database is one process's alone (released at exit); PostgreSQL is shared, and
  // may still be starting.
  if (!config.databaseUrl) lockDataDir(config.dataDir);
  else await waitForDatabase(config, (message) => log.warn(message));
  warnOfEmbeddedSecrets(config, (message) => log.warn(message));
  const db = await openDatabase(config, (err) => log.error({ err }, 'database connection error')).catch((err: unknown) => {
    throw databaseStartError(err, config) ?? err;
  });
  // The service's connections take teamlog_app when first used: a login that may not is refused here.
  const { admin, app } = await (async () => {
    const superuser = await superuserLoginWarning(db);
    if (superuser) log.warn(superuser);
    const deps = createDeps(config, db, log);
    return { admin: await ensureFirstAdmin(deps), app: (await createApp(deps)).app };
  })().catch((err: unknown) => {
    throw databaseStartError(err, config) ?? err;
  });
  const maintenance = maintenanceLoop(db, config.eventRetentionHours, log);

  // Responses in progress: at shutdown their clients are told to close the connection, or a
  // keep-alive connection would hold the server open long after its last response.
  const inFlight = new Set<ServerResponse>();
  app.server.on('request', (_req, res: ServerResponse) => {
    inFlight.add(res);
    res.on('close', () => inFlight.delete(res));
  });
  // The audit scans give way while other requests are in progress (process/request-gauge.ts).
  countRequests(app.server, SOCKET_IO_PATH);

  const address = await app.listen({ port: config.port, host: config.host });
  maintenance.start();
  const base = address.replace('0.0.0.0', '127.0.0.1');
  log.info(`Teamlog is serving ${base}/api/v1 on ${db.kind === 'pglite' ? `embedded PostgreSQL (PGlite) in ${config.dataDir}` : 'PostgreSQL'}`);
  log.info(`API reference: ${base}/docs; audit console (ADMINs): ${base}/console`);
  const passwordFile = path.join(secretsDir(config), INITIAL_PASSWORD_FILE);
  if (admin.created) {
    log.info(
      admin.passwordFile
        ? `First ADMIN created: ${admin.email}; the password is in ${admin.passwordFile} (readable only by you). Log in with POST ${base}/api/v1/auth/login`
        : `First ADMIN created: ${admin.email} with the password from ADMIN_PASSWORD. Log in with POST ${base}/api/v1/auth/login`,
    );
  } else if (existsSync(passwordFile)) {
    log.info(`Log in with POST ${base}/api/v1/auth/login; the first ADMIN's generated password is in ${passwordFile} (delete the file once you have changed it)`);
  } else {
    log.info(`Log in with POST ${base}/api/v1/auth/login {"email": …, "password": …}`);
  }

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: finishing in-flight requests, then exiting`);
    const deadline = setTimeout(() => {
      log.error('shutdown took longer than 10 s; exiting anyway');
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    deadline.unref();
    for (const res of inFlight) if (!res.headersSent) res.setHeader('connection', 'close');
    // Connections that go idle while closing (a response already under way) are closed too.
    const sweep = setInterval(() => app.server.closeIdleConnections(), 100);
    sweep.unref();
    try {
      await maintenance.stop();
      await app.close();
      await db.close();
      process.exit(0);
    } catch (err) {
      log.error({ err }, 'error during shutdown');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  if (err instanceof ConfigError) {
    console.error(`Configuration error: ${err.message}`);
    process.exit(2);
  }
  if (err instanceof StartupError) {
    console.error(`Teamlog cannot start: ${err.message}`);
    process.exit(1);
  }
  if (err instanceof DatabaseUnavailableError) {
    console.error(`Teamlog cannot start: ${err.message}${unavailableHint(err.message)}`);
    process.exit(1);
  }
  if (err instanceof MigrationRightsError) {
    console.error(`Teamlog cannot start: ${err.message} (${POSTGRES_DOC})`);
    process.exit(1);
  }
  console.error('Teamlog failed to start:', err instanceof Error ? err.message : err);
  process.exit(1);
});
