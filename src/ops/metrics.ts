// Prometheus metrics: requests by route and status, a latency histogram, and the database
// pool. One registry per app instance (tests run several in one process).
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Database } from '../db/database.js';

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

export function registerMetrics(app: FastifyInstance, db: Database): void {
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

  app.addHook('onResponse', async (request, reply) => {
    // The route pattern, never the raw URL: ids would explode the label set.
    const route = request.routeOptions.url ?? 'unmatched';
    requests.inc({ method: request.method, route, status_code: String(reply.statusCode) });
    duration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.header('content-type', registry.contentType).header('cache-control', 'no-store');
    return registry.metrics();
  });
}

/**
 * The audit webhook's (API.md 5.9), registered when AUDIT_WEBHOOK_URL is set. The lag is read
 * from the database at each scrape, so every instance reports the same, whichever delivers;
 * the failure counter is this instance's own attempts. Answers the counter to increment.
 */
export function auditWebhookMetrics(registry: Registry, readLag: () => Promise<{ records: number; seconds: number }>) {
  // One read per scrape for both gauges (the registry collects them side by side).
  let reading: Promise<{ records: number; seconds: number } | undefined> | undefined;
  const lag = () =>
    (reading ??= readLag()
      .catch(() => undefined)
      .finally(() => {
        reading = undefined;
      }));
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
