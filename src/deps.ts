// What every service needs, built once at start (src/runtime.ts) and passed explicitly.
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from './config.js';
import type { CommitSignal } from './use-cases/commit-signal.js';
import type { Database } from './db/database.js';
import type { SigningKey } from './modules/audit/integrity/signing-key.js';
import type { Secrets } from './secrets.js';
import type { Run } from './use-cases/runner.js';

export interface Deps {
  db: Database;
  config: Config;
  secrets: Secrets;
  /** Signs the audit log's checkpoints; never stored in the database. */
  signingKey: SigningKey;
  /** The use-case runner: the only way to change data (use-cases/runner.ts). */
  run: Run;
  /** Told by the runner after each commit that carried an audit record or events; the relay and the sealer listen. */
  commits: CommitSignal;
  log: FastifyBaseLogger;
}
