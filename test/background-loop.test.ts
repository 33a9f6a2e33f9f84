// The one background loop (background/background-loop.ts) every worker is: what it does on a wake, a
// linger, spaced rounds, a round that says there is more, one held back, one that fails, a requested delay, the
// safety poll and a stop. Time is the test's (node:test's mock timers, Date included), so what is
// asserted is the order of rounds, never how long something took. Then the one-instance-at-a-time
// round on a real database.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { BackgroundLoop, exclusiveRound, type BackgroundLoopOptions, type RoundOutcome } from '../src/background/background-loop.js';
import type { Tx } from '../src/db/database.js';
import { useTestDatabase } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';

const silent = { warn: () => {}, info: () => {}, error: () => {} } as unknown as FastifyBaseLogger;

/** Lets every promise callback run (setImmediate is not mocked). */
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

/** A loop whose rounds answer from a script (and then 'idle'), counting them. */
function scripted(outcomes: Array<RoundOutcome | Error>, opts: Partial<BackgroundLoopOptions> = {}) {
  const rounds: number[] = [];
  const loop = new BackgroundLoop({
    name: 'test loop',
    log: silent,
    round: async () => {
      rounds.push(Date.now());
      const next = outcomes.shift() ?? 'idle';
      if (next instanceof Error) throw next;
      return next;
    },
    ...opts,
  });
  return { loop, rounds };
}

describe('the background loop', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: 0 }));
  afterEach(() => mock.timers.reset());

  test('starts with a round; a wake runs one; wakes during a round make one more after it, not one each', async () => {
    let release!: () => void;
    const rounds: string[] = [];
    const loop = new BackgroundLoop({
      name: 'test loop',
      log: silent,
      round: async () => {
        rounds.push('round');
        if (rounds.length === 2) await new Promise<void>((r) => (release = r));
        return 'idle';
      },
    });
    loop.start();
    await settle();
    assert.equal(rounds.length, 1);
    loop.wake();
    await settle();
    assert.equal(rounds.length, 2, 'woken: a round, which hangs');
    loop.wake();
    loop.wake();
    loop.wake();
    release();
    await settle();
    assert.equal(rounds.length, 3, 'three wakes during it: one more round');
    await loop.stop();
  });

  test('linger: the wakes of a moment share one round', async () => {
    const { loop, rounds } = scripted([], { lingerMs: 20 });
    loop.start();
    await settle();
    rounds.length = 0;
    loop.wake();
    mock.timers.tick(10);
    loop.wake();
    await settle();
    assert.equal(rounds.length, 0, 'not before the linger');
    mock.timers.tick(10);
    await settle();
    assert.deepEqual(rounds, [20]);
    await loop.stop();
  });

  test('spacing: a wake after a quiet moment runs at once; one sooner after the last round started waits for the rest, with the wakes meanwhile', async () => {
    const { loop, rounds } = scripted([], { spacingMs: 10 });
    loop.start();
    await settle();
    assert.deepEqual(rounds, [0], 'the first round, at start');
    mock.timers.tick(4);
    loop.wake();
    loop.wake();
    await settle();
    assert.deepEqual(rounds, [0], 'woken 4 ms after a round started: not yet');
    mock.timers.tick(6);
    await settle();
    assert.deepEqual(rounds, [0, 10], 'one round, 10 ms after the one before');
    mock.timers.tick(30);
    loop.wake();
    await settle();
    assert.deepEqual(rounds, [0, 10, 40], 'after a quiet moment: at once');
    await loop.stop();
  });

  test("'more' runs the next round at once, until a round says 'idle'", async () => {
    const { loop, rounds } = scripted(['more', 'more', 'more', 'idle']);
    loop.start();
    await settle();
    assert.equal(rounds.length, 4);
    await loop.stop();
  });

  test("'held' backs off, doubling up to the ceiling; a wake cuts it short (new work may be takeable)", async () => {
    const { loop, rounds } = scripted(['held', 'held', 'held', 'held', 'held'], { firstRetryMs: 10, maxRetryMs: 30 });
    loop.start();
    await settle();
    for (const step of [10, 20, 30, 30]) {
      mock.timers.tick(step);
      await settle();
    }
    assert.deepEqual(rounds, [0, 10, 30, 60, 90], 'after 10, 20, then 30 and 30 (the ceiling)');
    // Held again, with its next look due in 30: a wake runs a round now.
    loop.wake();
    await settle();
    assert.deepEqual(rounds.slice(5), [90]);
    await loop.stop();
  });

  test('a failed round backs off as failureBackoffMs says; a wake does not cut it short; a success resets it', async () => {
    const attempts: number[] = [];
    const { loop, rounds } = scripted([new Error('down'), new Error('down'), 'idle', new Error('down')], {
      failureBackoffMs: (attempt) => {
        attempts.push(attempt);
        return 100 * attempt;
      },
    });
    loop.start();
    await settle();
    loop.wake();
    await settle();
    assert.equal(rounds.length, 1, 'a wake during the backoff waits for it');
    mock.timers.tick(100);
    await settle();
    assert.equal(rounds.length, 2);
    mock.timers.tick(200);
    await settle();
    assert.equal(rounds.length, 3, 'then it succeeds');
    loop.wake();
    await settle();
    assert.equal(rounds.length, 4, 'and fails again');
    assert.deepEqual(attempts, [1, 2, 1], 'counted from one again after the success');
    await loop.stop();
  });

  test('{ afterMs } runs the next round then, unless woken earlier', async () => {
    const { loop, rounds } = scripted([{ afterMs: 500 }, 'idle', { afterMs: 500 }, 'idle']);
    loop.start();
    await settle();
    mock.timers.tick(499);
    await settle();
    assert.equal(rounds.length, 1);
    mock.timers.tick(1);
    await settle();
    assert.deepEqual(rounds, [0, 500]);
    loop.wake();
    await settle();
    assert.equal(rounds.length, 3, 'a round that asks again in 500');
    mock.timers.tick(100);
    loop.wake();
    await settle();
    assert.deepEqual(rounds.slice(3), [600], 'woken earlier');
    await loop.stop();
  });

  test('the safety poll runs a round every pollMs with nobody waking it', async () => {
    const { loop, rounds } = scripted([], { pollMs: 1000 });
    loop.start();
    await settle();
    for (let i = 0; i < 3; i++) {
      mock.timers.tick(1000);
      await settle();
    }
    assert.deepEqual(rounds, [0, 1000, 2000, 3000]);
    await loop.stop();
  });

  test('after stop no round starts (wake, poll, backoff); stop waits for the round under way, at most stopTimeoutMs', async () => {
    const { loop, rounds } = scripted(['held'], { pollMs: 100, firstRetryMs: 10 });
    loop.start();
    await settle();
    await loop.stop();
    loop.wake();
    mock.timers.tick(1000);
    await settle();
    assert.deepEqual(rounds, [0]);

    let finish!: () => void;
    let finished = false;
    const slow = new BackgroundLoop({
      name: 'slow loop',
      log: silent,
      stopTimeoutMs: 200,
      round: async () => {
        await new Promise<void>((r) => (finish = r));
        finished = true;
        return 'idle';
      },
    });
    slow.start();
    await settle();
    let stopped = false;
    const stopping = slow.stop().then(() => (stopped = true));
    await settle();
    assert.equal(stopped, false, 'it waits for the round');
    finish();
    await stopping;
    assert.equal(finished, true);

    const stuck = new BackgroundLoop({ name: 'stuck loop', log: silent, stopTimeoutMs: 200, round: () => new Promise<RoundOutcome>(() => {}) });
    stuck.start();
    await settle();
    const gaveUp = stuck.stop();
    mock.timers.tick(200);
    await gaveUp; // bounded: a round that never ends is left behind
  });
});

describe('a round one instance at a time (exclusiveRound)', () => {
  const h = useTestDatabase();

  /**
   * One instance holds its round open while another tries: the other is held back, and goes once
   * the first ends. Answers what each body that ran was given by `first`, in order.
   */
  async function holdThenGo<F>(key: number, first?: (tx: Tx) => Promise<F>): Promise<F[]> {
    const seen: F[] = [];
    let inside!: () => void;
    const entered = new Promise<void>((r) => (inside = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const holder = exclusiveRound<F>(h.database.db, key, async (_tx, read) => {
      seen.push(read);
      inside();
      await gate;
      return 'idle';
    }, first);
    const other = exclusiveRound<F>(h.database.db, key, async (_tx, read) => {
      seen.push(read);
      return 'more';
    }, first);
    const running = holder();
    await entered;
    assert.equal(await other(), 'held');
    release();
    assert.equal(await running, 'idle');
    assert.equal(await other(), 'more');
    return seen;
  }

  test('while one instance is in its round, another is held back; once it ends, the other goes', { skip: needsPostgres }, async () => {
    assert.equal((await holdThenGo(7_245_999)).length, 2, 'the held round ran no body');
  });

  test('the first read, sent without waiting for the lock, runs once the lock is taken; held elsewhere, the body does not run', { skip: needsPostgres }, async () => {
    const KEY = 7_246_001;
    // Whether this transaction holds the advisory lock when the read runs (a one-int key: objid).
    const holdsLock = async (tx: Tx) => {
      const [row] = await tx.query<{ held: boolean }>(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objid = $1 AND granted) AS held",
        [KEY],
      );
      return row!.held;
    };
    assert.deepEqual(await holdThenGo(KEY, holdsLock), [true, true], 'each body saw the lock taken before its first read ran, and the held round ran no body');
  });
});
