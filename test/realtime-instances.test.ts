// Real-time across several instances (docs/api.md section 6), on one PostgreSQL and one Redis, with
// clients on websocket only (no sticky sessions): events, rooms, revocation and presence cross
// instances; a client that moves to another instance misses nothing; and an instance killed
// with kill -9 loses no event, and its users go offline within 30 s.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { login, type Session } from './helpers/client.js';
import { addMember, createProject, postMessage } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { spawnServer, type ServerProcess } from './helpers/process.js';
import { TEST_REDIS_URL, needsRedis, siblingInstanceEnv, startTestServer, type TestServer } from './helpers/server.js';
import { connectRecording, disconnection, sleep, type ClientSocket, type Recorder } from './helpers/sockets.js';
import { TcpProxy } from './helpers/tcp-proxy.js';

const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0' } });
const skip = needsRedis;

let second: TestServer | undefined;
/** The second instance: same database, same Redis, same keys. */
async function instanceB(): Promise<TestServer> {
  second ??= await startTestServer({ database: h.server.database, env: { RATE_LIMIT_PER_MINUTE: '0' } });
  return second;
}
after(() => second?.close());

const open: ClientSocket[] = [];
async function on(server: { url: string }, session: Session, opts: { lastEventId?: number; namespace?: '/' | '/admin' } = {}) {
  const c = await connectRecording(session, { ...opts, url: server.url });
  open.push(c.socket);
  return c;
}
const closeAll = () => open.splice(0).forEach((s) => s.close());

const messageIn = (rec: Recorder, id: number, ms = 3000) => rec.waitFor((e) => e.name === 'new-message' && e.payload.id === id, ms, `message ${id}`);

describe('two instances', () => {
  test('a message sent on instance A reaches a client on B, and one sent over B\'s socket reaches a client on A', { skip }, async () => {
    const b = await instanceB();
    const [alice, bob] = await Promise.all([h.newUser(), h.newUser()]);
    const onA = await on(h.server, alice);
    const onB = await on(b, bob);
    const viaHttpA = await postMessage(alice, 'general');
    await messageIn(onB.rec, viaHttpA.id);
    const answer = (await onB.socket.emitWithAck('new-message', { text: 'from B' })) as { ok: boolean; message: { id: number } };
    assert.equal(answer.ok, true);
    await messageIn(onA.rec, answer.message.id);
    closeAll();
  });

  test('presence crosses instances: online when the first socket anywhere connects, offline after the last anywhere', { skip }, async () => {
    const b = await instanceB();
    const [watcher, subject] = await Promise.all([h.newUser(), h.newUser()]);
    const w = await on(h.server, watcher);
    const s1 = await on(b, subject);
    await w.rec.waitFor((e) => e.name === 'user-online' && e.payload.user_id === subject.id);
    const s2 = await on(h.server, subject);
    s1.socket.close();
    await sleep(300);
    assert.equal(w.rec.named('user-offline').filter((p) => p.user_id === subject.id).length, 0, 'still online on A');
    s2.socket.close();
    await w.rec.waitFor((e) => e.name === 'user-offline' && e.payload.user_id === subject.id);
    const snapshot = await on(b, watcher);
    const online = (await snapshot.rec.waitFor((e) => e.name === 'presence-snapshot')).payload.online as number[];
    assert.ok(!online.includes(subject.id) && online.includes(watcher.id));
    closeAll();
  });

  test('a membership change or a logout made on A acts on sockets held by B', { skip }, async () => {
    const b = await instanceB();
    const owner = await h.newUser();
    const joiner = await h.newUser();
    const project = await createProject(owner);
    const j = await on(b, joiner);
    await addMember(owner, project.id, joiner.id);
    const m = await postMessage(owner, `project:${project.id}`);
    await messageIn(j.rec, m.id);
    const gone = disconnection(j.socket, 1000);
    assert.equal((await joiner.client.post('/api/v1/auth/logout', undefined, { token: joiner.token })).status, 204);
    await gone;
    closeAll();
  });

  test('a client that leaves A, misses three events, and reconnects to B with last_event_id gets exactly those three, in order', { skip }, async () => {
    const b = await instanceB();
    const { owner, member, project } = await (async () => {
      const o = await h.newUser();
      const mm = await h.newUser();
      const p = await createProject(o);
      await addMember(o, p.id, mm.id);
      return { owner: o, member: mm, project: p };
    })();
    const onA = await on(h.server, member);
    const seen = await postMessage(owner, `project:${project.id}`);
    const lastEventId = (await messageIn(onA.rec, seen.id)).payload.event_id as number;
    onA.socket.close();
    const missed = [await postMessage(owner, `project:${project.id}`), await postMessage(owner, 'general'), await postMessage(owner, `project:${project.id}`)];
    const onB = await on(b, member, { lastEventId });
    await messageIn(onB.rec, missed[2]!.id);
    const live = await postMessage(owner, 'general');
    await messageIn(onB.rec, live.id);
    const received = onB.rec.named('new-message');
    assert.deepEqual(received.map((p) => p.id).filter((id) => id !== live.id && missed.every((x) => x.id !== id)), [], 'nothing else before the live one');
    assert.deepEqual(received.map((p) => p.id), [...missed.map((x) => x.id), live.id]);
    const ids = received.map((p) => p.event_id as number);
    assert.deepEqual(ids, [...ids].sort((x, y) => x - y));
    closeAll();
  });
});

describe('an instance killed with kill -9', () => {
  let proc: ServerProcess | undefined;
  let dataDir: string | undefined;
  after(async () => {
    if (proc) await proc.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  test('loses no event, and its users go offline on the other instances within 30 s', { skip, timeout: 60_000 }, async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-killed-'));
    proc = await spawnServer(siblingInstanceEnv(h.server, dataDir));
    await proc.waitReady();
    const [watcher, victim] = await Promise.all([h.newUser(), h.newUser()]);
    const victimOnC = await login({ ...h.server, url: proc.url }, victim.email, victim.password);
    const w = await on(h.server, watcher);
    const v = await on(proc, victimOnC);
    await w.rec.waitFor((e) => e.name === 'user-online' && e.payload.user_id === victim.id, 5000);
    const seen = await postMessage(watcher, 'general');
    const lastEventId = (await messageIn(v.rec, seen.id)).payload.event_id as number;

    // Committed on the doomed instance just before it dies: whoever numbers it, it arrives.
    const lastWords = await postMessage(victimOnC, 'general');
    proc.child.kill('SIGKILL');
    await proc.exited;
    proc = undefined;
    await messageIn(w.rec, lastWords.id, 5000);
    const meanwhile = [await postMessage(watcher, 'general'), await postMessage(watcher, 'general')];

    const started = Date.now();
    await w.rec.waitFor((e) => e.name === 'user-offline' && e.payload.user_id === victim.id, 30_000, 'user-offline of the killed instance\'s user');
    assert.ok(Date.now() - started < 30_000);

    // The client moves to the surviving instance and misses nothing.
    const moved = await on(h.server, victim, { lastEventId });
    await messageIn(moved.rec, meanwhile[1]!.id);
    assert.deepEqual(moved.rec.named('new-message').map((p) => p.id), [lastWords.id, ...meanwhile.map((m) => m.id)]);
    closeAll();
  });
});

describe('an instance stopping', () => {
  test('closes its own sockets only: clients of the other instance stay connected', { skip }, async () => {
    const third = await startTestServer({ database: h.server.database, env: { RATE_LIMIT_PER_MINUTE: '0' } });
    const [a, b] = await Promise.all([h.newUser(), h.newUser()]);
    const onOther = await on(h.server, a);
    const onStopping = await on(third, b);
    const gone = disconnection(onStopping.socket, 5000);
    await third.close();
    await gone;
    await sleep(300);
    assert.ok(onOther.socket.connected, 'a client of another instance is untouched');
    closeAll();
  });

  /**
   * An instance that reaches Redis through a relay the test controls, with a user online on it
   * whom a client of the first instance watches: `run` gets them; all is closed after it.
   */
  async function withRelayedInstance(run: (s: { relay: TcpProxy; instance: TestServer; watcher: Recorder; leaver: Session }) => Promise<void>) {
    const redisAt = new URL(TEST_REDIS_URL);
    const relay = new TcpProxy({ host: redisAt.hostname, port: Number(redisAt.port || 6379) });
    const port = await relay.start();
    let instance: TestServer | undefined;
    try {
      instance = await startTestServer({ database: h.server.database, env: { RATE_LIMIT_PER_MINUTE: '0', REDIS_URL: `redis://127.0.0.1:${port}` } });
      const [watching, leaver] = await Promise.all([h.newUser(), h.newUser()]);
      const watcher = (await on(h.server, watching)).rec;
      await on(instance, leaver);
      await watcher.waitFor((e) => e.name === 'user-online' && e.payload.user_id === leaver.id);
      await run({ relay, instance, watcher, leaver });
    } finally {
      // The relay first: a stop still waiting on a silent Redis then ends at once.
      await relay.stop();
      await instance?.close();
      closeAll();
    }
  }

  test('a graceful stop on a slow Redis sends its last presence notices and rejects no command', { skip, timeout: 20_000 }, async () => {
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', record);
    try {
      await withRelayedInstance(async ({ relay, instance, watcher, leaver }) => {
        // Every Redis answer now takes 300 ms: the stop's presence change, and the PUBLISH of its
        // user-offline notice, are still unanswered when the stop lets Redis go.
        relay.replyDelayMs = 300;
        await instance.close();
        await watcher.waitFor((e) => e.name === 'user-offline' && e.payload.user_id === leaver.id, 3000, 'user-offline of the stopped instance\'s user');
        await sleep(500);
        assert.deepEqual(unhandled.map(String), []);
      });
    } finally {
      process.off('unhandledRejection', record);
    }
  });

  test('a graceful stop ends when Redis goes silent (connections open, nothing answered)', { skip, timeout: 30_000 }, async () => {
    await withRelayedInstance(async ({ relay, instance }) => {
      // Every client of this instance (rate limits, the adapter, presence) now waits for
      // answers that never come, QUIT's included: each goodbye gives up after a bounded wait.
      relay.silent = true;
      let timer: NodeJS.Timeout | undefined;
      const hung = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still stopping after 20 s'), 20_000)));
      const outcome = await Promise.race([instance.close().then(() => 'stopped'), hung]);
      clearTimeout(timer);
      assert.equal(outcome, 'stopped');
    });
  });
});
