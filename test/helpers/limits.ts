// What the limits' tests read and assert alike: a refusal's answer, and the refusals a limit has
// counted (teamlog_requests_limited_total{limit}).
import assert from 'node:assert/strict';
import type { Response } from './client.js';
import type { TestServer } from './server.js';

/** How many refusals `limit` has counted on this server. */
export async function limitedCount(server: TestServer, limit: string): Promise<number> {
  const { values } = await server.app.metrics.limited.get();
  return values.find((v) => v.labels.limit === limit)?.value ?? 0;
}

/** A 429 of the general limit (RATE_LIMIT_PER_MINUTE = `perMinute`): problem+json RATE_LIMITED, Retry-After, and no request left. */
export function assertRateLimited(res: Response, perMinute: number, what?: string): void {
  assert.equal(res.status, 429, `${what ? `${what}: ` : ''}${res.status} ${res.text}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(res.body.code, 'RATE_LIMITED');
  const retryAfter = Number(res.headers.get('retry-after'));
  assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  assert.equal(res.headers.get('ratelimit-limit'), String(perMinute));
  assert.equal(res.headers.get('ratelimit-remaining'), '0');
}
