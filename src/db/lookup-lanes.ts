// Key lookups outside transactions (the per-request session check, access checks, one row by
// key) share a few long-lived connections in pipeline mode instead of each checking a
// connection out of the pool: a lookup never queues behind 50 requests for one of the pool's
// connections, and the pool's bookkeeping is paid by transactions only. Statements on one
// lane are answered in order, so only short ones belong here (QueryOptions.prepareAs).
import pg from 'pg';

export class LookupLanes {
  private readonly lanes: Array<Promise<pg.Client> | undefined>;
  private next = 0;
  private closed = false;

  constructor(
    private readonly config: pg.ClientConfig,
    count: number,
    private readonly onError: (err: unknown) => void,
  ) {
    this.lanes = new Array<Promise<pg.Client> | undefined>(count).fill(undefined);
  }

  async query<R>(name: string, text: string, values: unknown[] | undefined): Promise<R[]> {
    const i = this.next;
    this.next = (i + 1) % this.lanes.length;
    const client = await this.lane(i);
    return (await client.query({ name, text, values })).rows as R[];
  }

  async close(): Promise<void> {
    this.closed = true;
    const open = this.lanes.splice(0);
    await Promise.all(open.map(async (lane) => (await lane?.catch(() => undefined))?.end().catch(() => {})));
  }

  /** The lane's connection, opened on first use and again after it failed or ended. */
  private lane(i: number): Promise<pg.Client> {
    if (this.closed) return Promise.reject(new Error('Client was closed and is not queryable'));
    const existing = this.lanes[i];
    if (existing) return existing;
    const client = new pg.Client({ ...this.config, pipeline: true } as pg.ClientConfig);
    const opened = client.connect().then(() => client);
    const forget = () => {
      if (this.lanes[i] === opened) this.lanes[i] = undefined;
    };
    // Its statements in flight fail with the connection (answered 503); the next lookup reconnects.
    client.on('error', (err) => {
      forget();
      this.onError(err);
    });
    client.on('end', forget);
    opened.catch(forget);
    this.lanes[i] = opened;
    return opened;
  }
}
