// The sealer and the checkpointer in a worker thread of their own, on PostgreSQL (issue 39).
// Sealing parses each record's sealed form, hashes it into the tree and builds the tiles: on the
// main thread those rounds ran between the requests, so a lone request that arrived during one
// waited for it (a lone write's p99), and under load every batch's round trips queued behind
// them. In a thread they run beside the requests, on the cores' idle time; the work and its
// statements are the same (evidence.sealer.ts, on connections the thread opens itself,
// `teamlog-audit-sealer` in pg_stat_activity). PGlite keeps them on the main thread: its one
// connection lives there, so a thread would only post every statement back to it.
//
// The main thread tells the thread of audited commits (wake: one message per round of the
// thread's sealer, not one per commit; process/wake-latch.ts), and hears of each seal and
// checkpoint (onSealed: the webhook and the witnesses wake) and of each log line, which it writes
// through its own logger, so that the lines keep its level, redaction and destination. A thread
// that ends unasked (a crash) is logged and started again a second later.
import type { Worker } from 'node:worker_threads';
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../../../db/database.js';
import { errorFromWire, type WireError } from '../../../db/thread-queries.js';
import { moduleWorker } from '../../../process/module-worker.js';
import { WakeLatch } from '../../../process/wake-latch.js';
import type { LogIdentity } from './log.identity.js';

/** What the thread needs: plain data (it crosses threads; a KeyObject does). */
export interface SealingWorkerData {
  access: NonNullable<Database['threadAccess']>;
  identity: LogIdentity;
  checkpointIntervalMs: number;
  /** The main logger's level: lines below it are not sent at all. */
  logLevel: string;
  /** The wake latch's buffer: the thread lowers it as each sealing round begins. */
  wakeLatch: SharedArrayBuffer;
}

export type ToSealingWorker = { type: 'start' } | { type: 'wake' } | { type: 'stop' };

export type FromSealingWorker =
  | { type: 'sealed' }
  | { type: 'stopped' }
  | { type: 'log'; level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'; fields?: Record<string, unknown>; errors?: Record<string, WireError>; msg: string };

/** What audit-workers.ts drives, in a thread or not. */
export interface SealingControl {
  wake(): void;
  start(): void;
  stop(): Promise<void>;
}

export interface SealingThreadOptions {
  access: NonNullable<Database['threadAccess']>;
  identity: LogIdentity;
  checkpointIntervalMs: number;
  log: FastifyBaseLogger;
  onSealed?: () => void;
}

/** How long after a crash the thread is started again. */
const RESTART_MS = 1000;
/** How long stop() waits for the thread's rounds to end before it ends the thread. */
const STOP_TIMEOUT_MS = 10_000;

export function sealingInThread(opts: SealingThreadOptions): SealingControl {
  const latch = new WakeLatch();
  const data: SealingWorkerData = { access: opts.access, identity: opts.identity, checkpointIntervalMs: opts.checkpointIntervalMs, logLevel: opts.log.level, wakeLatch: latch.buffer };
  let worker: Worker | undefined;
  let stopping = false;
  let stopped: (() => void) | undefined;
  let restart: NodeJS.Timeout | undefined;

  const spawn = () => {
    latch.lower(); // a thread that ended with it raised would never be woken again
    const w = moduleWorker('sealing.worker', import.meta.url, { workerData: data });
    worker = w;
    w.on('message', (m: FromSealingWorker) => {
      if (m.type === 'sealed') opts.onSealed?.();
      else if (m.type === 'stopped') stopped?.();
      else if (m.type === 'log') {
        const errors = Object.fromEntries(Object.entries(m.errors ?? {}).map(([k, e]) => [k, errorFromWire(e)]));
        opts.log[m.level]({ ...m.fields, ...errors }, m.msg);
      }
    });
    w.on('error', (err) => opts.log.error({ err }, 'audit sealer: its thread failed'));
    w.on('exit', (code) => {
      if (worker === w) worker = undefined;
      if (stopping) return stopped?.();
      opts.log.error({ code }, `audit sealer: its thread ended unasked; starting it again in ${RESTART_MS} ms`);
      restart = setTimeout(() => {
        restart = undefined;
        if (!stopping) spawn().postMessage({ type: 'start' } satisfies ToSealingWorker);
      }, RESTART_MS);
      restart.unref();
    });
    return w;
  };

  return {
    // Every audited commit: posted only when the latch was lowered, that is once since the
    // thread's last round began (its sealer lingers before a round, for the commits of that moment).
    wake: () => {
      if (worker && latch.raise()) worker.postMessage({ type: 'wake' } satisfies ToSealingWorker);
    },
    start() {
      if (worker || stopping) return;
      spawn().postMessage({ type: 'start' } satisfies ToSealingWorker);
    },
    async stop() {
      stopping = true;
      if (restart) clearTimeout(restart);
      const w = worker;
      if (!w) return;
      const done = new Promise<void>((resolve) => {
        stopped = resolve;
      });
      w.postMessage({ type: 'stop' } satisfies ToSealingWorker);
      const timeout = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), STOP_TIMEOUT_MS).unref());
      if ((await Promise.race([done, timeout])) === 'late') opts.log.warn('audit sealer: its thread did not stop in time; ended');
      await w.terminate();
    },
  };
}
