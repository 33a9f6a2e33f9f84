// The real-time limits of docs/api.md section 6: a socket whose handshake overlaps a revocation
// (logout, demotion, deactivation) is refused or disconnected within 1 s: raced 100 times each,
// and once, deterministically, with the revocation delivered while the handshake is held between
// its session check and its connection (the gap that revocation used to pass by); a user holds
// at most 20 sockets at once, `/` and `/admin` together, across instances through Redis;
// refusals are counted in teamlog_requests_limited_total{limit="sockets"}.
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { login, type Session } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { needsRedis, startTestServer, type TestServer } from './helpers/server.js';
import { connect, connectRecording, disconnection, sleep, type ClientSocket } from './helpers/sockets.js';
import { limitedCount } from './helpers/limits.js';

/** What a handshake awaits between its session check and its rooms (TestHooks.afterHandshakeSessionCheck): set per test. */
const handshakePause: { afterSessionCheck?: () => Promise<void> } = {};
const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0' }, hooks: { afterHandshakeSessionCheck: async () => handshakePause.afterSessionCheck?.() } });
const ROUNDS = 100;
const MAX_SOCKETS = 20;

let second: TestServer | undefined;
after(() => second?.close());

const open: ClientSocket[] = [];
const closeAll = () => open.splice(0).forEach((s) => s.close());

/** The presence snapshot a new socket of `watcher` gets: the users online on the server's side. */
async function onlineNow(watcher: Session): Promise<number[]> {
  const { socket, rec } = await connectRecording(watcher);
  try {
    return (await rec.waitFor((e) => e.name === 'presence-snapshot')).payload.online as number[];
  } finally {
    socket.close();
  }
}

/** Waits (up to 1 s) until the server holds no socket of `userId`: its disconnects are processed. */
async function untilOffline(watcher: Session, userId: number): Promise<void> {
  for (const until = Date.now() + 1000; ; await sleep(20)) {
    if (!(await onlineNow(watcher)).includes(userId)) return;
    assert.ok(Date.now() < until, `user ${userId} still has sockets on the server after 1 s`);
  }
}

type Outcome = { connected: ClientSocket } | { refused: Error & { data?: { code?: string } } };

/** A handshake that settles either way: connected, or refused with its connect_error. */
const handshake = (session: Session, opts: Parameters<typeof connect>[1] = {}): Promise<Outcome> =>
  connect(session, opts).then(
    (socket) => ({ connected: socket }),
    (err: Error) => ({ refused: err }),
  );

/**
 * Starts a handshake and a revocation a random few milliseconds apart, either first. The
 * revocation takes a few tens of ms to reach the sockets, a handshake about as long to connect:
 * so that, over the rounds, the revocation lands in every step of the handshake, and most often
 * between its session check and its connection (the gap this file is about), the handshake
 * mostly starts after the revocation did.
 */
async function overlap(handshaking: () => Promise<Outcome>, revoke: () => Promise<void>): Promise<Outcome> {
  const offset = randomInt(-10, 41);
  if (offset < 0) {
    const socket = handshaking();
    await sleep(-offset);
    await revoke();
    return socket;
  }
  const revoked = revoke();
  await sleep(offset);
  const socket = handshaking();
  await revoked;
  return socket;
}

/**
 * Races a handshake against a revocation `rounds` times and holds each round to the contract:
 * the handshake is refused, or its socket is disconnected within 1 s of the revocation's answer.
 */
async function race(rounds: number, round: (i: number) => Promise<{ outcome: Outcome; allowed: string[] }>) {
  let connectedThenDropped = 0;
  let refused = 0;
  const stayed: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const { outcome, allowed } = await round(i);
    if ('refused' in outcome) {
      assert.ok(allowed.includes(outcome.refused.message), `round ${i}: refused with ${outcome.refused.message}`);
      refused++;
      continue;
    }
    const socket = outcome.connected;
    try {
      await disconnection(socket, 1000);
      connectedThenDropped++;
    } catch {
      stayed.push(i);
    } finally {
      socket.close();
    }
  }
  assert.deepEqual(stayed, [], `rounds whose socket stayed connected past 1 s (${refused} refused, ${connectedThenDropped} disconnected)`);
}

/**
 * Runs `fn` with handshakes slowed between their session check and their rooms, as a slow
 * database or Redis would (3 in 4, by 1 to 40 ms): the gap a revocation must land in to be
 * missed, which unslowed is a few ms wide, so that the rounds land in it often.
 */
async function withSlowHandshakes(fn: () => Promise<void>): Promise<void> {
  handshakePause.afterSessionCheck = async () => {
    if (randomInt(4) !== 0) await sleep(randomInt(1, 41));
  };
  try {
    await fn();
  } finally {
    handshakePause.afterSessionCheck = undefined;
  }
}

/** Holds the next handshake after its session check until release(); `held` resolves once it is there. */
function holdNextHandshake() {
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  let arrived = () => {};
  const held = new Promise<void>((resolve) => (arrived = resolve));
  handshakePause.afterSessionCheck = () => {
    handshakePause.afterSessionCheck = undefined;
    arrived();
    return gate;
  };
  return { held, release: () => release() };
}

describe('a handshake held between its session check and its connection while a revocation is delivered', () => {
  test('a logout: the socket connects, and is disconnected within 1 s', async () => {
    const user = await h.newUser();
    const session = await login(h.server, user.email, user.password);
    // A socket of the same session already connected: its disconnection says the logout was delivered.
    const probe = await connect(session);
    const hold = holdNextHandshake();
    try {
      const late = handshake(session);
      await hold.held;
      const delivered = disconnection(probe, 1000);
      assert.equal((await session.client.post('/api/v1/auth/logout', undefined, { token: session.token })).status, 204);
      await delivered;
      hold.release();
      const outcome = await late;
      if ('connected' in outcome) await disconnection(outcome.connected, 1000);
      else assert.equal(outcome.refused.message, 'unauthorized');
    } finally {
      hold.release();
      handshakePause.afterSessionCheck = undefined;
    }
  });

  test('a demotion: the /admin socket connects, and is disconnected within 1 s', async () => {
    const admin = await h.newUser({ role: 'ADMIN' });
    const probe = await connect(admin, { namespace: '/admin' });
    const hold = holdNextHandshake();
    try {
      const late = handshake(admin, { namespace: '/admin' });
      await hold.held;
      const delivered = disconnection(probe, 1000);
      assert.equal((await h.admin.client.put(`/api/v1/users/${admin.id}/role`, { role: 'USER' }, { token: h.admin.token })).status, 200);
      await delivered;
      hold.release();
      const outcome = await late;
      if ('connected' in outcome) await disconnection(outcome.connected, 1000);
      else assert.equal(outcome.refused.message, 'forbidden');
    } finally {
      hold.release();
      handshakePause.afterSessionCheck = undefined;
    }
  });
});

describe('a handshake that overlaps a revocation is refused or disconnected within 1 s', () => {
  test(`a logout, ${ROUNDS} rounds`, async () => {
    const user = await h.newUser();
    const watcher = await h.newUser();
    await withSlowHandshakes(() =>
      race(ROUNDS, async () => {
        const session = await login(h.server, user.email, user.password);
        const outcome = await overlap(
          () => handshake(session),
          async () => {
            const out = await session.client.post('/api/v1/auth/logout', undefined, { token: session.token });
            assert.equal(out.status, 204, out.text);
          },
        );
        return { outcome, allowed: ['unauthorized'] };
      }),
    );
    // The server holds none of them either: the user goes offline for everyone.
    await untilOffline(watcher, user.id);
  });

  test(`a demotion, on /admin, ${ROUNDS} rounds`, async () => {
    const admin = await h.newUser({ role: 'ADMIN' });
    const setRole = async (role: 'ADMIN' | 'USER') => {
      const res = await h.admin.client.put(`/api/v1/users/${admin.id}/role`, { role }, { token: h.admin.token });
      assert.equal(res.status, 200, res.text);
    };
    await withSlowHandshakes(() =>
      race(ROUNDS, async (i) => {
        if (i > 0) await setRole('ADMIN');
        const outcome = await overlap(() => handshake(admin, { namespace: '/admin' }), () => setRole('USER'));
        return { outcome, allowed: ['forbidden'] };
      }),
    );
  });

  test(`a deactivation, on both namespaces, ${ROUNDS} rounds`, async () => {
    const user = await h.newUser({ role: 'ADMIN' });
    const setActive = async (active: boolean) => {
      const res = await h.admin.client.put(`/api/v1/users/${user.id}/active`, { active }, { token: h.admin.token });
      assert.equal(res.status, 200, res.text);
    };
    await withSlowHandshakes(() =>
      race(ROUNDS, async (i) => {
        if (i > 0) await setActive(true);
        const session = await login(h.server, user.email, user.password);
        const outcome = await overlap(() => handshake(session, { namespace: i % 2 === 0 ? '/' : '/admin' }), () => setActive(false));
        return { outcome, allowed: ['unauthorized'] };
      }),
    );
  });
});

describe(`a user holds at most ${MAX_SOCKETS} sockets`, () => {
  test('30 handshakes at once: exactly 20 connect, the others get connect_error "too_many_connections"; closing one frees a slot', async () => {
    const user = await h.newUser();
    const refusedBefore = await limitedCount(h.server, 'sockets');
    const outcomes = await Promise.all(Array.from({ length: 30 }, () => handshake(user)));
    const connected = outcomes.flatMap((o) => ('connected' in o ? [o.connected] : []));
    open.push(...connected);
    const refusals = outcomes.flatMap((o) => ('refused' in o ? [o.refused] : []));
    assert.equal(connected.length, MAX_SOCKETS);
    assert.deepEqual([...new Set(refusals.map((e) => e.message))], ['too_many_connections']);
    assert.equal(refusals[0]!.data?.code, 'TOO_MANY_CONNECTIONS');
    assert.equal((await limitedCount(h.server, 'sockets')) - refusedBefore, 10);

    // Still full a moment later; one closed, its slot is free again (once the server saw it go).
    const refused = await handshake(user);
    assert.ok('refused' in refused && refused.refused.message === 'too_many_connections');
    connected[0]!.close();
    let again: Outcome = { refused: new Error('not tried') };
    for (const until = Date.now() + 1000; Date.now() < until; await sleep(20)) {
      again = await handshake(user);
      if ('connected' in again) break;
    }
    assert.ok('connected' in again, `a slot freed: ${'refused' in again ? again.refused.message : ''}`);
    open.push(again.connected);
    const twentyFirst = await handshake(user);
    assert.ok('refused' in twentyFirst && twentyFirst.refused.message === 'too_many_connections');

    // All of them closed: all 20 slots come back.
    closeAll();
    await untilOffline(await h.newUser(), user.id);
    const all = await Promise.all(Array.from({ length: MAX_SOCKETS }, () => handshake(user)));
    open.push(...all.flatMap((o) => ('connected' in o ? [o.connected] : [])));
    assert.equal(open.length, MAX_SOCKETS, 'every slot was given back');
    closeAll();
  });

  test('/ and /admin count together', async () => {
    const admin = await h.newUser({ role: 'ADMIN' });
    const outcomes = await Promise.all(Array.from({ length: 24 }, (_, i) => handshake(admin, { namespace: i % 2 === 0 ? '/' : '/admin' })));
    open.push(...outcomes.flatMap((o) => ('connected' in o ? [o.connected] : [])));
    assert.equal(open.length, MAX_SOCKETS);
    assert.ok(outcomes.every((o) => 'connected' in o || o.refused.message === 'too_many_connections'));
    closeAll();
  });

  test('another user is not held to this one\'s count', async () => {
    const [a, b] = await Promise.all([h.newUser(), h.newUser()]);
    const filled = await Promise.all(Array.from({ length: MAX_SOCKETS }, () => handshake(a)));
    open.push(...filled.flatMap((o) => ('connected' in o ? [o.connected] : [])));
    assert.equal(open.length, MAX_SOCKETS);
    const other = await handshake(b);
    assert.ok('connected' in other);
    open.push(other.connected);
    closeAll();
  });

  test('across two instances, with Redis: 15 handshakes on each at once, exactly 20 connect', { skip: needsRedis }, async () => {
    second ??= await startTestServer({ database: h.server.database, env: { RATE_LIMIT_PER_MINUTE: '0' } });
    const b = second;
    const user = await h.newUser();
    const outcomes = await Promise.all(Array.from({ length: 30 }, (_, i) => handshake(user, i % 2 === 0 ? {} : { url: b.url })));
    const connected = outcomes.flatMap((o) => ('connected' in o ? [o.connected] : []));
    open.push(...connected);
    assert.equal(connected.length, MAX_SOCKETS);
    assert.ok(outcomes.every((o) => 'connected' in o || o.refused.message === 'too_many_connections'));
    closeAll();
  });
});
