// The general rate limit (RATE_LIMIT_PER_MINUTE; 0 turns it off): per user when the request is
// authenticated, per address otherwise, across every /api route, with @fastify/rate-limit.
// With REDIS_URL the counters live in Redis and every instance shares them; without it each
// instance counts on its own. Answers carry RateLimit-Limit/-Remaining/-Reset, and a refused
// one is 429 RATE_LIMITED with Retry-After. The login throttle (modules/auth/throttle.ts) is
// apart from this and always on.
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Redis } from '../redis.js';
import { rateLimitedAnswer } from './errors.js';

export interface RateLimitOptions {
  perMinute: number;
  redis: Redis | undefined;
  /** Prefix of the Redis keys (REDIS_KEY_PREFIX), so that deployments sharing a Redis do not share counters. */
  keyPrefix: string;
}

/**
 * Registered inside the /api scope: the plugin adds its hook to each route registered after
 * it there, after the instance's own onRequest hooks, so authentication has already named
 * the caller.
 */
export async function registerRateLimit(api: FastifyInstance, opts: RateLimitOptions): Promise<void> {
  if (opts.perMinute === 0) return;
  await api.register(rateLimit, {
    max: opts.perMinute,
    timeWindow: 60_000,
    keyGenerator: (request: FastifyRequest) => (request.actor ? `user:${request.actor.id}` : `ip:${request.ip}`),
    redis: opts.redis,
    nameSpace: `${opts.keyPrefix}rate-limit:`,
    // Redis unreachable: serve rather than refuse everyone; the outage is logged by the client.
    skipOnError: true,
    enableDraftSpec: true,
    errorResponseBuilder: (_request, context) =>
      rateLimitedAnswer(Math.ceil(context.ttl / 1000), `More than ${context.max} requests a minute; try again in ${context.after}`),
  });
}
