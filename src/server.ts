// Process entry: configuration, database, first ADMIN, listen, graceful shutdown.
import './process/heap-settings.js';
import path from 'node:path';
import { existsSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import net from 'node:net';
import { ConfigError, loadConfig, loadEnvFile, unknownEnvFileKeys, type Config } from './config.js';
import { openDatabase, superuserLoginWarning } from './db/open.js';
import { DatabaseUnavailableError, waitForPostgres } from './db/wait.js';
import { ensureFirstAdmin } from './first-admin.js';
import { createLogger } from './logger.js';
import { lockDataDir } from './ops/data-dir-lock.js';
import { maintenanceLoop } from './ops/maintenance.js';
import { createApp, createDeps } from './runtime.js';

const SHUTDOWN_DEADLINE_MS = 10_000;

/** A start that cannot go on, for a reason the message says in full (exit code 1). */
class StartupError extends Error {}

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
  const db = await openDatabase(config, (err) => log.error({ err }, 'database connection error'));
  const superuser = await superuserLoginWarning(db);
  if (superuser) log.warn(superuser);
  const deps = createDeps(config, db, log);
  const admin = await ensureFirstAdmin(deps);
  const { app } = await createApp(deps);
  const maintenance = maintenanceLoop(db, config.eventRetentionHours, log);

  // Responses in progress: at shutdown their clients are told to close the connection, or a
  // keep-alive connection would hold the server open long after its last response.
  const inFlight = new Set<ServerResponse>();
  app.server.on('request', (_req, res: ServerResponse) => {
    inFlight.add(res);
    res.on('close', () => inFlight.delete(res));
  });

  const address = await app.listen({ port: config.port, host: config.host });
  maintenance.start();
  const base = address.replace('0.0.0.0', '127.0.0.1');
  log.info(`Teamlog is serving ${base}/api/v1 on ${db.kind === 'pglite' ? `embedded PostgreSQL (PGlite) in ${config.dataDir}` : 'PostgreSQL'}`);
  log.info(`API reference: ${base}/docs`);
  const passwordFile = path.join(config.dataDir, 'initial-admin-password');
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
  if (err instanceof StartupError || err instanceof DatabaseUnavailableError) {
    console.error(`Teamlog cannot start: ${err.message}`);
    process.exit(1);
  }
  console.error('Teamlog failed to start:', err instanceof Error ? err.message : err);
  process.exit(1);
});
