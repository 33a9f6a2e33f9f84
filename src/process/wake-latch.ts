// A wake that crosses to a worker thread once, however many times it is given before the thread
// takes it. Posting a message per audited commit cost the main thread a structured clone and a
// thread wake-up each, and the thread an event-loop turn each, for a loop that then lingers and
// runs one round for all of them (sealing.thread.ts). The latch is one shared integer: the
// giver posts only when it raises a lowered latch; the thread lowers it as its round begins,
// before that round reads, so a wake given after the lowering is for work the round may not see,
// and is posted again. No wake is lost: one given before the lowering is for work already
// committed, which the round reads.

export class WakeLatch {
  private readonly cell: Int32Array;

  /** `shared`: the buffer of a latch made on the other side of the thread boundary; a new one without. */
  constructor(shared?: SharedArrayBuffer) {
    this.cell = new Int32Array(shared ?? new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
  }

  /** What the other thread needs to make the same latch (it crosses in workerData). */
  get buffer(): SharedArrayBuffer {
    return this.cell.buffer as SharedArrayBuffer;
  }

  /** Raises the latch; true when it was lowered, and the wake must be posted. */
  raise(): boolean {
    return Atomics.exchange(this.cell, 0, 1) === 0;
  }

  /** Lowers it: the next raise posts. */
  lower(): void {
    Atomics.store(this.cell, 0, 0);
  }
}
