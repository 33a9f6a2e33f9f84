// Wires a running service from configuration and an open database. Used by the server, the
// CLI and the tests alike, so all three run the same code.
import type { FastifyBaseLogger } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import type { Database } from './db/database.js';
import type { Deps, TestHooks } from './deps.js';
import { createAuditWriter, type AuditWriter } from './modules/audit/audit.writer.js';
import { addEvents } from './modules/outbox/outbox.repository.js';
import { lockActor, lockActors } from './modules/sessions/sessions.repository.js';
import { loadSigningKey } from './modules/audit/evidence/signing-key.loader.js';
import { SessionCache } from './modules/sessions/sessions.cache.js';
import { loadSecrets } from './secrets.js';
import { createServices } from './services.js';
import { CommitSignal } from './background/commit-signal.js';
import type { RunnerStore } from './use-cases/ports.js';
import { createRunner } from './use-cases/runner.js';

/** What the use-case runner locks and writes through (use-cases/ports.ts): the modules' statements and `writer`. */
export const runnerStore = (writer: AuditWriter): RunnerStore => ({ writer, lockActor, lockActors, addEvents });

/** `testHooks`: only tests give them (deps.ts). */
export function createDeps(config: Config, db: Database, log: FastifyBaseLogger, testHooks?: TestHooks): Deps {
  const secrets = loadSecrets(config, (msg) => log.warn(msg));
  const signingKey = loadSigningKey(config, (msg) => log.warn(msg));
  const commits = new CommitSignal();
  // On PostgreSQL other instances change sessions too: the cache serves only while it hears them.
  const sessionCache = new SessionCache({ needsNotices: db.listen !== undefined });
  return { config, db, secrets, signingKey, run: createRunner(db, runnerStore(createAuditWriter(secrets.personalDataKey)), commits), commits, sessionCache, log, testHooks };
}

export async function createApp(deps: Deps) {
  const services = createServices(deps);
  const app = await buildApp(deps, services);
  return { app, services };
}
