// The spacing of the full collections run after audit scans (src/process/full-collection.ts): at
// most 2% of the instance's time, never less than a second apart. A fake clock; the collection
// itself, run by the HTTP scans, is in limits-audit-scans.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createCollector } from '../src/process/full-collection.js';

/** A collector over a fake clock whose collections take `gcMs` each; answers it and what it ran. */
function fake(gcMs: number) {
  let now = 0;
  const runs: number[] = [];
  const collector = createCollector(() => {
    runs.push(now);
    now += gcMs;
  }, () => now);
  return { collect: () => collector.collect(), waitMs: () => collector.waitMs(), runs, advance: (ms: number) => void (now += ms), at: () => now };
}

describe('full collections after scans are spaced out', () => {
  test('a short collection: the next is refused for a second after it ends, then runs', () => {
    const c = fake(10);
    assert.equal(c.collect(), true);
    assert.equal(c.waitMs(), 1000);
    c.advance(999);
    assert.equal(c.collect(), false, '999 ms after the end');
    assert.equal(c.waitMs(), 1);
    c.advance(1);
    assert.equal(c.waitMs(), 0);
    assert.equal(c.collect(), true, 'a second after the end');
    assert.deepEqual(c.runs, [0, 1010]);
  });

  test('a long collection: the next waits fifty times its length, so collections stay under 2% of the time', () => {
    const c = fake(100);
    assert.equal(c.collect(), true);
    assert.equal(c.waitMs(), 5_000);
    c.advance(4_999);
    assert.equal(c.collect(), false, '4,999 ms after the end');
    c.advance(1);
    assert.equal(c.collect(), true, 'fifty times 100 ms after the end');
    // Scans ending every millisecond for a minute: the collections' share of that minute.
    let busy = 0;
    for (const end = c.at() + 60_000; c.at() < end; c.advance(1)) if (c.collect()) busy += 100;
    assert.ok(busy / 60_000 <= 0.02, `collections took ${((100 * busy) / 60_000).toFixed(2)}% of the minute`);
  });

  test('no gc() available (the extension refused): nothing runs, and it says so', () => {
    assert.equal(createCollector(undefined).collect(), false);
  });
});
