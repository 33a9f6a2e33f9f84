// The audit scans of the API (GET /audit-logs/verify and /audit-logs/export) run in worker
// threads at the lowest CPU priority, so that a scan takes the CPU the requests leave, instead
// of taking turns with them on the main thread, where one verification made other users'
// requests many times slower (issue 39, item 6; docs/performance.md, "Audit scans off the
// request path"; docs/audit-integrity.md, §5, "Where the API's scans run").
//
// A worker runs the same code as the CLI (log.verifier.ts, export.stream.ts) over a Queryable of its own:
// on PostgreSQL, connections the worker opens itself (Database.threadAccess), so that reading,
// parsing and hashing the log all happen off the main thread; on PGlite, whose one connection
// lives in the main thread, a Queryable that posts each statement here (db/thread-queries.ts),
// so that the main thread runs the statements, one at a time between requests, and the worker
// the rest. An export's output comes back as Buffers moved (not copied) to this thread, a window
// of them at a time: the stream asks for more as its client takes them (constant memory, as
// before). The right to read the log is checked here, before each block, as it was.
//
// At most `size` workers are kept (MAX_CONCURRENT_AUDIT_SCANS: scan-slots.ts admits no more
// scans than that); each is started at the first scan that needs it, reused, and ended after a
// minute without a scan, or when the app closes.
import { Readable } from 'node:stream';
import type { Worker } from 'node:worker_threads';
import type { Database } from '../../../db/database.js';
import { createQueryServer, errorFromWire, errorToWire, type QueryAnswer, type QueryRequest, type QueryServer, type WireError } from '../../../db/thread-queries.js';
import { DomainError, type DomainErrorDetails, type ErrorKind } from '../../../domain/errors.js';
import { moduleWorker } from '../../../process/module-worker.js';
import { youngCollection } from '../../../process/full-collection.js';
import { requestGauge, scanEnded, scanStarted } from '../../../process/request-gauge.js';
import type { AuditFilters } from '../audit.repository.js';
import type { ExportFormat } from './export.stream.js';
import type { ReadPlan, VerifyReport } from './log.verifier.js';

/** What a worker needs to verify the log: plain data (it crosses threads). */
export interface VerifyJob {
  origin: string;
  /** Note verifier keys (`<name>+<hash>+<key>`) the newest checkpoint must verify under. */
  anchors: string[];
  personalDataKeys: Uint8Array[];
  sealStallMs?: number;
  external?: string;
  progress: boolean;
  reads?: ReadPlan;
}

/** What a worker needs to export the log (export.stream.ts, ExportOptions), but the entitlement check, which stays here. */
export interface ExportJob {
  filters: AuditFilters;
  format: ExportFormat;
  chunk: number;
  block: number;
  ahead: number;
  checksEntitlement: boolean;
  /** The witness policy's text, when one is in force (export.stream.ts). */
  witnessPolicy?: string;
}

export interface ScanWorkerData {
  /** PostgreSQL: the worker's own connections; none: its statements come to this thread. */
  access?: Database['threadAccess'];
  /** The process's request gauge (process/request-gauge.ts): the scan gives way while others wait. */
  gauge: SharedArrayBuffer;
}

/** Messages to a worker. */
export type ToWorker =
  | QueryAnswer
  | { type: 'verify'; job: VerifyJob }
  | { type: 'export'; job: ExportJob; window: number }
  | { type: 'more'; n: number }
  | { type: 'cancel' }
  | { type: 'entitled'; eid: number; error?: WireError }
  | { type: 'close' };

/** Messages from a worker. */
export type FromWorker =
  | QueryRequest
  | { type: 'progress'; checked: number; total: number }
  | { type: 'report'; report: VerifyReport }
  | { type: 'chunk'; bytes: Uint8Array }
  | { type: 'end' }
  | { type: 'cancelled' }
  | { type: 'failed'; error: WireError }
  | { type: 'entitled?'; eid: number }
  | { type: 'warning'; error: WireError };

/** Export chunks (64 KB each: export.buffer.ts) a worker may have sent that the stream's consumer has not taken yet. */
const EXPORT_WINDOW = 8;
/** Output bytes between two young-generation collections on this thread (process/full-collection.ts, youngCollection, says why). */
const YOUNG_COLLECTION_BYTES = 4 * 1024 * 1024;
/**
 * The worker's young generation, MB (V8's default is 16 MB a semi-space, as on the main thread):
 * a smaller one keeps the server's peak RSS in a verification lower, at the same CPU a record
 * (docs/performance.md, "Audit scans off the request path").
 */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 8 };
/**
 * On PGlite the workers' statements run on this thread (db/thread-queries.ts), at most this share
 * of it while requests come, and each of them short: whenever a request arrives during one, it
 * waits for it. The reads are smaller than the CLI's for that: 500 records a read (PGlite plans a
 * larger read of the seal as a sort of every record from there to its end), 16 stored tiles
 * rather than 64, ids a look for one never sealed 10,000 rather than 100,000, an export's block
 * 512 records (256 made a lone export slower). What each took: docs/performance.md, "Audit scans
 * off the request path".
 */
const PGLITE_SCAN_SHARE = 0.25;
const PGLITE_READS: ReadPlan = { chunk: 500, ahead: 1, idRange: 10_000, tilePage: 16 };
const PGLITE_EXPORT = { block: 512, ahead: 1 };
/** A worker with no scan for this long is ended (its heap goes with it); the next scan starts one again. */
const IDLE_MS = 60_000;
/** How long a closing worker may take to close its connections before it is terminated. */
const CLOSE_MS = 5_000;

/** An error from a worker, as it was thrown there: a domain error stays one (its HTTP status depends on it). */
function fromWire(wire: WireError): Error {
  if (wire.name === 'DomainError') {
    const f = wire.fields as { kind: ErrorKind; code: string; detail: string; details?: DomainErrorDetails };
    const err = new DomainError(f.kind, f.code, f.detail, f.details ?? {});
    if (wire.stack) err.stack = wire.stack;
    return err;
  }
  return errorFromWire(wire);
}

/** A terminal message of a job: the worker is free again after it. */
const ENDS_JOB = new Set<FromWorker['type']>(['report', 'end', 'cancelled', 'failed']);

class ScanWorker {
  /** The running job's handler of the worker's messages; undefined while idle. */
  private handler: ((m: FromWorker) => void) | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private closing: Promise<void> | undefined;
  gone = false;

  constructor(
    private readonly worker: Worker,
    queries: QueryServer,
    private readonly onGone: (w: ScanWorker) => void,
    onWarning: (err: Error) => void,
  ) {
    worker.on('message', (m: FromWorker) => {
      if (m.type === 'query') return queries.answer(m, (answer) => this.post(answer));
      if (m.type === 'warning') return onWarning(fromWire(m.error));
      this.handler?.(m);
    });
    // An exception the worker did not catch ends it: the job fails with it.
    worker.on('error', (err) => this.end(err));
    worker.on('exit', (code) => this.end(new Error(`the audit scan's worker thread stopped (exit code ${code})`)));
  }

  private end(err: Error): void {
    if (this.gone) return;
    this.gone = true;
    clearTimeout(this.idleTimer);
    this.handler?.({ type: 'failed', error: errorToWire(err) });
    this.onGone(this);
  }

  post(m: ToWorker, transfer?: ArrayBuffer[]): void {
    if (!this.gone) this.worker.postMessage(m, transfer);
  }

  /** Runs a job: `handle` hears the worker's messages until one ends the job, then `done` runs. */
  run(first: ToWorker, handle: (m: FromWorker) => void, done: () => void): void {
    clearTimeout(this.idleTimer);
    this.worker.ref();
    scanStarted();
    this.handler = (m) => {
      const last = ENDS_JOB.has(m.type);
      if (last) {
        this.handler = undefined;
        scanEnded();
      }
      handle(m);
      if (last) done();
    };
    this.post(first);
  }

  /** Idle: it keeps no process alive, and ends after IDLE_MS unless a job comes. */
  rest(onIdle: () => void): void {
    this.worker.unref();
    this.idleTimer = setTimeout(onIdle, IDLE_MS);
    this.idleTimer.unref();
  }

  /** Ends the thread (once, however many ask): a running job at once, an idle worker once it has closed its connections. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.gone) return;
      clearTimeout(this.idleTimer);
      const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
      if (this.handler) {
        // A job still running when the app closes: it ends now.
        await this.worker.terminate();
        return;
      }
      this.post({ type: 'close' });
      const timer = setTimeout(() => void this.worker.terminate(), CLOSE_MS);
      await exited;
      clearTimeout(timer);
    })();
    return this.closing;
  }
}

export interface ScanPool {
  verify(job: Omit<VerifyJob, 'progress'>, onProgress?: (checked: number, total: number) => void): Promise<VerifyReport>;
  /** The export as a byte stream; `stillEntitled` throws when the caller may no longer read the log (awaited before each block). */
  exportStream(job: Omit<ExportJob, 'checksEntitlement'>, stillEntitled?: () => Promise<void>): Readable;
  close(): Promise<void>;
}

export function createScanPool(db: Database, options: { size: number; onWarning?: (err: Error) => void }): ScanPool {
  const idle: ScanWorker[] = [];
  const all = new Set<ScanWorker>();
  let closed = false;
  const embedded = db.kind === 'pglite';
  const data: ScanWorkerData = { ...(db.threadAccess ? { access: db.threadAccess } : {}), gauge: requestGauge.buffer as SharedArrayBuffer };
  /** The workers' statements on PGlite, run here as a background job (none come on PostgreSQL). */
  const queries = createQueryServer(db, PGLITE_SCAN_SHARE);

  function forget(w: ScanWorker): void {
    all.delete(w);
    const i = idle.indexOf(w);
    if (i !== -1) idle.splice(i, 1);
  }

  function acquire(): ScanWorker {
    if (closed) throw new Error('the audit scans have been closed (the service is stopping)');
    const reused = idle.pop();
    if (reused) return reused;
    const w = new ScanWorker(moduleWorker('scan.worker', import.meta.url, { workerData: data, resourceLimits: WORKER_LIMITS }), queries, forget, options.onWarning ?? (() => {}));
    all.add(w);
    return w;
  }

  function release(w: ScanWorker): void {
    if (w.gone) return;
    if (closed || idle.length >= options.size) {
      forget(w);
      void w.close();
      return;
    }
    idle.push(w);
    w.rest(() => {
      forget(w);
      void w.close();
    });
  }

  return {
    verify(job, onProgress) {
      return new Promise<VerifyReport>((resolve, reject) => {
        const w = acquire();
        w.run(
          { type: 'verify', job: { ...job, progress: onProgress !== undefined, ...(embedded ? { reads: PGLITE_READS } : {}) } },
          (m) => {
            if (m.type === 'progress') onProgress?.(m.checked, m.total);
            else if (m.type === 'report') resolve(m.report);
            else if (m.type === 'failed') reject(fromWire(m.error));
          },
          () => release(w),
        );
      });
    },

    exportStream(job, stillEntitled) {
      let w: ScanWorker | undefined;
      /** Chunks received, and those the worker was told were taken. */
      let received = 0;
      let granted = 0;
      let finished = false;
      /** Bytes received since the last young-generation collection. */
      let arrived = 0;
      const stream = new Readable({
        read() {
          if (!w) {
            try {
              start();
            } catch (err) {
              this.destroy(err as Error);
            }
            return;
          }
          // The consumer wants more: what it has taken may be replaced.
          if (received > granted) {
            w.post({ type: 'more', n: received - granted });
            granted = received;
          }
        },
        destroy(err, callback) {
          // The client went, or the stream failed: a worker still exporting stops.
          if (w && !finished) w.post({ type: 'cancel' });
          callback(err);
        },
      });
      const start = () => {
        const worker = (w = acquire());
        worker.run(
          { type: 'export', job: { ...job, checksEntitlement: stillEntitled !== undefined, ...(embedded ? PGLITE_EXPORT : {}) }, window: EXPORT_WINDOW },
          (m) => {
            switch (m.type) {
              case 'chunk':
                received++;
                if (!stream.destroyed) stream.push(Buffer.from(m.bytes.buffer, m.bytes.byteOffset, m.bytes.byteLength));
                arrived += m.bytes.byteLength;
                if (arrived >= YOUNG_COLLECTION_BYTES) {
                  arrived = 0;
                  youngCollection();
                }
                break;
              case 'entitled?':
                stillEntitled!().then(
                  () => worker.post({ type: 'entitled', eid: m.eid }),
                  (err: unknown) => worker.post({ type: 'entitled', eid: m.eid, error: errorToWire(err) }),
                );
                break;
              case 'end':
                finished = true;
                stream.push(null);
                break;
              case 'failed':
                finished = true;
                stream.destroy(fromWire(m.error));
                break;
              case 'cancelled':
                finished = true;
                break;
            }
          },
          () => release(worker),
        );
      };
      return stream;
    },

    async close() {
      closed = true;
      queries.close();
      idle.length = 0;
      await Promise.all([...all].map((w) => w.close()));
      all.clear();
    },
  };
}
