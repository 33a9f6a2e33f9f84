// The request gauge (src/process/request-gauge.ts): requests in progress, counted on a real
// HTTP server from arrival until the response closes, the audit scans' own and Socket.IO's long
// polls apart; and the pauses a scan takes between chunks while other requests wait (the scans
// together work one moment in three), with none while the service is otherwise idle.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { sleep } from './helpers/sockets.js';
import { MAX_PAUSE_MS, SCANS_ONE_IN, countRequests, givingWay, othersWaiting, scanEnded, scanStarted, type PauseClock, type RequestGauge } from '../src/process/request-gauge.js';

const newGauge = (): RequestGauge => new Int32Array(new SharedArrayBuffer(8));
/** A response's 'close' comes after its client has read it: give it up to half a second. */
const until = async (done: () => boolean) => {
  for (let i = 0; i < 50 && !done(); i++) await sleep(10);
};

test('a request counts from its arrival until its response closes, sent or abandoned; a scan\'s own does not', async () => {
  const gauge = newGauge();
  const held: ServerResponse[] = [];
  const arrived: Array<() => void> = [];
  const server = createServer((_req, res) => {
    held.push(res);
    arrived.shift()?.();
  });
  countRequests(server, '/socket.io', gauge);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const arrival = () => new Promise<void>((resolve) => arrived.push(resolve));
  try {
    assert.equal(othersWaiting(gauge), false, 'nothing in progress');

    // A Socket.IO long poll waits for events: a scan does not give way to it.
    let came = arrival();
    const poll = fetch(`${url}socket.io/?EIO=4&transport=polling`);
    await came;
    assert.equal(othersWaiting(gauge), false, 'a long poll is not counted');

    // One request in progress, which is a scan's: nobody else waits.
    came = arrival();
    const scan = fetch(url);
    await came;
    scanStarted(gauge);
    assert.equal(othersWaiting(gauge), false, 'the scan\'s own request is not one it gives way to');

    // Another user's request arrives: the scan gives way until it is answered.
    came = arrival();
    const other = fetch(url);
    await came;
    assert.equal(othersWaiting(gauge), true);
    held[2]!.end('done');
    assert.equal(await (await other).text(), 'done');
    await until(() => !othersWaiting(gauge));
    assert.equal(othersWaiting(gauge), false, 'an answered request no longer counts');

    // A client that goes before its answer: its request stops counting too.
    const gone = new AbortController();
    came = arrival();
    const abandoned = fetch(url, { signal: gone.signal }).catch(() => 'aborted');
    await came;
    assert.equal(othersWaiting(gauge), true);
    gone.abort();
    assert.equal(await abandoned, 'aborted');
    await until(() => !othersWaiting(gauge));
    assert.equal(othersWaiting(gauge), false, 'a request whose client went no longer counts');

    scanEnded(gauge);
    held[1]!.end('report');
    assert.equal(await (await scan).text(), 'report');
    held[0]!.end('poll');
    assert.equal(await (await poll).text(), 'poll');
    await until(() => Atomics.load(gauge, 0) === 0);
    assert.deepEqual([...gauge], [0, 0], 'every count returns to zero');
  } finally {
    for (const res of held) if (!res.writableEnded) res.end();
    server.close();
  }
});

/** A clock the test moves by hand; sleeping moves it too, and each sleep is recorded. */
function manualClock(): PauseClock & { advance(ms: number): void; slept: number[] } {
  let t = 1000;
  const slept: number[] = [];
  return {
    now: () => t,
    sleep: async (ms) => {
      slept.push(ms);
      t += ms;
    },
    advance: (ms) => {
      t += ms;
    },
    slept,
  };
}

test('while others wait, the scans together work one moment in SCANS_ONE_IN, each pausing at most MAX_PAUSE_MS', async () => {
  const gauge = newGauge();
  const clock = manualClock();
  const pause = givingWay(gauge, clock);
  const inProgress = (requests: number, scans: number) => {
    Atomics.store(gauge, 0, requests);
    Atomics.store(gauge, 1, scans);
  };

  inProgress(1, 1); // the scan's own request alone
  clock.advance(40);
  await pause();
  assert.deepEqual(clock.slept, [], 'no pause while nobody else waits');

  assert.equal(SCANS_ONE_IN, 3);
  inProgress(4, 1); // three other requests and the scan's own
  clock.advance(30);
  await pause();
  clock.advance(70);
  await pause();
  assert.deepEqual(clock.slept, [60, 140], 'one scan pauses twice its work (works a third of the time), the pause before not counted as work');

  inProgress(5, 2); // a second scan started: each works a sixth of the time
  clock.advance(20);
  await pause();
  assert.equal(clock.slept.at(-1), 100, 'with two scans, each pauses five times its work');

  clock.advance(10_000);
  await pause();
  assert.equal(clock.slept.at(-1), MAX_PAUSE_MS, 'a long stretch of work pauses at most MAX_PAUSE_MS');

  inProgress(3, 3); // the three requests are scans: nobody else waits
  clock.advance(50);
  await pause();
  assert.equal(clock.slept.length, 4, 'scans do not give way to each other');
});
