// The wake latch (src/process/wake-latch.ts): the main thread posts the sealer's thread a wake
// only when the latch was lowered; the thread lowers it as its round begins. Tried here across a
// real worker thread, since the latch's point is the thread boundary.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { WakeLatch } from '../src/process/wake-latch.js';

test('a raised latch asks for one post until it is lowered again', () => {
  const latch = new WakeLatch();
  assert.equal(latch.raise(), true, 'the first wake is posted');
  assert.equal(latch.raise(), false, 'a second before the round begins is not');
  assert.equal(latch.raise(), false);
  latch.lower();
  assert.equal(latch.raise(), true, 'a wake after the round began is posted again');
});

test('a latch lowered by another thread is seen lowered by the thread that raised it', async () => {
  const latch = new WakeLatch();
  assert.equal(latch.raise(), true);
  // The worker makes the same latch from the buffer, as sealing.worker.ts does, and lowers it.
  const worker = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads');
     const cell = new Int32Array(workerData);
     parentPort.postMessage(Atomics.load(cell, 0));
     Atomics.store(cell, 0, 0);
     parentPort.postMessage('lowered');`,
    { eval: true, workerData: latch.buffer },
  );
  const messages: unknown[] = [];
  await new Promise<void>((resolve, reject) => {
    worker.on('message', (m) => {
      messages.push(m);
      if (m === 'lowered') resolve();
    });
    worker.on('error', reject);
  });
  await worker.terminate();
  assert.deepEqual(messages, [1, 'lowered'], 'the worker saw the raise through the shared buffer');
  assert.equal(latch.raise(), true, 'lowered over there: the next wake is posted');
  assert.equal(latch.raise(), false);
});
