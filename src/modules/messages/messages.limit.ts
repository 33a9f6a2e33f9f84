// At most MAX_MESSAGES_PER_SECOND messages a second per user (docs/api.md section 6), counted
// across all their sockets and POST /messages: both send through the messages service this
// wraps. The window slides (any 1000 ms holds at most that many), so that a burst that
// straddles a second boundary is not let through twice over. With Redis every instance counts
// in one sorted set per user, by Redis's clock; without it, or while Redis does not answer,
// each instance counts on its own. A refused message is not counted: it did not happen.
import { randomUUID } from 'node:crypto';
import { rateLimited } from '../../domain/errors.js';
import type { Redis } from '../../redis.js';
import type { MessagesService } from './messages.service.js';

export const MAX_MESSAGES_PER_SECOND = 20;
const WINDOW_MS = 1000;

/** Takes one of the user's messages of the current window; or answers in how many ms one frees up. */
export type MessageLimit = (userId: number) => Promise<{ ok: true } | { ok: false; retryAfterMs: number }>;

// KEYS[1] the user's set; ARGV limit, window (ms), a member unique to this attempt. The times of
// the messages taken in the last window are the scores; answers {1} or {0, ms until a slot frees}.
const TAKE = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local limit, window = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(oldest[2]) + window - now}
end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], window)
return {1}
`;

/** In this process: the times of each user's messages in the last window. */
function localLimit(limit: number, now: () => number = Date.now): MessageLimit {
  const taken = new Map<number, number[]>();
  let swept = now();
  return async (userId) => {
    const t = now();
    // Users who stopped sending leave nothing behind for long.
    if (t - swept > 10 * WINDOW_MS) {
      swept = t;
      for (const [id, times] of taken) if (times[times.length - 1]! <= t - WINDOW_MS) taken.delete(id);
    }
    const recent = (taken.get(userId) ?? []).filter((x) => x > t - WINDOW_MS);
    if (recent.length >= limit) {
      taken.set(userId, recent);
      return { ok: false, retryAfterMs: recent[0]! + WINDOW_MS - t };
    }
    recent.push(t);
    taken.set(userId, recent);
    return { ok: true };
  };
}

export interface MessageLimitOptions {
  /** Shared by every instance; undefined: this process counts alone. */
  redis?: Redis;
  /** REDIS_KEY_PREFIX. */
  keyPrefix: string;
  limit?: number;
  /** Redis did not answer: the message was counted by this instance alone. */
  onRedisError?: (err: unknown) => void;
}

export function createMessageLimit(opts: MessageLimitOptions): MessageLimit {
  const limit = opts.limit ?? MAX_MESSAGES_PER_SECOND;
  const local = localLimit(limit);
  const { redis } = opts;
  if (!redis) return local;
  const tag = randomUUID();
  let seq = 0;
  return async (userId) => {
    try {
      const [ok, wait] = (await redis.eval(TAKE, 1, `${opts.keyPrefix}messages:rate:${userId}`, limit, WINDOW_MS, `${tag}:${seq++}`)) as [number, number?];
      return ok === 1 ? { ok: true } : { ok: false, retryAfterMs: wait ?? WINDOW_MS };
    } catch (err) {
      opts.onRedisError?.(err);
      return local(userId);
    }
  };
}

/**
 * The messages service with the limit in front of postMessage: a message beyond it is refused
 * with RATE_LIMITED (429 with Retry-After over HTTP; the socket's acknowledgement), before any
 * transaction.
 */
export function limitMessages(messages: MessagesService, take: MessageLimit, onRefused: () => void = () => {}): MessagesService {
  return {
    ...messages,
    async postMessage(ctx, input) {
      const taken = await take(ctx.actor.id);
      if (!taken.ok) {
        onRefused();
        throw rateLimited(taken.retryAfterMs / 1000, `At most ${MAX_MESSAGES_PER_SECOND} messages a second; try again in a moment`);
      }
      return messages.postMessage(ctx, input);
    },
  };
}
