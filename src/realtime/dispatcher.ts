// Every instance's reader of numbered events: it takes them in event_id order, from where it
// last was, and hands each batch to delivery (realtime/delivery.ts) for the sockets of this
// instance. Told by this instance's relay (with the events), by the others' (NOTIFY), and by a
// poll of its own as a safety net; it reads from the database whenever what it was told does not
// follow on from where it is, so nothing told twice is delivered twice and nothing is skipped.
// Each batch is told twice on the instance that numbered it (its relay's hand-over, its own
// NOTIFY): a telling that adds nothing to what is delivered or in hand wakes nothing, or every
// batch would cost a read of the database that finds nothing.
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../db/database.js';
import type { NumberedEvent } from '../modules/outbox/outbox.events.js';
import { eventBounds, eventsAfter } from '../modules/outbox/outbox.repository.js';
import { BackgroundLoop, type RoundOutcome } from '../background/background-loop.js';

const BATCH = 500;
const POLL_MS = 1000;

export class Dispatcher {
  /** The last event_id delivered on this instance. */
  position = 0;
  private offered: NumberedEvent[] = [];
  /** The last event_id of the batch being delivered now (0: none). */
  private delivering = 0;
  /**
   * Whether the database may hold events after the position that this instance was not handed:
   * set by an announcement beyond what it has in hand and by the poll, cleared by a read.
   */
  private unseen = true;
  private unlisten: (() => Promise<void>) | undefined;
  private readonly loop: BackgroundLoop;

  constructor(
    private readonly db: Database,
    private readonly deliver: (events: NumberedEvent[]) => Promise<void>,
    log: FastifyBaseLogger,
  ) {
    this.loop = new BackgroundLoop({ name: 'real-time dispatcher', log, pollMs: POLL_MS, onPoll: () => (this.unseen = true), round: () => this.round() });
  }

  /** Starts after the last event numbered so far: what came before is for replay. */
  async start(): Promise<void> {
    this.position = (await eventBounds(this.db)).last;
    this.unlisten = await this.db.listen?.('teamlog_events', (payload) => this.announced(payload));
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
    await this.loop.stop();
  }

  /** Events this instance's relay just numbered and committed. */
  offer(events: NumberedEvent[]): void {
    const fresh = events.filter((e) => e.event_id > this.inHand());
    if (fresh.length === 0) return;
    this.offered.push(...fresh);
    this.loop.wake();
  }

  /** A relay (this instance's or another's) committed events up to `payload` (NOTIFY). */
  private announced(payload: string): void {
    const upTo = Number(payload);
    if (Number.isSafeInteger(upTo) && upTo <= this.inHand()) return;
    this.unseen = true;
    this.loop.wake();
  }

  /**
   * The last event_id this instance will deliver without reading the database: the position (or
   * the end of the batch being delivered), or the end of the offered events that follow on from
   * it without a gap.
   */
  private inHand(): number {
    let end = Math.max(this.position, this.delivering);
    for (const e of this.offered) {
      if (e.event_id === end + 1) end = e.event_id;
      else if (e.event_id > end) break;
    }
    return end;
  }

  /** One batch: what this instance numbered when it follows on from here, else what the database holds after here. */
  private async round(): Promise<RoundOutcome> {
    this.offered = this.offered.filter((e) => e.event_id > this.position);
    let batch: NumberedEvent[];
    let full = false;
    if (this.offered[0]?.event_id === this.position + 1) {
      let n = 1;
      while (n < this.offered.length && this.offered[n]!.event_id === this.offered[n - 1]!.event_id + 1) n++;
      batch = this.offered.splice(0, n);
    } else {
      // Nothing announced beyond what this instance has, and no poll since the last read: the
      // wake was a hand-over already delivered (it arrived during a read that brought it).
      if (!this.unseen) return 'idle';
      // Cleared before the read: an announcement during it may be of rows it does not see.
      this.unseen = false;
      try {
        batch = await eventsAfter(this.db, this.position, BATCH);
      } catch (err) {
        this.unseen = true;
        throw err;
      }
      // None: offered events beyond a gap the database does not show yet; the gap's own
      // announcement (or the poll) brings them.
      if (batch.length === 0) return 'idle';
      full = batch.length === BATCH;
      if (full) this.unseen = true;
    }
    this.delivering = batch[batch.length - 1]!.event_id;
    try {
      await this.deliver(batch);
    } catch (err) {
      // Retried by the loop, from the position: the batch is read from the database again.
      this.unseen = true;
      throw err;
    } finally {
      this.delivering = 0;
    }
    this.position = batch[batch.length - 1]!.event_id;
    return full || this.offered.some((e) => e.event_id > this.position) ? 'more' : 'idle';
  }
}
