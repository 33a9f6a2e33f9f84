// Prometheus metrics: requests by route and status, a latency histogram, the database pool,
// the limits, the session cache, the sockets and real-time lag of this instance, and the audit
// log's sealing, signing and webhook backlogs (read from the database at each scrape, so every
// instance reports the same). One registry per app instance (tests run several in one process).
// docs/operations.md says what each means and which to alert on.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import { AppError } from '../http/errors.js';
import { sealingBacklog, type SealingBacklog } from '../modules/audit/evidence/sealing-status.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** This app's registry: background workers started beside the app register theirs in it (auditWebhookMetrics). */
    metricsRegistry: Registry;
    /** The metrics that code outside this module moves (limits, scans). */
    metrics: AppMetrics;
  }
}

export interface AppMetrics {
  /** A request, message or connection refused by a limit, by limit: general (RATE_LIMIT_PER_MINUTE), login, messages, sockets, audit_scans. */
  limited: Counter<'limit'>;
  /** Exports and verifications running on this instance now, by kind: export, verify. */
  auditScansRunning: Gauge<'kind'>;
}

/** A scrape's reads of the database give up after this long; the gauges keep their last values. */
const READ_TIMEOUT_MS = 2000;

export type MetricsConfig = Pick<Config, 'metricsToken' | 'auditCheckpointIntervalMs' | 'maxConcurrentAuditScans'>;

export function registerMetrics(app: FastifyInstance, db: Database, config: MetricsConfig): void {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests by method, route pattern and status code',
    labelNames: ['method', 'route', 'status_code'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency by method and route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  new Gauge({
    name: 'db_pool_connections',
    help: 'Database connections by state (PGlite: one connection; waiting = statements queued for it)',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const s = db.poolStats();
      this.set({ state: 'total' }, s.total);
      this.set({ state: 'idle' }, s.idle);
      this.set({ state: 'waiting' }, s.waiting);
    },
  });

  app.decorate('metricsRegistry', registry);
  app.decorate('metrics', {
    limited: new Counter({
      name: 'teamlog_requests_limited_total',
      help: 'Requests, messages and socket connections refused by a limit, by limit: general, login, messages, sockets, audit_scans',
      labelNames: ['limit'] as const,
      registers: [registry],
    }),
    auditScansRunning: new Gauge({
      name: 'teamlog_audit_scans_running',
      help: 'Audit exports and verifications running on this instance now, by kind (export, verify); at most MAX_CONCURRENT_AUDIT_SCANS',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
  } satisfies AppMetrics);
  // Settings the alerting rules compare with (deploy/prometheus/teamlog.rules.yml), so that a
  // rule follows the configuration instead of repeating it.
  new Gauge({
    name: 'teamlog_audit_scans_limit',
    help: 'MAX_CONCURRENT_AUDIT_SCANS: audit exports and verifications one instance runs at once',
    registers: [registry],
  }).set(config.maxConcurrentAuditScans);
  new Gauge({
    name: 'teamlog_audit_checkpoint_interval_seconds',
    help: 'AUDIT_CHECKPOINT_INTERVAL_MS in seconds: at least this often a checkpoint is signed while sealed records are not covered by one',
    registers: [registry],
  }).set(config.auditCheckpointIntervalMs / 1000);
  auditSealingMetrics(registry, () => sealingBacklog(db));

  app.addHook('onResponse', async (request, reply) => {
    // The route pattern, never the raw URL: ids would explode the label set.
    const route = request.routeOptions.url ?? 'unmatched';
    requests.inc({ method: request.method, route, status_code: String(reply.statusCode) });
    duration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });

  const allowed = config.metricsToken === undefined ? () => true : bearerCheck(config.metricsToken);
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    if (!allowed(request.headers.authorization)) {
      throw new AppError(401, 'UNAUTHENTICATED', 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>', {
        headers: { 'www-authenticate': 'Bearer realm="metrics"' },
      });
    }
    reply.header('content-type', registry.contentType).header('cache-control', 'no-store');
    return registry.metrics();
  });
}

/**
 * Whether an Authorization header carries the token, in a time that does not depend on how much
 * of it matches: both sides are hashed to one length before the constant-time comparison.
 */
function bearerCheck(token: string): (header: string | undefined) => boolean {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  const expected = digest(token);
  return (header) => {
    const presented = /^Bearer +(\S+) *$/i.exec(header ?? '')?.[1];
    return timingSafeEqual(digest(presented ?? ''), expected) && presented !== undefined;
  };
}

/**
 * A read that the gauges of one scrape share (the registry collects them side by side): the
 * first gauge starts it, the others wait for the same answer, and so does a scrape that comes
 * while it is still running (a slow database is not asked again and again). Undefined when it
 * failed or did not answer in time: the gauges then keep their last values rather than show a
 * false 0.
 */
function sharedRead<T>(read: () => Promise<T>): () => Promise<T | undefined> {
  let inflight: Promise<T | undefined> | undefined;
  return () => {
    const running = (inflight ??= read()
      .catch(() => undefined)
      .finally(() => {
        inflight = undefined;
      }));
    return new Promise<T | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), READ_TIMEOUT_MS);
      timer.unref();
      void running.then((value) => {
        clearTimeout(timer);
        resolve(value);
      });
    });
  };
}

/** What sealing and signing have yet to do (sealing-status.service.ts), read from the database at each scrape. */
function auditSealingMetrics(registry: Registry, readBacklog: () => Promise<SealingBacklog>): void {
  const backlog = sharedRead(readBacklog);
  const gauge = (name: string, help: string, value: (b: SealingBacklog) => number | undefined) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const b = await backlog();
        const v = b && value(b);
        if (v !== undefined) this.set(v);
      },
    });
  gauge('teamlog_audit_unsealed_records', 'Committed audit records not sealed yet (the whole log\'s, read from the database)', (b) => b.unsealedRecords);
  gauge('teamlog_audit_seal_lag_seconds', 'Age of the oldest committed audit record not sealed yet, by its timestamp (0 when none waits)', (b) => b.sealLagSeconds);
  gauge('teamlog_audit_checkpoint_age_seconds', 'Age of the newest signed checkpoint (0 until the first); it grows while nothing new is sealed, which is normal', (b) => b.checkpointAgeSeconds);
  gauge('teamlog_audit_checkpoint_lag_seconds', 'How long the first sealed audit record that no signed checkpoint covers has been sealed (0 when the newest checkpoint covers every sealed record)', (b) => b.checkpointLagSeconds);
}

/** A cache that counts its own lookups: the metrics read its totals at each scrape. */
interface CountingCache { readonly hits: number; readonly misses: number; readonly size: number }

/** A cache's lookups by result (a counter) and its size (a gauge), read from the cache at each scrape. */
function cacheMetrics(registry: Registry, cache: CountingCache, lookups: { name: string; help: string }, entries: { name: string; help: string }): void {
  new Counter({
    ...lookups,
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ result: 'hit' }, cache.hits);
      this.inc({ result: 'miss' }, cache.misses);
    },
  });
  new Gauge({
    ...entries,
    registers: [registry],
    collect() {
      this.set(cache.size);
    },
  });
}

/** The session cache of the HTTP per-request check (sessions.cache.ts): its lookups by result, and its size. */
export function sessionCacheMetrics(registry: Registry, cache: CountingCache): void {
  cacheMetrics(registry, cache,
    { name: 'teamlog_session_cache_lookups_total', help: 'HTTP requests authenticated from the session cache (hit) or from the database (miss)' },
    { name: 'teamlog_session_cache_entries', help: 'Live sessions held by the session cache of this instance' });
}

/** A list's kept pages (http/page-cache.ts): reads answered from a copy (hit) or from the rows (miss), and the copies held. */
export function pageCacheMetrics(registry: Registry, list: string, cache: CountingCache): void {
  cacheMetrics(registry, cache,
    { name: `teamlog_${list}_page_copies_total`, help: `Reads of the ${list} list answered from a kept copy, the database having changed nothing since (hit), or from its rows (miss)` },
    { name: `teamlog_${list}_page_copies`, help: `Pages of the ${list} list kept by this instance` });
}

/**
 * The audit webhook's (docs/api.md 5.9), registered when AUDIT_WEBHOOK_URL is set. The lag is read
 * from the database at each scrape, so every instance reports the same, whichever delivers;
 * the failure counter is this instance's own attempts. Answers the counter to increment.
 */
export function auditWebhookMetrics(registry: Registry, readLag: () => Promise<{ records: number; seconds: number }>) {
  const lag = sharedRead(readLag);
  new Gauge({
    name: 'teamlog_audit_webhook_lag_records',
    help: 'Sealed audit records not yet delivered to AUDIT_WEBHOOK_URL',
    registers: [registry],
    async collect() {
      const l = await lag();
      // Database unreachable: the last value stays rather than a false 0.
      if (l) this.set(l.records);
    },
  });
  new Gauge({
    name: 'teamlog_audit_webhook_lag_seconds',
    help: 'Age of the oldest sealed audit record not yet delivered to AUDIT_WEBHOOK_URL, by its seal time (0 when none)',
    registers: [registry],
    async collect() {
      const l = await lag();
      if (l) this.set(l.seconds);
    },
  });
  return new Counter({
    name: 'teamlog_audit_webhook_failed_attempts_total',
    help: 'Audit webhook deliveries that failed on this instance, by reason: status (a non-2xx answer), network, timeout',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
}

/** How far witnessing lags (evidence/witnessing.service.ts, WitnessingLag), read at each scrape. */
export interface WitnessLagReading {
  newestWitnessed: { tree_size: number; created_at: string } | null;
  unwitnessedMs: number;
}

/**
 * Witnessing's (docs/api.md 5.11), registered when AUDIT_WITNESS_POLICY is set. The witnessed size
 * and ages are read from the database at each scrape, so every instance reports the same; the
 * submissions counter is this instance's own. Answers the counter to increment.
 */
export function auditWitnessMetrics(registry: Registry, readLag: () => Promise<WitnessLagReading | undefined>) {
  const lag = sharedRead(readLag);
  new Gauge({
    name: 'teamlog_audit_witnessed_tree_size',
    help: 'Tree size of the newest checkpoint whose cosignatures meet the witness policy\'s quorum (0 until one does)',
    registers: [registry],
    async collect() {
      const l = await lag();
      if (l) this.set(l.newestWitnessed?.tree_size ?? 0);
    },
  });
  new Gauge({
    name: 'teamlog_audit_witnessed_checkpoint_age_seconds',
    help: 'Age of the newest witnessed checkpoint, by its signing time (0 until one is); it grows while nothing new is sealed, which is normal',
    registers: [registry],
    async collect() {
      const l = await lag();
      if (l) this.set(l.newestWitnessed ? Math.max(0, (Date.now() - Date.parse(l.newestWitnessed.created_at)) / 1000) : 0);
    },
  });
  new Gauge({
    name: 'teamlog_audit_witness_lag_seconds',
    help: 'How long the first checkpoint newer than the newest witnessed one has waited (0 when the newest checkpoint is witnessed); /health/ready is degraded past AUDIT_WITNESS_MAX_AGE_MS',
    registers: [registry],
    async collect() {
      const l = await lag();
      if (l) this.set(l.unwitnessedMs / 1000);
    },
  });
  return new Counter({
    name: 'teamlog_audit_witness_submissions_total',
    help: 'Checkpoints submitted to witnesses by this instance, by witness and outcome: cosigned, conflict (409, or a size the log never had), refused (another 4xx or 5xx), invalid (a cosignature that does not verify), network, timeout',
    labelNames: ['witness', 'outcome'] as const,
    registers: [registry],
  });
}

/** The Socket.IO server as the metrics see it: its namespaces' local sockets. */
export interface SocketServer {
  of(namespace: string): { sockets: { size: number } };
}

const NAMESPACES = ['/', '/admin'] as const;
const emitLags = new WeakMap<SocketServer, Histogram<'namespace'>>();

/**
 * This instance's sockets and real-time lag, registered once the Socket.IO server is attached
 * (app.ts). Delivery (realtime/delivery.ts) finds the lag histogram of its server with emitLagOf.
 */
export function realtimeMetrics(registry: Registry, io: SocketServer): void {
  new Gauge({
    name: 'teamlog_sockets_connected',
    help: 'Socket.IO connections to this instance, by namespace (/ and /admin)',
    labelNames: ['namespace'] as const,
    registers: [registry],
    collect() {
      for (const namespace of NAMESPACES) this.set({ namespace }, io.of(namespace).sockets.size);
    },
  });
  emitLags.set(
    io,
    new Histogram({
      name: 'teamlog_realtime_emit_lag_seconds',
      help: 'From the relay reading an event\'s committed outbox row (its batch) to this instance sending the event to its sockets, by namespace',
      labelNames: ['namespace'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
  );
}

/** The emit-lag histogram of a Socket.IO server (undefined until realtimeMetrics registered it). */
export const emitLagOf = (io: SocketServer): Histogram<'namespace'> | undefined => emitLags.get(io);
