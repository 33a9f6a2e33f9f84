// Garbage collection on demand, for the audit scans: a full collection once the last scan of an
// instance has ended (http/scan-slots.ts), so that what a scan's reads left behind is freed
// before the next scan grows the heap further (docs/performance.md, "Memory after audit scans",
// has the figures); collections are spaced to take at most 2% of the instance's time.
// gc() comes from a fresh context with --expose-gc set only meanwhile: the service's global
// object gets no gc.
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';

/** V8's gc(): a full collection, or with `{type: 'minor'}` a young-generation one. */
type Gc = (options?: { type: 'minor' | 'major' }) => void;

function takeGc(): Gc | undefined {
  v8.setFlagsFromString('--expose-gc');
  try {
    const gc: unknown = runInNewContext('gc');
    return typeof gc === 'function' ? (gc as Gc) : undefined;
  } catch {
    return undefined;
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}

/** How far apart collections are: at least minIntervalMs, and far enough for them to take at most maxShare of the time. */
export interface Spacing {
  maxShare: number;
  minIntervalMs: number;
}

/** At most 2% of the instance's time, at least a second apart. */
const SPACING: Spacing = { maxShare: 0.02, minIntervalMs: 1000 };

export interface Collector {
  /** Runs a full, compacting collection unless the last one was too recent (see the top of this file); answers whether it ran. */
  collect(): boolean;
  /** Milliseconds until a collection may run again (0: now). */
  waitMs(): number;
}

/** A collector over `gc` (none: it never runs) and a clock in milliseconds (performance.now: monotonic). */
export function createCollector(gc: (() => void) | undefined, clock: () => number = () => performance.now(), spacing: Spacing = SPACING): Collector {
  let notBefore = -Infinity;
  return {
    collect() {
      const started = clock();
      if (!gc || started < notBefore) return false;
      gc();
      const ended = clock();
      notBefore = ended + Math.max(spacing.minIntervalMs, (ended - started) / spacing.maxShare);
      return true;
    },
    waitMs: () => Math.max(0, notBefore - clock()),
  };
}

const gc = takeGc();

/** The process's collector: the one the audit scans use. */
export const fullCollection = createCollector(gc);

/**
 * Another collector over this process's collections, spaced otherwise (TestHooks.scanCollector):
 * a test that waits for the spacing would otherwise wait 50 times as long as a collection takes,
 * which a loaded machine stretches to seconds.
 */
export const spacedCollector = (spacing: Spacing): Collector => createCollector(gc, undefined, spacing);

/**
 * A young-generation collection, run every few MB of an export's output that a worker thread
 * hands this thread (audit/evidence/scan.pool.ts): those buffers die young, and without it this
 * thread, which allocates little else meanwhile, ran full collections instead (docs/performance.md).
 * Nothing when gc() was refused.
 */
export const youngCollection = (): void => gc?.({ type: 'minor' });
