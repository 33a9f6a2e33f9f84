// MAX_CONCURRENT_AUDIT_SCANS (docs/api.md section 7): audit exports and verifications read the whole
// log, so an instance runs at most that many at once; one more is refused with 429
// RATE_LIMITED and Retry-After instead of queueing behind them, so that an administrator cannot
// starve every other user. A slot is held from the start of the request until the scan ends,
// fails, or (an export) its client goes. Per instance: it is this instance's time that a scan
// takes, and a client refused here may be served by another. When the last running scan ends,
// the instance runs a full garbage collection (process/full-collection.ts).
import { fullCollection, type Collector } from '../process/full-collection.js';
import { rateLimitedAnswer } from './errors.js';

export type ScanKind = 'export' | 'verify';

/** Seconds a refused client is told to wait: scans take seconds on a large log. */
export const SCAN_RETRY_AFTER_SECONDS = 5;

export interface ScanSlots {
  /** Takes a slot, or throws 429 RATE_LIMITED; answers its release (once is enough; later calls do nothing). */
  take(kind: ScanKind): () => void;
  /**
   * Awaited once a slot is taken, before the scan reads anything: at once in production; a
   * test's pause (Deps.testHooks.whileScanHolds) holds scans open there.
   */
  holding(kind: ScanKind): Promise<void>;
}

/** The counters the slots keep (the app's metrics, ops/metrics.ts: teamlog_limited_total, teamlog_audit_scans_running). */
export interface ScanMetrics {
  limited: { inc(labels: { limit: string }): void };
  auditScansRunning: { inc(labels: { kind: ScanKind }): void; dec(labels: { kind: ScanKind }): void };
}

/**
 * `pause`: a test's (see ScanSlots.holding); `collector`: the full collections once the last
 * scan ends (the process's in production).
 */
export function createScanSlots(max: number, metrics: ScanMetrics, pause?: (kind: ScanKind) => Promise<void>, collector: Collector = fullCollection): ScanSlots {
  let running = 0;
  return {
    holding: async (kind) => {
      await pause?.(kind);
    },
    take(kind) {
      if (running >= max) {
        metrics.limited.inc({ limit: 'audit_scans' });
        throw rateLimitedAnswer(
          SCAN_RETRY_AFTER_SECONDS,
          `${max} audit export${max === 1 ? '' : 's'} or verification${max === 1 ? '' : 's'} already running here (MAX_CONCURRENT_AUDIT_SCANS); try again in a few seconds`,
        );
      }
      running++;
      metrics.auditScansRunning.inc({ kind });
      let held = true;
      return () => {
        if (!held) return;
        held = false;
        running--;
        metrics.auditScansRunning.dec({ kind });
        // What the scans left for a full collection goes now, not once V8 gets to it
        // (process/full-collection.ts says why): once the last of them has ended, after this turn.
        if (running === 0) setImmediate(() => running === 0 && collector.collect());
      };
    },
  };
}
