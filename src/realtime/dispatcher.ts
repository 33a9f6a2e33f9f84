// Every instance's reader of numbered events: it takes them in event_id order, from where it
// last was, and hands each batch to delivery (realtime/delivery.ts) for the sockets of this
// instance. Told by this instance's relay (with the events), by the others' (NOTIFY), and by a
// poll of its own as a safety net; it reads from the database whenever what it was told does not
// follow on from where it is, so nothing told twice is delivered twice and nothing is skipped.
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../db/database.js';
import type { NumberedEvent } from '../modules/outbox/outbox.events.js';
import { eventBounds, eventsAfter } from '../modules/outbox/outbox.repository.js';
import { BackgroundLoop, type RoundOutcome } from '../ops/background-loop.js';

const BATCH = 500;
const POLL_MS = 1000;

export class Dispatcher {
  /** The last event_id delivered on this instance. */
  position = 0;
  private offered: NumberedEvent[] = [];
  private unlisten: (() => Promise<void>) | undefined;
  private readonly loop: BackgroundLoop;

  constructor(
    private readonly db: Database,
    private readonly deliver: (events: NumberedEvent[]) => Promise<void>,
    log: FastifyBaseLogger,
  ) {
    this.loop = new BackgroundLoop({ name: 'real-time dispatcher', log, pollMs: POLL_MS, round: () => this.round() });
  }

  /** Starts after the last event numbered so far: what came before is for replay. */
  async start(): Promise<void> {
    this.position = (await eventBounds(this.db)).last;
    this.unlisten = await this.db.listen?.('teamlog_events', () => this.loop.wake());
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
    await this.loop.stop();
  }

  /** Events this instance's relay just numbered and committed. */
  offer(events: NumberedEvent[]): void {
    this.offered.push(...events);
    this.loop.wake();
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
      batch = await eventsAfter(this.db, this.position, BATCH);
      // None: offered events beyond a gap the database does not show yet; the gap's own
      // announcement (or the poll) brings them.
      if (batch.length === 0) return 'idle';
      full = batch.length === BATCH;
    }
    await this.deliver(batch);
    this.position = batch[batch.length - 1]!.event_id;
    return full || this.offered.some((e) => e.event_id > this.position) ? 'more' : 'idle';
  }
}
