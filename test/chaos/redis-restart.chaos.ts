// Chaos: Redis (a redis-server of the test's own, without persistence) stopped and started again
// under two instances that share it for the Socket.IO adapter, presence and the rate limit. While
// it is away HTTP keeps serving on both (the rate limit lets requests through) and sockets keep
// their events, which come from PostgreSQL; once it is back, both instances reconnect and
// resubscribe, and what only Redis carries between them (presence) crosses instances again.
// Every socket gets every task event once, in event_id order; nothing acknowledged is lost.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import type { Database } from '../../src/db/database.js';
import type { Session } from '../helpers/client.js';
import { connectRecording, type ClientSocket, type Recorder } from '../helpers/sockets.js';
import type { RedisServer } from './cluster.js';
import {
  closeStage, openStage, assertNothingLost, assertSealedAndVerified, isAcked, makeTeam, postTask, serviceEnv, sleep, startService, tail, writer,
  type Outcome, type Stage, type Service, type Writer,
} from './service.js';

let stage: Stage | undefined;
let redis: RedisServer | undefined;
let urls: { ownerUrl: string; serviceUrl: string };
let owner: Database | undefined;
const services: Service[] = [];
const sockets: ClientSocket[] = [];

before(async () => {
  stage = await openStage({ redis: true });
  ({ redis, urls, owner } = stage);
}, { timeout: 60_000 });

after(async () => {
  for (const s of sockets) s.close();
  await Promise.all(services.map((s) => s.kill()));
  await closeStage(stage);
});

/** What the instances hold open in Redis: their connections (named "teamlog") and their subscriptions. */
async function redisHold(url: string): Promise<{ connections: number; patterns: number; channels: Map<string, number> }> {
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null });
  probe.on('error', () => {}); // Redis still away: the connect() below says so
  try {
    await probe.connect();
    const list = String(await probe.call('CLIENT', 'LIST'));
    const connections = list.split('\n').filter((line) => / name=teamlog /.test(line)).length;
    const patterns = Number(await probe.call('PUBSUB', 'NUMPAT'));
    const names = (await probe.call('PUBSUB', 'CHANNELS')) as string[];
    const flat = names.length > 0 ? ((await probe.call('PUBSUB', 'NUMSUB', ...names)) as Array<string | number>) : [];
    const channels = new Map<string, number>();
    for (let i = 0; i < flat.length; i += 2) channels.set(String(flat[i]), Number(flat[i + 1]));
    return { connections, patterns, channels };
  } finally {
    probe.disconnect();
  }
}

/** Until Redis holds again at least what it held before the outage (every connection, pattern and channel subscription). */
async function redisRestored(url: string, baseline: Awaited<ReturnType<typeof redisHold>>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  let now: Awaited<ReturnType<typeof redisHold>> | undefined;
  while (Date.now() < deadline) {
    now = await redisHold(url).catch(() => undefined);
    if (
      now &&
      now.connections >= baseline.connections &&
      now.patterns >= baseline.patterns &&
      [...baseline.channels].every(([name, n]) => (now!.channels.get(name) ?? 0) >= n)
    ) {
      return;
    }
    await sleep(100);
  }
  throw new Error(`the instances did not reconnect and resubscribe to Redis within ${ms} ms: before ${JSON.stringify({ ...baseline, channels: [...baseline.channels] })}, now ${JSON.stringify(now && { ...now, channels: [...now.channels] })}`);
}

/** `perWriter` task creations from each writer, each writer one after another, the writers side by side. */
async function writeRound(writers: Writer[], projectId: number, perWriter: number): Promise<Outcome[]> {
  const out: Outcome[] = [];
  await Promise.all(writers.map(async (w) => {
    for (let i = 0; i < perWriter; i++) out.push(await postTask(w, projectId));
  }));
  return out;
}

const taskIdsOf = (rec: Recorder) => rec.named('task-created').map((p) => p.id as number);

/** Until the socket has received a task-created event for each of `ids`. */
async function receives(rec: Recorder, ids: number[], ms: number, where: string): Promise<void> {
  const missing = () => {
    const got = new Set(taskIdsOf(rec));
    return ids.filter((id) => !got.has(id));
  };
  try {
    await rec.waitFor(() => missing().length === 0, ms);
  } catch {
    throw new Error(`${where}: no task-created event within ${ms} ms for tasks ${missing().join(', ')} (of ${ids.length})`);
  }
}

/** Every task-created event once, for exactly these tasks, in event_id order. */
function assertStream(rec: Recorder, ids: number[], where: string): void {
  const events = rec.named('task-created');
  const got = events.map((p) => p.id as number);
  assert.deepEqual([...got].sort((x, y) => x - y), [...ids].sort((x, y) => x - y), `${where}: each task's event exactly once`);
  const eventIds = events.map((p) => p.event_id as number);
  for (let i = 1; i < eventIds.length; i++) assert.ok(eventIds[i]! > eventIds[i - 1]!, `${where}: event_id ${eventIds[i]} came after ${eventIds[i - 1]}`);
}

const online = (rec: Recorder, user: Session, ms: number, where: string) =>
  rec.waitFor((e) => e.name === 'user-online' && e.payload.user_id === user.id, ms, `user-online of user ${user.id} on ${where}`);

test('Redis stopped and started under two instances: HTTP keeps serving, sockets on both keep their events, and fan-out between the instances resumes', { timeout: 60_000 }, async (t) => {
  // The rate limit on (its default), so that every API request goes through Redis too.
  const env = serviceEnv(urls, { REDIS_URL: redis!.url, REDIS_KEY_PREFIX: 'chaos:', RATE_LIMIT_PER_MINUTE: '3000' });
  const [a, b] = await Promise.all([startService(env), startService(env)]);
  services.push(a, b);
  await Promise.all([a.waitReady(), b.waitReady()]);
  const team = await makeTeam(a.url, 6);
  const [watcherA, watcherB, w1, w2, lateOnB, lateOnA] = team.members as [Session, Session, Session, Session, Session, Session];
  const onA = await connectRecording(watcherA, { url: a.url });
  sockets.push(onA.socket);
  const onB = await connectRecording(watcherB, { url: b.url });
  sockets.push(onB.socket);
  // Fan-out works before the outage: B's new user is announced on A through Redis.
  await online(onA.rec, watcherB, 5000, 'instance A, before the outage');
  const writers = [writer(w1, [a.url, b.url]), writer(w2, [b.url, a.url])];
  const outcomes: Outcome[] = [];
  const acked = () => outcomes.filter(isAcked).map((o) => o.id!);

  const beforeOutage = await writeRound(writers, team.project.id, 5);
  outcomes.push(...beforeOutage);
  assert.deepEqual(beforeOutage.filter((o) => !isAcked(o)).map((o) => `${o.status} ${o.error}`), [], 'writes before the outage');
  await Promise.all([receives(onA.rec, acked(), 5000, 'A'), receives(onB.rec, acked(), 5000, 'B')]);
  const baseline = await redisHold(redis!.url);
  t.diagnostic(`Redis before the outage: ${baseline.connections} service connections, ${baseline.patterns} pattern and ${baseline.channels.size} channel subscriptions`);

  await redis!.stop();
  const during = await writeRound(writers, team.project.id, 10);
  outcomes.push(...during);
  t.diagnostic(`writes while Redis is down: ${during.map((o) => o.status).join(' ')}`);
  assert.deepEqual(
    during.filter((o) => !isAcked(o)).map((o) => `${o.url} ${o.status} ${o.error}`),
    [],
    `HTTP stopped serving without Redis:\nA: ${tail(a.output())}\nB: ${tail(b.output())}`,
  );
  for (const s of [a, b]) assert.equal((await fetch(`${s.url}/health/ready`)).status, 200, 'readiness does not depend on Redis');
  // Events come from PostgreSQL, not through Redis: they keep arriving on both instances.
  await Promise.all([receives(onA.rec, acked(), 10_000, 'A, Redis down'), receives(onB.rec, acked(), 10_000, 'B, Redis down')]);
  assert.ok(onA.socket.connected && onB.socket.connected, 'a socket was dropped during the outage');

  await sleep(500);
  const restartedAt = Date.now();
  await redis!.start();
  await redisRestored(redis!.url, baseline, 20_000);
  t.diagnostic(`both instances reconnected and resubscribed ${Date.now() - restartedAt} ms after Redis started again`);

  const afterwards = await writeRound(writers, team.project.id, 5);
  outcomes.push(...afterwards);
  assert.deepEqual(afterwards.filter((o) => !isAcked(o)).map((o) => `${o.status} ${o.error}`), [], 'writes after the outage');
  await Promise.all([receives(onA.rec, acked(), 10_000, 'A, after'), receives(onB.rec, acked(), 10_000, 'B, after')]);

  // Fan-out through Redis resumed, both ways: a user's first socket on one instance is announced on the other.
  const late1 = await connectRecording(lateOnB, { url: b.url });
  sockets.push(late1.socket);
  await online(onA.rec, lateOnB, 10_000, 'instance A, after the outage');
  const late2 = await connectRecording(lateOnA, { url: a.url });
  sockets.push(late2.socket);
  await online(onB.rec, lateOnA, 10_000, 'instance B, after the outage');

  assertStream(onA.rec, acked(), 'the socket on A');
  assertStream(onB.rec, acked(), 'the socket on B');
  assert.ok(a.alive() && b.alive(), 'an instance died');
  const tasks = await assertNothingLost(owner!, outcomes);
  assert.equal(tasks, acked().length);
  const head = await assertSealedAndVerified(a.url, owner!, team.admin);
  t.diagnostic(`${tasks} tasks, sealed and verified: ${head.tree_size} records under the newest checkpoint`);
});
