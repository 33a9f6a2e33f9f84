// A full garbage collection on demand, run once the last audit scan of an instance has ended
// (http/scan-slots.ts).
//
// A verification or an export reads the whole log through node-postgres, whose protocol parser
// allocates a 128 KB buffer whenever a message spans two socket reads and keeps it until the
// statement's answer ends; Node's socket reads are 64 KB Buffers too. Those outlive the young
// generation and wait for a full collection, which V8 starts only once memory outside its heap
// has grown by 64 MB; meanwhile glibc's heap grows under them and stays grown. Measured on one
// million records (docs/performance.md, "Audit evidence"): after a verification the process
// kept 68–77 MB of malloc heap and the NDJSON export that followed peaked at 201–210 MB; with a
// full collection at the end of each scan the malloc heap stayed at 48 MB and the exports peaked
// at 164–174 MB. One collection takes tens of milliseconds, after a scan of seconds.
//
// Scans are ADMIN-only and limited in number, but short ones (a filtered export of a few records)
// can end many times a second, and each collection pauses the instance: collections are spaced
// so that they take at most 2% of its time, and never run less than a second apart.
//
// The gc() function of V8's extension is taken from a fresh context, with --expose-gc set only
// for the moment of its creation: the service's own global object gets no gc.
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

/** The largest share of the instance's time that collections may take. */
const MAX_SHARE = 0.02;
/** The shortest time between two collections, ms. */
const MIN_INTERVAL_MS = 1000;

export interface Collector {
  /** Runs a full, compacting collection unless the last one was too recent (see the top of this file); answers whether it ran. */
  collect(): boolean;
  /** Milliseconds until a collection may run again (0: now). */
  waitMs(): number;
}

/** A collector over `gc` (none: it never runs) and a clock in milliseconds (performance.now: monotonic). */
export function createCollector(gc: (() => void) | undefined, clock: () => number = () => performance.now()): Collector {
  let notBefore = -Infinity;
  return {
    collect() {
      const started = clock();
      if (!gc || started < notBefore) return false;
      gc();
      const ended = clock();
      notBefore = ended + Math.max(MIN_INTERVAL_MS, (ended - started) / MAX_SHARE);
      return true;
    },
    waitMs: () => Math.max(0, notBefore - clock()),
  };
}

const gc = takeGc();

/** The process's collector: the one the audit scans use. */
export const fullCollection = createCollector(gc);

/**
 * A young-generation collection (a scavenge, under a millisecond), run by the main thread every
 * few MB of an export's output arriving from its worker thread (audit/evidence/scan.pool.ts).
 * The output arrives as 64 KB ArrayBuffers moved from the worker, which die once written to the
 * socket; V8 counts them as memory outside its heap, against a limit it sets just above the heap
 * when the thread allocates little (as this one does while a worker exports: a growing factor of
 * 1.1, --trace-gc-verbose), and this thread makes too little garbage of its own for a scavenge to
 * come and free them. Measured on an export of a million records after a verification, without
 * it: incremental marking and a full collection every ~100 ms, 60-77 of them, and 2-4 µs of CPU
 * a record more on the platform's threads; with one every 4 MB: 4, and 370 scavenges of 0.8 ms.
 * Nothing when gc() was refused.
 */
export const youngCollection = (): void => gc?.({ type: 'minor' });
