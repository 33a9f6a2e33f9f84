// MAX_CONCURRENT_AUDIT_SCANS (docs/api.md section 7): audit exports and verifications running at once
// on an instance; one more is 429 RATE_LIMITED problem+json with Retry-After; a slot comes back
// when its scan ends, fails, or its client goes mid-export; teamlog_audit_scans_running{kind}
// follows them and each refusal is counted in teamlog_requests_limited_total{limit="audit_scans"};
// once the last running scan has ended, the instance runs one full garbage collection (spaced at
// least a second apart: full-collection.test.ts). The server here spaces them a second apart, or
// as long as one took, instead of 50 times that: on a loaded machine a collection took over
// half a second, and the waits for the spacing alone took this test past a minute.
// Scans are held open with the test hook of src/http/scan-slots.ts (TestHooks.whileScanHolds).
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import type { ScanKind } from '../src/http/scan-slots.js';
import { spacedCollector } from '../src/process/full-collection.js';
import { assertProblem, type Response } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import type { TestServer } from './helpers/server.js';
import { sleep } from './helpers/sockets.js';
import { limitedCount } from './helpers/limits.js';

const MAX = 2;
/** What the server awaits while a scan holds its slot: set by holdFirst, cleared after each test. */
const scanPause: { whileHolding?: (kind: ScanKind) => Promise<void> } = {};
const fullCollection = spacedCollector({ maxShare: 1, minIntervalMs: 1000 });
const h = useTestServer({
  env: { MAX_CONCURRENT_AUDIT_SCANS: String(MAX), RATE_LIMIT_PER_MINUTE: '0' },
  hooks: { whileScanHolds: async (kind) => scanPause.whileHolding?.(kind), scanCollector: fullCollection },
});

const EXPORT = '/api/v1/audit-logs/export';
const VERIFY = '/api/v1/audit-logs/verify';

afterEach(() => {
  scanPause.whileHolding = undefined;
});

/** teamlog_audit_scans_running, by kind. */
async function running(server: TestServer): Promise<{ export: number; verify: number }> {
  const { values } = await server.app.metrics.auditScansRunning.get();
  const of = (kind: ScanKind) => values.find((v) => v.labels.kind === kind)?.value ?? 0;
  return { export: of('export'), verify: of('verify') };
}

/**
 * Holds the first `n` scans that start (each waits until release()), and lets later ones run.
 * `entered` resolves once all `n` are held.
 */
function holdFirst(n: number) {
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  let held = 0;
  let allIn = () => {};
  const entered = new Promise<void>((resolve) => (allIn = resolve));
  scanPause.whileHolding = async (_kind: ScanKind) => {
    if (held >= n) return;
    if (++held === n) allIn();
    await gate;
  };
  return { entered, release: () => release() };
}

const get = (path: string): Promise<Response> => h.admin.client.get(path, { token: h.admin.token });

function assertScanLimited(res: Response): void {
  assertProblem(res, 429, 'RATE_LIMITED');
  assert.equal(res.headers.get('retry-after'), '5');
}

describe(`at most ${MAX} audit scans at once on an instance`, () => {
  test('two held open: a third export and a verification are 429; once they end, each kind succeeds again', async () => {
    const refusedBefore = await limitedCount(h.server, 'audit_scans');
    const hold = holdFirst(MAX);
    const held = [get(EXPORT), get(VERIFY)];
    await hold.entered;
    assert.deepEqual(await running(h.server), { export: 1, verify: 1 });
    assertScanLimited(await get(EXPORT));
    assertScanLimited(await get(`${VERIFY}`));
    assertScanLimited(await get(`${EXPORT}?format=csv`));
    assert.equal((await limitedCount(h.server, 'audit_scans')) - refusedBefore, 3);

    hold.release();
    const [exported, verified] = await Promise.all(held);
    assert.equal(exported!.status, 200, exported!.text);
    assert.match(exported!.text, /"type":"checkpoint"|"type":"record"/);
    assert.equal(verified!.status, 200, verified!.text);
    assert.deepEqual(await running(h.server), { export: 0, verify: 0 });
    assert.equal((await get(EXPORT)).status, 200);
    assert.equal((await get(VERIFY)).status, 200);
  });

  test('a client that goes mid-export gives its slot back at once; the other scan keeps its own', async () => {
    const hold = holdFirst(MAX);
    const gone = new AbortController();
    const headers = { authorization: `Bearer ${h.admin.token}`, 'x-forwarded-for': h.admin.client.ip };
    const abandoned = fetch(h.server.url + EXPORT, { headers, signal: gone.signal }).then(
      () => 'answered',
      () => 'aborted',
    );
    const kept = get(EXPORT);
    await hold.entered;
    assertScanLimited(await get(VERIFY));
    gone.abort();
    assert.equal(await abandoned, 'aborted');
    // The server sees the connection close: the slot is free within moments, while the other is still held.
    let answer: Response | undefined;
    for (const until = Date.now() + 1000; Date.now() < until; await sleep(20)) {
      answer = await get(VERIFY);
      if (answer.status !== 429) break;
    }
    assert.equal(answer?.status, 200, answer?.text);
    assert.equal((await running(h.server)).export, 1, 'the kept export still holds its slot');
    hold.release();
    assert.equal((await kept).status, 200);
    assert.deepEqual(await running(h.server), { export: 0, verify: 0 });
  });

  test('a scan refused for another reason takes no slot: a USER gets 403, a bad filter 400, and the slots stay free', async () => {
    const user = await h.newUser();
    for (let i = 0; i < MAX + 1; i++) {
      assertProblem(await user.client.get(EXPORT, { token: user.token }), 403, 'FORBIDDEN');
      assertProblem(await get(`${EXPORT}?format=xml`), 400, 'VALIDATION_FAILED');
    }
    assert.deepEqual(await running(h.server), { export: 0, verify: 0 });
    const hold = holdFirst(MAX);
    const held = [get(VERIFY), get(VERIFY)];
    await hold.entered;
    assertScanLimited(await get(EXPORT));
    hold.release();
    assert.deepEqual((await Promise.all(held)).map((r) => r.status), [200, 200]);
  });
});

/** Counts the forced full collections of this process (the test server runs in it) from now on. */
async function forcedFullCollections() {
  let count = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const { detail } = entry as unknown as { detail: { kind: number; flags: number } };
      if (detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR && (detail.flags & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED) !== 0) count++;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  /** The count once the observer has been told of what ran until now. */
  const settled = async () => {
    await sleep(200);
    return count;
  };
  // The collection after the previous test's last scan may still be on its way, and the next
  // may not run until a while after it (their spacing: full-collection.test.ts).
  const before = await settled();
  await sleep(fullCollection.waitMs());
  return { since: async () => (await settled()) - before, stop: () => observer.disconnect() };
}

describe('what the scans leave goes in one full collection once the last of them ends (process/full-collection.ts)', () => {
  test('a verification that ends while an export is held runs none; the export, ending last, runs exactly one', async () => {
    const gc = await forcedFullCollections();
    const hold = holdFirst(1);
    try {
      const exported = get(EXPORT);
      await hold.entered;
      const verified = await get(VERIFY);
      assert.equal(verified.status, 200, verified.text);
      assert.equal(await gc.since(), 0, 'an export still runs: no collection yet');
      assert.equal((await running(h.server)).export, 1);
      hold.release();
      assert.equal((await exported).status, 200);
      assert.equal(await gc.since(), 1, 'the last scan ended: one collection');
      // Collections are spaced out (full-collection.test.ts): a scan that ended sooner would run none.
      await sleep(fullCollection.waitMs());
      assert.equal((await get(VERIFY)).status, 200);
      assert.equal(await gc.since(), 2, 'a scan alone: one collection when it ends');
    } finally {
      hold.release();
      gc.stop();
    }
  });
});
