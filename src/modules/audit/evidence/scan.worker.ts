// A worker thread of the audit scans (scan.pool.ts): runs the API's verifications and exports,
// one at a time, at the lowest CPU priority. On Linux a thread is scheduled on its own and has a
// nice value of its own: setpriority(PRIO_PROCESS, 0, …), which os.setPriority(0, …) calls, sets
// the calling thread's (the main thread and the rest of the process keep theirs; checked with
// /proc/self/task/<tid>/stat). Elsewhere it may set the whole process's, which must not happen
// to the service: there the worker keeps its priority.
import os from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import type { Queryable } from '../../../db/database.js';
import { createPostgresDatabase } from '../../../db/postgres.js';
import { fullCollection } from '../../../process/full-collection.js';
import { errorFromWire, errorToWire, remoteQueryable } from '../../../db/thread-queries.js';
import { exportAuditLog } from './export.stream.js';
import type { ExportJob, FromWorker, ScanWorkerData, ToWorker, VerifyJob } from './scan.pool.js';
import { parseVerifierKey } from '../../../tlog/signed-note.js';
import { verifyDatabase } from './log.verifier.js';
import { gaugeOn, givingWay } from '../../../process/request-gauge.js';

/** The lowest priority: the scan runs on the CPU time that nothing else wants. */
const SCAN_NICE = 19;
if (process.platform === 'linux') {
  try {
    os.setPriority(0, SCAN_NICE);
  } catch {
    // Not allowed here (a sandbox): the scan runs at the service's priority.
  }
}

const port = parentPort!;
const post = (m: FromWorker, transfer?: ArrayBuffer[]) => port.postMessage(m, transfer);
const { access, gauge } = workerData as ScanWorkerData;
const remote = access ? undefined : remoteQueryable((request) => post(request));
/**
 * A scan's own connections, at most four: two for its prepared reads (the one being checked or
 * written and the one ahead), two for the rest; `teamlog-audit-scan` in pg_stat_activity. A read
 * beyond them (an export reads two blocks ahead) waits for one as long as it takes: on a loaded
 * machine a block's read took over the pool's 3 s bound, and the export was answered 503.
 */
const database = access
  ? createPostgresDatabase({
      ...access, poolSize: 2, perCallPoolSize: 2, applicationName: 'teamlog-audit-scan', waitForConnections: true,
      onError: (err) => post({ type: 'warning', error: errorToWire(err) }),
    })
  : undefined;
const db: Queryable = database ?? remote!.db;
const others = gaugeOn(gauge);

/** Jobs under way: one at a time (the pool gives a worker one job at once). */
let running = 0;
/** What the running export hears from the main thread. */
let job: { more(n: number): void; cancel(): void } | undefined;
/** Entitlement checks asked of the main thread, by id (ids never repeat: an answer for a job that ended finds nothing). */
const entitlements = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
let nextEid = 0;

port.on('message', (m: ToWorker) => {
  switch (m.type) {
    case 'rows':
      remote?.settle(m);
      break;
    case 'verify':
      void verify(m.job);
      break;
    case 'export':
      void exportLog(m.job, m.window);
      break;
    case 'more':
      job?.more(m.n);
      break;
    case 'cancel':
      job?.cancel();
      break;
    case 'entitled': {
      const e = entitlements.get(m.eid);
      entitlements.delete(m.eid);
      if (m.error) e?.reject(errorFromWire(m.error));
      else e?.resolve();
      break;
    }
    case 'close':
      void close();
      break;
  }
});

async function verify(o: VerifyJob): Promise<void> {
  running++;
  try {
    const report = await verifyDatabase(db, {
      anchors: o.anchors.map(parseVerifierKey),
      origin: o.origin,
      personalDataKeys: o.personalDataKeys.map((k) => Buffer.from(k)),
      ...(o.sealStallMs !== undefined ? { sealStallMs: o.sealStallMs } : {}),
      ...(o.external !== undefined ? { external: o.external } : {}),
      ...(o.reads ? { reads: o.reads } : {}),
      betweenChunks: givingWay(others),
      ...(o.progress ? { onProgress: (checked: number, total: number) => post({ type: 'progress', checked, total }) } : {}),
    });
    post({ type: 'report', report });
  } catch (err) {
    post({ type: 'failed', error: errorToWire(err) });
  } finally {
    afterJob();
  }
}

/**
 * What a scan left in this thread's heap goes at once, as on the main thread after its scans
 * (process/full-collection.ts): this thread's own collector, spaced the same way.
 */
function afterJob(): void {
  running--;
  setImmediate(() => running === 0 && fullCollection.collect());
}

/**
 * A chunk of the export as bytes this thread gives away (moved to the main thread, not copied):
 * export.stream.ts yields its text as strings and as the Buffers of export.buffer.ts, each on an
 * ArrayBuffer of its own that is never written again once handed out. Anything else is copied
 * first (a Buffer from Node's shared pool must never be moved).
 */
function ownBytes(part: string | Buffer): Buffer {
  if (typeof part === 'string') {
    const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(part));
    bytes.write(part);
    return bytes;
  }
  if (part.byteOffset === 0 && part.buffer.byteLength > Buffer.poolSize) return part;
  const copy = Buffer.allocUnsafeSlow(part.length);
  part.copy(copy);
  return copy;
}

async function exportLog(o: ExportJob, window: number): Promise<void> {
  running++;
  let credit = window;
  let cancelled = false;
  let wake: (() => void) | undefined;
  job = {
    more(n) {
      credit += n;
      wake?.();
    },
    cancel() {
      cancelled = true;
      wake?.();
    },
  };
  const stillEntitled = o.checksEntitlement
    ? () =>
        new Promise<void>((resolve, reject) => {
          const eid = ++nextEid;
          entitlements.set(eid, { resolve, reject });
          post({ type: 'entitled?', eid });
        })
    : undefined;
  const parts = exportAuditLog(db, { filters: o.filters, format: o.format, chunk: o.chunk, block: o.block, ahead: o.ahead, ...(stillEntitled ? { stillEntitled } : {}), ...(o.witnessPolicy !== undefined ? { witnessPolicy: o.witnessPolicy } : {}) });
  const giveWay = givingWay(others);
  try {
    for (;;) {
      while (credit <= 0 && !cancelled) await new Promise<void>((resolve) => (wake = resolve));
      if (cancelled) break;
      await giveWay();
      const step = await parts.next();
      if (step.done) break;
      const bytes = ownBytes(step.value);
      credit--;
      post({ type: 'chunk', bytes }, [bytes.buffer as ArrayBuffer]);
    }
    if (cancelled) {
      await parts.return(undefined);
      post({ type: 'cancelled' });
    } else {
      post({ type: 'end' });
    }
  } catch (err) {
    post(cancelled ? { type: 'cancelled' } : { type: 'failed', error: errorToWire(err) });
  } finally {
    job = undefined;
    afterJob();
  }
}

async function close(): Promise<void> {
  try {
    await database?.close();
  } finally {
    remote?.failAll(new Error('the audit scan worker is closing'));
    port.close();
  }
}
