// The general rate limit (RATE_LIMIT_PER_MINUTE; 0 turns it off): every /api request counts,
// whatever it answers. An authenticated request counts against its user; any other (a public
// route, a missing, forged, expired or revoked token, an unknown route under /api) against its
// address. @fastify/rate-limit keeps the counters: with REDIS_URL in Redis, shared by every
// instance; without it each instance counts on its own. Answers carry RateLimit-Limit/
// -Remaining/-Reset, and a refused one is 429 RATE_LIMITED with Retry-After. The login throttle
// (modules/auth/auth.throttle.ts) is apart from this and always on.
//
// An address is refused *before* authentication once it has spent its minute, so that a forged
// or revoked token cannot make the service look sessions up at will. What an address has spent
// is only known once its request is answered (authentication may still name a user), so it is
// counted then (onSend), and the instance that sees it reach the limit refuses the address's
// next requests without a lookup until the window ends. Another instance learns it from its own
// next request of that address: past the limit, each instance answers at most one more. While
// an address is refused, so are the users behind it (a lookup is what the refusal saves).
//
// Which requests are the API's is decided on the route Fastify matched, whatever the URL's
// spelling (conventions.ts, isApiRequest): `/%61pi/v1/auth/login` is the login route and counts
// as such. A Socket.IO handshake counts like a request (realtime/handshake.ts, through the
// GeneralLimit answered here): against its user, or its address when its token is refused; an
// address refused here has its handshakes refused too, before their session is looked up.
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Redis } from '../redis.js';
import { isApiRequest, isApiUrl } from './conventions.js';
import { rateLimitedAnswer } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Counted (or refused) by the general rate limit already: each request counts once. */
    rateLimitCounted: boolean;
  }
}

export interface RateLimitOptions {
  perMinute: number;
  redis: Redis | undefined;
  /** Prefix of the Redis keys (REDIS_KEY_PREFIX), so that deployments sharing a Redis do not share counters. */
  keyPrefix: string;
  /** Each request refused (app.metrics.limited, limit "general"). */
  onLimited?: () => void;
}

/**
 * The general limit for callers that are not HTTP requests: a Socket.IO handshake
 * (realtime/handshake.ts declares the same shape; app.ts hands this one over).
 */
export interface GeneralLimit {
  /** Seconds until an address that spent its minute may come back, when this instance knows it did; else undefined. */
  refusedFor(address: string): number | undefined;
  /** Counts one request against the user, or against the address when there is none: the seconds to wait when it went past the limit. */
  count(caller: { userId?: number; address: string }): Promise<number | undefined>;
}

/**
 * What the plugin's counter is handed: the key, in the shape in which it reads a request (it
 * looks for a group id in the route's config), so that requests and handshakes share counters.
 */
interface Counted {
  key: string;
  routeOptions: { config: Record<string, never> };
}
const NO_ROUTE = { config: {} };
const counted = (key: string): FastifyRequest => ({ key, routeOptions: NO_ROUTE } satisfies Counted) as unknown as FastifyRequest;
const keyOf = (userId: number | undefined, address: string) => (userId === undefined ? `ip:${address}` : `user:${userId}`);
const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

const WINDOW_MS = 60_000;
/** Addresses remembered as over the limit, at most: past it, the expired ones go, then the oldest. */
const MAX_BLOCKED = 10_000;

/**
 * Registered on the root instance before authentication's hook (app.ts): its onRequest hook
 * refuses an address over the limit before the session is looked up; each /api route gets a
 * hook that counts its authenticated caller (route hooks run after the instance's, so
 * authentication has named the caller by then); every other /api answer, the not-found
 * handler's included, is counted against its address as it is sent. Answers the limit for
 * Socket.IO handshakes (none when RATE_LIMIT_PER_MINUTE is 0).
 */
export async function registerRateLimit(app: FastifyInstance, opts: RateLimitOptions): Promise<GeneralLimit | undefined> {
  if (opts.perMinute === 0) return undefined;
  const max = opts.perMinute;
  const limited = opts.onLimited ?? (() => {});
  // global: false: the plugin adds no hook of its own; its store is used below, with the keys
  // made here (user:<id>, or ip:<address>) for requests and handshakes alike.
  await app.register(rateLimit, {
    global: false,
    max,
    timeWindow: WINDOW_MS,
    keyGenerator: (request: FastifyRequest) => (request as unknown as Counted).key,
    redis: opts.redis,
    nameSpace: `${opts.keyPrefix}rate-limit:`,
    // Redis unreachable: serve rather than refuse everyone; the outage is logged by the client.
    skipOnError: true,
  });
  const count = app.createRateLimit();
  // A flag on the request rather than a WeakSet of requests: 150 ns a request less, and no
  // ephemeron for the garbage collector to trace.
  app.decorateRequest('rateLimitCounted', false);
  /** Addresses that spent their minute, and until when (ms). */
  const blocked = new Map<string, number>();

  function block(address: string, ms: number): void {
    if (blocked.size >= MAX_BLOCKED) {
      const now = Date.now();
      for (const [a, until] of blocked) if (until <= now) blocked.delete(a);
      if (blocked.size >= MAX_BLOCKED) blocked.delete(blocked.keys().next().value!);
    }
    blocked.delete(address);
    blocked.set(address, Date.now() + ms);
  }

  /** How long (ms) an address is still refused, if this instance saw it spend its minute. */
  function blockedFor(address: string): number | undefined {
    const until = blocked.get(address);
    if (until === undefined) return undefined;
    const left = until - Date.now();
    if (left > 0) return left;
    blocked.delete(address);
    return undefined;
  }

  /** Counts one request of the user, or of the address when there is none; an address that spends its minute is refused from then on. */
  async function tally(userId: number | undefined, address: string) {
    const result = await count(counted(keyOf(userId, address)));
    if (!result.isAllowed && userId === undefined && result.remaining === 0 && result.ttl > 0) block(address, result.ttl);
    return result;
  }

  function refuse(reply: FastifyReply, ms: number): never {
    const wait = seconds(ms);
    limited();
    reply.header('ratelimit-limit', max).header('ratelimit-remaining', 0).header('ratelimit-reset', wait);
    throw rateLimitedAnswer(wait, `More than ${max} requests a minute; try again in ${wait} second${wait === 1 ? '' : 's'}`);
  }

  /** Counts the request against its user or address; answers whether it went past the limit, and when the window ends (ms). */
  async function countRequest(request: FastifyRequest, reply: FastifyReply): Promise<{ exceeded: boolean; ttl: number }> {
    request.rateLimitCounted = true;
    const result = await tally(request.actor?.id, request.ip);
    if (result.isAllowed) return { exceeded: false, ttl: 0 };
    reply.header('ratelimit-limit', result.max).header('ratelimit-remaining', result.remaining).header('ratelimit-reset', result.ttlInSeconds);
    return { exceeded: result.isExceeded, ttl: result.ttl };
  }

  app.addHook('onRequest', async (request, reply) => {
    // request.ip runs proxy-addr over X-Forwarded-For when TRUST_PROXY is set: not while no address is blocked.
    if (blocked.size === 0 || !isApiRequest(request)) return;
    const left = blockedFor(request.ip);
    if (left === undefined) return;
    request.rateLimitCounted = true;
    refuse(reply, left);
  });

  const countCaller: onRequestHookHandler = async (request, reply) => {
    if (!request.actor || request.rateLimitCounted) return;
    const { exceeded, ttl } = await countRequest(request, reply);
    if (exceeded) refuse(reply, ttl);
  };
  app.addHook('onRoute', (route) => {
    if (!isApiUrl(route.url)) return;
    const existing = route.onRequest;
    route.onRequest = (existing === undefined ? [] : ([] as onRequestHookHandler[]).concat(existing as onRequestHookHandler)).concat(countCaller) as typeof route.onRequest;
  });

  app.addHook('onSend', async (request, reply, payload) => {
    if (!request.rateLimitCounted && isApiRequest(request)) await countRequest(request, reply);
    return payload;
  });

  return {
    refusedFor(address) {
      const left = blockedFor(address);
      return left === undefined ? undefined : seconds(left);
    },
    async count({ userId, address }) {
      const result = await tally(userId, address);
      return !result.isAllowed && result.isExceeded ? seconds(result.ttl) : undefined;
    },
  };
}
