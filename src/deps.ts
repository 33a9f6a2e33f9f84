// What every service needs, built once at start (src/services.ts) and passed explicitly.
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from './config.js';
import type { Database } from './db/database.js';
import type { AuditWriter } from './modules/audit/audit.writer.js';
import type { Secrets } from './secrets.js';

export interface Deps {
  db: Database;
  config: Config;
  secrets: Secrets;
  audit: AuditWriter;
  log: FastifyBaseLogger;
}
