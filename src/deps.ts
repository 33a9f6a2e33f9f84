// What every service needs, built once at start (src/runtime.ts) and passed explicitly.
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from './config.js';
import type { CommitSignal } from './background/commit-signal.js';
import type { Database } from './db/database.js';
import type { SigningKey } from './modules/audit/evidence/signing-key.loader.js';
import type { SessionCache } from './modules/sessions/sessions.cache.js';
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
  /** Live sessions for the HTTP per-request check (sessions.cache.ts); the app keeps it hearing changes (app.ts). */
  sessionCache: SessionCache;
  log: FastifyBaseLogger;
  /** Hooks a test gives when it wires the service (test/helpers/server.ts); none in production. */
  testHooks?: TestHooks;
}

/**
 * What a test may change in how the service runs, given to createDeps (src/runtime.ts). These
 * are deliberately not configuration. Typed here by shape: the modules that read them import
 * Deps, so this file imports none of them.
 */
export interface TestHooks {
  /**
   * Awaited between packing a batch of events and sending it (realtime/delivery.ts): the window
   * in which a reconnecting socket's catch-up can overtake live delivery.
   */
  beforeDeliverySend?: (events: ReadonlyArray<{ event_id: number; name: string; room: string; payload: Record<string, unknown> }>) => Promise<void>;
  /** Shorter audit webhook timings, in ms (WebhookTuning in audit/evidence/webhook.sender.ts): backoff, timeout, lease, poll. */
  webhookTuning?: Partial<Record<'retryBaseMs' | 'retryCapMs' | 'timeoutMs' | 'leaseMs' | 'pollMs', number>>;
  /**
   * Awaited by a socket handshake between its session check and its joining its rooms
   * (realtime/handshake.ts): the gap in which a slow database or Redis holds it, and which a
   * revocation delivered meanwhile passes by.
   */
  afterHandshakeSessionCheck?: () => Promise<void>;
  /** Called as a socket handshake looks its session up (realtime/handshake.ts): a test counts the lookups the general limit spares. */
  onHandshakeSessionLookup?: () => void;
  /** Awaited while an audit scan holds its slot, before it reads anything (http/scan-slots.ts): a test holds scans open. */
  whileScanHolds?: (kind: 'export' | 'verify') => Promise<void>;
  /** The full collections run once the last audit scan ends (http/scan-slots.ts), in place of the process's own spacing. */
  scanCollector?: { collect(): boolean; waitMs(): number };
}
