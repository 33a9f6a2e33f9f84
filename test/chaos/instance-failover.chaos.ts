// Chaos: one of two instances killed with kill -9 while socket.io-client clients connected to it
// are being replayed a backlog (through a throttled relay, so that the kill lands in the middle
// of a replay, and what was in flight is lost). Each client then connects to the other instance
// with the event_id of the last event it received as `auth.last_event_id`, as the README tells
// clients to, while writes go on: every event committed since the clients' starting point
// arrives exactly once across the two connections, in event_id order, none missing, numbered as
// an uninterrupted replay numbers them. Nothing acknowledged is lost, and the log seals and verifies.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import type { Database } from '../../src/db/database.js';
import type { Session } from '../helpers/client.js';
import { inBatches } from '../helpers/factories.js';
import { connectRecording, disconnection, type ClientSocket, type Received, type Recorder } from '../helpers/sockets.js';
import type { RedisServer } from './cluster.js';
import {
  closeStage, openStage, assertNothingLost, assertSealedAndVerified, isAcked, makeTeam, postTask, serviceEnv, sleep, startService, writer, WriteBurst,
  type Outcome, type Stage, type Service,
} from './service.js';

let stage: Stage | undefined;
let redis: RedisServer | undefined;
let urls: { ownerUrl: string; serviceUrl: string };
let owner: Database | undefined;
const services: Service[] = [];
const sockets: ClientSocket[] = [];
const relays: ThrottledRelay[] = [];

before(async () => {
  stage = await openStage({ redis: true });
  ({ redis, urls, owner } = stage);
}, { timeout: 60_000 });

after(async () => {
  for (const r of relays) r.cut();
  for (const s of sockets) s.close();
  await Promise.all(services.map((s) => s.kill()));
  await closeStage(stage);
});

/** More than one replay batch (realtime/replay.ts reads 500 events at a time). */
const BACKLOG = 700;
/** B dies once every client connected to it has received this many replayed events (or one three times as many). */
const KILL_AFTER = 100;

/**
 * The clients' way to B: a TCP relay whose answers reach them at most `bytesPerTick` every
 * `tickMs` (test/helpers/tcp-proxy.ts delays answers, but cannot throttle them). B replays a
 * backlog faster than any client reads it; throttled, a client is still reading its replay when
 * B dies, and cut() then drops every connection at once: what B had sent and the client had not
 * yet received is lost with it, as with a host that dies.
 */
class ThrottledRelay {
  private listener: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();

  constructor(
    private readonly port: number,
    private readonly bytesPerTick = 8192,
    private readonly tickMs = 10,
  ) {}

  async start(): Promise<string> {
    const listener = net.createServer((client) => {
      const upstream = net.connect(this.port, '127.0.0.1');
      const pending: Buffer[] = [];
      let ended = false;
      const pump = setInterval(() => {
        let budget = this.bytesPerTick;
        while (budget > 0 && pending.length > 0) {
          const chunk = pending.shift()!;
          if (chunk.length > budget) pending.unshift(chunk.subarray(budget));
          client.write(chunk.subarray(0, budget));
          budget -= Math.min(budget, chunk.length);
        }
        if (ended && pending.length === 0) client.end();
      }, this.tickMs);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => {
          this.sockets.delete(s);
          clearInterval(pump);
          client.destroy();
          upstream.destroy();
        });
        s.on('error', () => s.destroy());
      }
      client.pipe(upstream);
      upstream.on('data', (chunk: Buffer) => pending.push(chunk));
      upstream.on('end', () => (ended = true));
    });
    this.listener = listener;
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', () => resolve()));
    return `http://127.0.0.1:${(listener.address() as net.AddressInfo).port}`;
  }

  /** Every connection dropped at once, and no new one taken. */
  cut(): void {
    for (const s of this.sockets) s.destroy();
    this.listener?.close();
    this.listener = undefined;
  }
}

const tasksCreated = (rec: Recorder): Received[] => rec.events.filter((e) => e.name === 'task-created');

/** A client that is being replayed on one instance, loses it, and carries on on another from the last event it received. */
class FailoverClient {
  first: { socket: ClientSocket; rec: Recorder } | undefined;
  second: { socket: ClientSocket; rec: Recorder } | undefined;
  /** Why the first instance refused the connection (it died during the handshake). */
  refused: string | undefined;
  /** What it received from the first instance, and the last event_id it then knew. */
  fromFirst: Received[] = [];
  resumedFrom: number;

  constructor(
    readonly session: Session,
    readonly startFrom: number,
  ) {
    this.resumedFrom = startFrom;
  }

  /** Connects with last_event_id = startFrom; `onEvent` is called on each task-created event from then on. */
  async replayOn(url: string, onEvent: () => void): Promise<void> {
    try {
      // A handshake cut short by the kill may end in neither connect nor connect_error: bounded.
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('no answer to the handshake within 10 s')), 10_000)));
      this.first = await Promise.race([connectRecording(this.session, { url, lastEventId: this.startFrom }), timeout]).finally(() => clearTimeout(timer));
      sockets.push(this.first.socket);
      this.first.socket.onAny((name: string) => name === 'task-created' && onEvent());
      onEvent();
    } catch (err) {
      this.refused = String(err);
    }
  }

  /** Task-created events received on the first connection so far. */
  get receivedFirst(): number {
    return this.first ? tasksCreated(this.first.rec).length : 0;
  }

  /** Once the first connection is lost: connects to `url` with the event_id of the last event received. */
  async moveTo(url: string): Promise<void> {
    if (this.first) {
      await disconnection(this.first.socket, 15_000);
      this.fromFirst = tasksCreated(this.first.rec);
      const last = this.fromFirst.at(-1);
      if (last) this.resumedFrom = last.payload.event_id as number;
    }
    this.second = await connectRecording(this.session, { url, lastEventId: this.resumedFrom });
    sockets.push(this.second.socket);
  }

  /** Every task-created event received, over both connections, in the order received. */
  stream(): Received[] {
    return [...this.fromFirst, ...(this.second ? tasksCreated(this.second.rec) : [])];
  }

  async receivesAll(ids: number[], ms: number): Promise<void> {
    const missing = () => {
      const got = new Set(this.stream().map((e) => e.payload.id as number));
      return ids.filter((id) => !got.has(id));
    };
    try {
      await this.second!.rec.waitFor(() => missing().length === 0, ms);
    } catch {
      throw new Error(`user ${this.session.id}: no task-created event within ${ms} ms for ${missing().length} of ${ids.length} tasks (${missing().slice(0, 10).join(', ')}…)`);
    }
  }
}

/** The events as (event_id, task id) pairs. */
const numbered = (events: Received[]) => events.map((e) => [e.payload.event_id as number, e.payload.id as number]);

test('an instance killed with kill -9 while its clients replay: they resume on the other with last_event_id and get every event once, in order, none missing', { timeout: 60_000 }, async (t) => {
  const env = serviceEnv(urls, { REDIS_URL: redis!.url, REDIS_KEY_PREFIX: 'chaos:' });
  const [a, b] = await Promise.all([startService(env), startService(env)]);
  services.push(a, b);
  await Promise.all([a.waitReady(), b.waitReady()]);
  const team = await makeTeam(a.url, 6);
  const members = team.members.slice(0, 4);
  const writers = team.members.slice(4).map((m) => writer(m, [a.url]));
  const outcomes: Outcome[] = [];

  // The clients' starting point: the event of a task every one of them has seen.
  const probe = await connectRecording(members[0]!, { url: a.url });
  sockets.push(probe.socket);
  const seen = await postTask(writers[0]!, team.project.id);
  outcomes.push(seen);
  assert.equal(seen.status, 201, seen.error);
  const startFrom = (await probe.rec.waitFor((e) => e.name === 'task-created' && e.payload.id === seen.id, 5000)).payload.event_id as number;
  probe.socket.close();
  const earlier = new Set((await owner!.query<{ id: number }>('SELECT id FROM tasks')).map((r) => r.id));

  // What they missed since: a backlog of several replay batches, written through A.
  const backlog = await inBatches(Array.from({ length: BACKLOG }, (_, i) => i), 8, (i) => postTask(writers[i % writers.length]!, team.project.id));
  outcomes.push(...backlog);
  assert.deepEqual(backlog.filter((o) => !isAcked(o)).map((o) => `${o.status} ${o.error}`), [], 'the backlog was written');

  // The clients reach B through a relay that gives them their replay slowly.
  const relay = new ThrottledRelay(b.port);
  relays.push(relay);
  const viaRelay = await relay.start();

  // Writes go on through A the whole time, before, during and after the kill.
  const clients = members.map((m) => new FailoverClient(m, startFrom));
  const burst = new WriteBurst(writers, team.project.id, { pauseMs: 10 }).start();
  try {
    // All four connect to B at once; B dies once all are connected and each has received
    // KILL_AFTER replayed events (or one of them three times as many): they are then in the
    // middle of their replays.
    let killing: Promise<void> | undefined;
    let settledClients = 0;
    const killB = () => {
      killing ??= b.kill();
      relay.cut();
    };
    const farEnough = () => {
      const counts = clients.filter((c) => c.first).map((c) => c.receivedFirst);
      return counts.every((n) => n >= KILL_AFTER) || counts.some((n) => n >= 3 * KILL_AFTER);
    };
    const maybeKill = () => settledClients === clients.length && farEnough() && killB();
    await Promise.all(
      clients.map(async (c) => {
        await c.replayOn(viaRelay, maybeKill);
        settledClients++;
        maybeKill();
      }),
    );
    // Not that far yet: wait for it.
    for (let waited = 0; !killing && waited < 10_000; waited += 10) await sleep(10);
    killB();
    await killing;
    await Promise.all(clients.map((c) => c.moveTo(a.url)));
    // Committed after every client has moved.
    await burst.moreAcked(50, 20_000);
  } finally {
    await burst.stop();
  }
  outcomes.push(...burst.outcomes);
  assert.deepEqual(burst.outcomes.filter((o) => !isAcked(o)).map((o) => `${o.status} ${o.error}`), [], 'writes through A during the failover');
  for (const c of clients) {
    t.diagnostic(
      `user ${c.session.id}: ${c.refused ? `refused by B (${c.refused})` : `${c.fromFirst.length} events from B`}, ` +
        `resumed on A from event ${c.resumedFrom} (${c.resumedFrom - startFrom} past the start)`,
    );
  }
  assert.ok(
    clients.some((c) => c.fromFirst.length > 0 && c.fromFirst.length < BACKLOG),
    'no client was cut off in the middle of its replay (the kill came before any replay, or after all)',
  );

  // Every task committed since the starting point; each made one task-created event.
  const expected = (await owner!.query<{ id: number }>('SELECT id FROM tasks ORDER BY id')).map((r) => r.id).filter((id) => !earlier.has(id));
  assert.ok(expected.length >= BACKLOG + 50, `${expected.length} tasks since the start`);
  await Promise.all(clients.map((c) => c.receivesAll(expected, 20_000)));

  // What a client that never lost its connection is replayed from the same starting point.
  const control = await connectRecording(members[0]!, { url: a.url, lastEventId: startFrom });
  sockets.push(control.socket);
  await control.rec.waitFor(() => tasksCreated(control.rec).length >= expected.length, 20_000, `${expected.length} replayed events`);
  const reference = numbered(tasksCreated(control.rec));

  for (const c of clients) {
    const stream = c.stream();
    const who = `user ${c.session.id} (${c.fromFirst.length} events from B, then ${stream.length - c.fromFirst.length} from A)`;
    const ids = stream.map((e) => e.payload.id as number);
    assert.equal(new Set(ids).size, ids.length, `${who}: an event arrived twice`);
    assert.deepEqual([...ids].sort((x, y) => x - y), expected, `${who}: exactly the tasks committed since the start`);
    const eventIds = stream.map((e) => e.payload.event_id as number);
    for (let i = 1; i < eventIds.length; i++) assert.ok(eventIds[i]! > eventIds[i - 1]!, `${who}: event ${eventIds[i]} came after ${eventIds[i - 1]}`);
    assert.deepEqual(numbered(stream), reference, `${who}: the events and event_ids one uninterrupted replay gives`);
  }

  assert.ok(a.alive(), 'the surviving instance died');
  await assertNothingLost(owner!, outcomes);
  const head = await assertSealedAndVerified(a.url, owner!, team.admin);
  t.diagnostic(`${expected.length} events replayed across the failover; sealed and verified: ${head.tree_size} records`);
});
