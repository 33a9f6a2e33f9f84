// Key lookups outside transactions (the per-request session check, access checks, one row by
// key) share a few long-lived connections in pipeline mode instead of each checking a
// connection out of the pool: a lookup never queues behind 50 requests for one of the pool's
// connections, and the pool's bookkeeping is paid by transactions only. Statements on one
// lane are answered in order, so only short ones belong here (QueryOptions.prepareAs).
//
// A lane's connection is replaced once it has served `lifetimeMs` (postgres.ts,
// CONNECTION_LIFETIME_MS, says why): the next lookup opens a new one, and the old one is
// closed when the lookups already sent on it are answered.
import pg from 'pg';

interface Lane {
  client: Promise<pg.Client>;
  openedAt: number;
  /** Lookups sent on it and not yet answered. */
  inFlight: number;
  /** Replaced by a newer connection: closed once inFlight is 0. */
  retired: boolean;
}

export class LookupLanes {
  private readonly lanes: Array<Lane | undefined>;
  private next = 0;
  private closed = false;

  constructor(
    private readonly config: pg.ClientConfig,
    count: number,
    private readonly onError: (err: unknown) => void,
    private readonly lifetimeMs: number,
  ) {
    this.lanes = new Array<Lane | undefined>(count).fill(undefined);
  }

  async query<R>(name: string, text: string, values: unknown[] | undefined): Promise<R[]> {
    const i = this.next;
    this.next = (i + 1) % this.lanes.length;
    const lane = this.lane(i);
    lane.inFlight++;
    try {
      const client = await lane.client;
      return (await client.query({ name, text, values })).rows as R[];
    } finally {
      lane.inFlight--;
      if (lane.retired && lane.inFlight === 0) end(lane);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const open = this.lanes.splice(0);
    await Promise.all(open.map(async (lane) => (await lane?.client.catch(() => undefined))?.end().catch(() => {})));
  }

  /** The lane's connection, opened on first use, again after it failed or ended, and once it has served its lifetime. */
  private lane(i: number): Lane {
    if (this.closed) throw new Error('Client was closed and is not queryable');
    const existing = this.lanes[i];
    if (existing && Date.now() - existing.openedAt < this.lifetimeMs) return existing;
    if (existing) {
      existing.retired = true;
      if (existing.inFlight === 0) end(existing);
    }
    const client = new pg.Client({ ...this.config, pipeline: true } as pg.ClientConfig);
    const lane: Lane = { client: client.connect().then(() => client), openedAt: Date.now(), inFlight: 0, retired: false };
    const forget = () => {
      if (this.lanes[i] === lane) this.lanes[i] = undefined;
    };
    // Its statements in flight fail with the connection (answered 503); the next lookup reconnects.
    client.on('error', (err) => {
      forget();
      this.onError(err);
    });
    client.on('end', forget);
    lane.client.catch(forget);
    this.lanes[i] = lane;
    return lane;
  }
}

function end(lane: Lane): void {
  void lane.client.then((c) => c.end()).catch(() => {});
}
