// Every instance's reader of numbered events: it takes them in event_id order, from where it
// last was, and hands each batch to delivery (realtime/delivery.ts) for the sockets of this
// instance. Told by this instance's sequencer (with the rows), by the others' (NOTIFY), and by a
// poll of its own as a safety net; it reads from the database whenever what it was told does not
// follow on from where it is, so nothing told twice is delivered twice and nothing is skipped.
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../db/database.js';
import { eventBounds, eventsAfter, type NumberedEvent } from '../modules/outbox/outbox.js';

const BATCH = 500;
const POLL_MS = 1000;

export class Dispatcher {
  /** The last event_id delivered on this instance. */
  position = 0;
  private offered: NumberedEvent[] = [];
  private mustRead = false;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private poll: NodeJS.Timeout | undefined;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly db: Database,
    private readonly deliver: (events: NumberedEvent[]) => Promise<void>,
    private readonly log: FastifyBaseLogger,
  ) {}

  /** Starts after the last event numbered so far: what came before is for replay. */
  async start(): Promise<void> {
    this.position = (await eventBounds(this.db)).last;
    this.unlisten = await this.db.listen?.('teamlog_events', () => this.wake());
    this.poll = setInterval(() => this.wake(), POLL_MS);
    this.poll.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poll);
    await this.unlisten?.();
    await this.running;
  }

  /** Rows this instance's sequencer just numbered and committed. */
  offer(events: NumberedEvent[]): void {
    this.offered.push(...events);
    this.kick();
  }

  /** Something may have been numbered elsewhere: read from the database. */
  wake(): void {
    this.mustRead = true;
    this.kick();
  }

  private kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drain()
      .catch((err) => {
        this.log.warn({ err }, 'real-time dispatcher: read failed; retrying');
        this.mustRead = true;
      })
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  private async drain(): Promise<void> {
    for (;;) {
      if (this.stopped) return;
      this.offered = this.offered.filter((e) => e.event_id > this.position);
      let batch: NumberedEvent[];
      if (this.offered[0]?.event_id === this.position + 1) {
        // What this instance numbered follows on from here: no need to read it back.
        let n = 1;
        while (n < this.offered.length && this.offered[n]!.event_id === this.offered[n - 1]!.event_id + 1) n++;
        batch = this.offered.splice(0, n);
      } else if (this.mustRead || this.offered.length > 0) {
        batch = await eventsAfter(this.db, this.position, BATCH);
        this.mustRead = batch.length === BATCH;
        if (batch.length === 0) {
          this.offered = [];
          return;
        }
      } else {
        return;
      }
      await this.deliver(batch);
      this.position = batch[batch.length - 1]!.event_id;
    }
  }
}
