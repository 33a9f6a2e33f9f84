// Prometheus metrics: requests by route and status, a latency histogram, and the database
// pool. One registry per app instance (tests run several in one process).
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Database } from '../db/database.js';

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
