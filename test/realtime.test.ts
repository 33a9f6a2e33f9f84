// Real-time over Socket.IO (docs/api.md section 6), one instance, with real socket.io-clients:
// the handshake and its refusals, rooms and their events, the client's new-message and its
// limits, rooms kept in step, revocation, token expiry, replay and resync, commit order, the
// /admin namespace and presence. Several instances: test/realtime-instances.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SignJWT } from 'jose';
import type { NumberedEvent } from '../src/modules/outbox/outbox.events.js';
import { Client, login, type Session } from './helpers/client.js';
import { addMember, createProject, createTask, postMessage, team, uniqueWord } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { needsPostgres, startTestServer } from './helpers/server.js';
import { connect, connectRecording, disconnection, emitRaw, emitWithAck, rawAck, sleep, type ClientSocket, type Recorder } from './helpers/sockets.js';

/** Set by a test to hold live delivery between packing a batch and sending it (the service's beforeDeliverySend hook). */
const deliveryPause: { beforeSend?: (events: readonly NumberedEvent[]) => Promise<void> } = {};
const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0' }, hooks: { beforeDeliverySend: async (events) => deliveryPause.beforeSend?.(events as readonly NumberedEvent[]) } });

const open: ClientSocket[] = [];
async function socketOf(session: Session | undefined, opts: Parameters<typeof connect>[1] = {}): Promise<{ socket: ClientSocket; rec: Recorder }> {
  const opened = await connectRecording(session, opts);
  open.push(opened.socket);
  return opened;
}
const closeAll = () => open.splice(0).forEach((s) => s.close());

/** The connect_error a handshake gets. */
async function refusal(session: Session | undefined, opts: Parameters<typeof connect>[1] = {}): Promise<Error & { data?: { code?: string } }> {
  try {
    const s = await connect(session, opts);
    s.close();
  } catch (err) {
    return err as Error;
  }
  assert.fail('the handshake was accepted');
}

describe('the handshake', () => {
  test('a missing, malformed, forged, expired or revoked token is refused with connect_error "unauthorized"', async () => {
    const user = await h.newUser();
    const key = h.server.deps.secrets.jwtKey;
    const now = Math.floor(Date.now() / 1000);
    const expired = await new SignJWT({ sid: 1 }).setProtectedHeader({ alg: 'HS256' }).setSubject(String(user.id)).setIssuer('teamlog').setAudience('teamlog-api')
      .setIssuedAt(now - 1000).setExpirationTime(now - 10).sign(key);
    for (const auth of [{}, { token: '' }, { token: 42 }, { token: 'not.a.jwt' }, { token: `${user.token}x` }, { token: expired }]) {
      const err = await refusal(undefined, { auth, url: h.server.url });
      assert.equal(err.message, 'unauthorized', JSON.stringify(auth));
    }
    const other = await login(h.server, user.email, user.password);
    assert.equal((await other.client.post('/api/v1/auth/logout', undefined, { token: other.token })).status, 204);
    const revoked = await refusal(other);
    assert.equal(revoked.message, 'unauthorized');
    assert.equal(revoked.data?.code, 'TOKEN_REVOKED');
  });

  test('/admin is for ADMINs: anyone else gets connect_error "forbidden"', async () => {
    const user = await h.newUser();
    assert.equal((await refusal(user, { namespace: '/admin' })).message, 'forbidden');
    const { socket } = await socketOf(h.admin, { namespace: '/admin' });
    assert.ok(socket.connected);
    closeAll();
  });

  test('on connect a socket gets presence-snapshot with the online users and an event_id', async () => {
    const user = await h.newUser();
    const { rec } = await socketOf(user);
    const snapshot = (await rec.waitFor((e) => e.name === 'presence-snapshot')).payload;
    assert.ok((snapshot.online as number[]).includes(user.id));
    assert.equal(typeof snapshot.event_id, 'number');
    closeAll();
  });
});

describe('events reach the rooms they belong to, after commit, each with an event_id', () => {
  test('new-message to general reaches everyone; to a project room only its members (and not an outsider)', async () => {
    const { owner, member, project } = await team(h);
    const outsider = await h.newUser();
    const [o, m, x] = await Promise.all([socketOf(owner), socketOf(member), socketOf(outsider)]);
    const general = await postMessage(member, 'general', `hello ${uniqueWord()}`);
    const inProject = await postMessage(owner, `project:${project.id}`, `team ${uniqueWord()}`);
    for (const { rec } of [o, m, x]) await rec.waitFor((e) => e.name === 'new-message' && e.payload.id === general.id);
    for (const { rec } of [o, m]) {
      const got = (await rec.waitFor((e) => e.name === 'new-message' && e.payload.id === inProject.id)).payload;
      assert.deepEqual(Object.keys(got).sort(), ['author_id', 'created_at', 'event_id', 'id', 'room', 'text']);
      assert.equal(typeof got.event_id, 'number');
    }
    await sleep(200);
    assert.equal(x.rec.named('new-message').filter((p) => p.id === inProject.id).length, 0, 'the outsider hears nothing of the project');
    closeAll();
  });

  test('task-created, task-updated and task-deleted reach the project room; new-notification reaches the assignee', async () => {
    const { owner, member, project } = await team(h);
    const m = await socketOf(member);
    const task = await createTask(owner, project.id, { assignee_id: member.id });
    const created = (await m.rec.waitFor((e) => e.name === 'task-created' && e.payload.id === task.id)).payload;
    assert.equal(created.title, task.title);
    const notified = (await m.rec.waitFor((e) => e.name === 'new-notification' && e.payload.kind === 'task_assigned')).payload;
    assert.equal((notified.payload as { task_id: number }).task_id, task.id);
    assert.equal((await owner.client.put(`/api/v1/tasks/${task.id}/status`, { status: 'IN_PROGRESS' }, { token: owner.token })).status, 200);
    const updated = (await m.rec.waitFor((e) => e.name === 'task-updated' && e.payload.id === task.id)).payload;
    assert.equal(updated.status, 'IN_PROGRESS');
    assert.equal((await owner.client.delete(`/api/v1/tasks/${task.id}`, { token: owner.token })).status, 204);
    assert.deepEqual(Object.keys((await m.rec.waitFor((e) => e.name === 'task-deleted')).payload).sort(), ['event_id', 'id', 'project_id']);
    const ids = m.rec.events.filter((e) => typeof e.payload.event_id === 'number' && e.name !== 'presence-snapshot').map((e) => e.payload.event_id as number);
    assert.deepEqual(ids, [...ids].sort((a, b) => a - b), 'event ids increase');
    closeAll();
  });

  test('post-liked reaches the author', async () => {
    const [author, fan] = await Promise.all([h.newUser(), h.newUser()]);
    const a = await socketOf(author);
    const post = await author.client.post('/api/v1/posts', { content: 'Like this' }, { token: author.token });
    assert.equal((await fan.client.put(`/api/v1/posts/${post.body.id}/like`, undefined, { token: fan.token })).status, 200);
    const liked = (await a.rec.waitFor((e) => e.name === 'post-liked')).payload;
    assert.deepEqual({ ...liked, event_id: 0 }, { post_id: post.body.id, user_id: fan.id, like_count: 1, event_id: 0 });
    closeAll();
  });

  test('a change whose transaction fails produces no event, on any namespace', async () => {
    const { owner, member, project } = await team(h);
    const m = await socketOf(member);
    const admin = await socketOf(h.admin, { namespace: '/admin' });
    const doomed = `Doomed ${uniqueWord()}`;
    // A test trigger that fails the task's insert after the use case has sent its record and events.
    await h.server.owner.exec(`CREATE OR REPLACE FUNCTION fail_doomed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.title LIKE 'Doomed %' THEN RAISE EXCEPTION 'doomed'; END IF; RETURN NEW; END $$;
      DROP TRIGGER IF EXISTS fail_doomed ON tasks;
      CREATE TRIGGER fail_doomed AFTER INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION fail_doomed();`);
    try {
      const res = await owner.client.post('/api/v1/tasks', { project_id: project.id, title: doomed }, { token: owner.token });
      assert.equal(res.status, 500, res.text);
      const later = await postMessage(owner, `project:${project.id}`);
      await m.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === later.id);
      assert.equal(m.rec.events.filter((e) => e.payload.title === doomed).length, 0);
      assert.equal(admin.rec.events.filter((e) => (e.payload.metadata as { title?: string } | undefined)?.title === doomed).length, 0);
      assert.equal((await h.server.owner.query(`SELECT 1 FROM outbox_events WHERE payload->>'title' = $1`, [doomed])).length, 0);
    } finally {
      await h.server.owner.exec('DROP TRIGGER IF EXISTS fail_doomed ON tasks; DROP FUNCTION IF EXISTS fail_doomed();');
      closeAll();
    }
  });

  test('/admin streams each audit record after its commit, as the API shows it', async () => {
    const user = await h.newUser();
    const admin = await socketOf(h.admin, { namespace: '/admin' });
    const project = await createProject(user);
    const record = (await admin.rec.waitFor((e) => e.name === 'audit-record' && e.payload.action === 'CREATE_PROJECT' && e.payload.resource_id === project.id)).payload;
    assert.deepEqual(Object.keys(record).sort(), ['action', 'actor_id', 'event_id', 'id', 'ip', 'metadata', 'request_id', 'resource_id', 'resource_type', 'result', 'timestamp', 'user_agent']);
    assert.equal(record.actor_id, user.id);
    closeAll();
  });
});

describe('the client sends new-message', () => {
  test('stored through the same use case as POST /messages: acknowledged with the message, and delivered to the room', async () => {
    const [a, b] = await Promise.all([h.newUser(), h.newUser()]);
    const sa = await socketOf(a);
    const sb = await socketOf(b);
    const text = `over the socket ${uniqueWord()}`;
    const answer = await emitWithAck(sa.socket, 'new-message', { text });
    assert.equal(answer.ok, true, JSON.stringify(answer));
    const message = answer.message as Record<string, unknown>;
    assert.deepEqual({ room: message.room, text: message.text, author_id: message.author_id }, { room: 'general', text, author_id: a.id });
    await sb.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === message.id);
    const stored = await h.server.owner.query('SELECT 1 FROM messages WHERE id = $1 AND author_id = $2', [message.id, a.id]);
    assert.equal(stored.length, 1);
    const outsider = await emitWithAck(sa.socket, 'new-message', { text: 'x', room: 'project:999999' });
    assert.deepEqual(outsider, { ok: false, error: { code: 'NOT_FOUND', message: 'Room not found' } });
    closeAll();
  });

  test('over 16 KiB, over 2000 characters, malformed, or beyond 20 a second: refused by acknowledgement, the socket stays connected', async () => {
    const user = await h.newUser();
    const { socket } = await socketOf(user);
    assert.equal(((await emitWithAck(socket, 'new-message', { text: 'x'.repeat(17 * 1024) })).error as { code: string }).code, 'PAYLOAD_TOO_LARGE');
    const long = await emitWithAck(socket, 'new-message', { text: 'x'.repeat(2001) });
    assert.deepEqual(long.error, { code: 'VALIDATION_FAILED', message: 'text must have at most 2000 characters' });
    for (const bad of [42, 'text', [], null, { text: 5 }, { text: ' ' }, { text: 'ok', extra: 1 }, { text: 'ok', room: 'lobby' }, { text: JSON.parse(`${'['.repeat(100)}${']'.repeat(100)}`) }]) {
      const answer = await emitWithAck(socket, 'new-message', bad);
      assert.equal(answer.ok, false, JSON.stringify(bad).slice(0, 80));
      assert.ok(['VALIDATION_FAILED', 'PAYLOAD_TOO_LARGE'].includes((answer.error as { code: string }).code));
    }
    socket.emit('new-message', { text: 'no callback' });
    socket.emit('new-message');
    // Nested beyond what JSON.stringify can walk: refused like an oversized event, the socket kept.
    emitRaw(socket, `{"text":${'['.repeat(100_000)}${']'.repeat(100_000)}}`, 9001);
    assert.deepEqual(await rawAck(socket, 9001), { ok: false, error: { code: 'PAYLOAD_TOO_LARGE', message: 'A message event may have at most 16384 bytes' } });
    assert.ok(socket.connected);
    await sleep(1100);
    const burst = await Promise.all(Array.from({ length: 25 }, (_, i) => emitWithAck(socket, 'new-message', { text: `burst ${i}` })));
    const limited = burst.filter((a) => (a.error as { code?: string } | undefined)?.code === 'RATE_LIMITED').length;
    assert.ok(limited >= 5, `${limited} of 25 refused`);
    assert.ok(socket.connected, 'the socket stays connected');
    assert.equal((await h.server.owner.query(`SELECT 1 FROM messages WHERE text = 'no callback'`)).length, 0, 'an event without a callback does nothing');
    closeAll();
  });

  test('a frame over 1 MiB closes the connection (maxHttpBufferSize), and the server carries on', async () => {
    const user = await h.newUser();
    const { socket } = await socketOf(user);
    const gone = disconnection(socket, 5000);
    socket.emit('new-message', { text: 'x'.repeat(1024 * 1024 + 10) }, () => {});
    await gone;
    const again = await socketOf(user);
    assert.equal((await emitWithAck(again.socket, 'new-message', { text: 'still here' })).ok, true);
    closeAll();
  });
});

describe('rooms follow memberships, on the spot', () => {
  test('added to a project: its events come; removed: they stop; the project deleted: its room is left', async () => {
    const owner = await h.newUser();
    const joiner = await h.newUser();
    const project = await createProject(owner);
    const j = await socketOf(joiner);
    await addMember(owner, project.id, joiner.id);
    const first = await postMessage(owner, `project:${project.id}`);
    await j.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === first.id);
    assert.equal((await owner.client.delete(`/api/v1/projects/${project.id}/members/${joiner.id}`, { token: owner.token })).status, 204);
    const second = await postMessage(owner, `project:${project.id}`);
    const marker = await postMessage(owner, 'general');
    await j.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === marker.id);
    assert.equal(j.rec.named('new-message').filter((p) => p.id === second.id).length, 0, 'nothing after the removal');
    closeAll();
  });
});

describe('revocation disconnects at once', () => {
  test('logout disconnects that session\'s sockets within 1 s; another session of the user stays', async () => {
    const user = await h.newUser();
    const other = await login(h.server, user.email, user.password);
    const mine = await socketOf(user);
    const theirs = await socketOf(other);
    const gone = disconnection(mine.socket, 1000);
    assert.equal((await user.client.post('/api/v1/auth/logout', undefined, { token: user.token })).status, 204);
    await gone;
    await sleep(200);
    assert.ok(theirs.socket.connected);
    closeAll();
  });

  test('a password change disconnects the other sessions\' sockets, not this one\'s', async () => {
    const user = await h.newUser();
    const other = await login(h.server, user.email, user.password);
    const mine = await socketOf(user);
    const theirs = await socketOf(other);
    const gone = disconnection(theirs.socket, 1000);
    const res = await user.client.put('/api/v1/auth/password', { current_password: user.password, new_password: 'a-whole-new-password' }, { token: user.token });
    assert.equal(res.status, 204, res.text);
    await gone;
    await sleep(200);
    assert.ok(mine.socket.connected);
    closeAll();
  });

  test('deactivation and deletion disconnect every socket of the user, on both namespaces', async () => {
    for (const act of ['deactivate', 'delete'] as const) {
      const user = await h.newUser({ role: 'ADMIN' });
      const main = await socketOf(user);
      const admin = await socketOf(user, { namespace: '/admin' });
      const gone = Promise.all([disconnection(main.socket, 1000), disconnection(admin.socket, 1000)]);
      const res = act === 'deactivate'
        ? await h.admin.client.put(`/api/v1/users/${user.id}/active`, { active: false }, { token: h.admin.token })
        : await h.admin.client.delete(`/api/v1/users/${user.id}`, { token: h.admin.token });
      assert.ok(res.status === 200 || res.status === 204, res.text);
      await gone;
    }
    closeAll();
  });

  test('demotion disconnects the /admin sockets; the / socket stays', async () => {
    const user = await h.newUser({ role: 'ADMIN' });
    const main = await socketOf(user);
    const admin = await socketOf(user, { namespace: '/admin' });
    const gone = disconnection(admin.socket, 1000);
    assert.equal((await h.admin.client.put(`/api/v1/users/${user.id}/role`, { role: 'USER' }, { token: h.admin.token })).status, 200);
    await gone;
    await sleep(200);
    assert.ok(main.socket.connected);
    closeAll();
  });
});

describe('replay', () => {
  test('a client that reconnects with last_event_id receives exactly what it missed, in order, then live events', async () => {
    const { owner, member, project } = await team(h);
    const first = await socketOf(member);
    const seen = await postMessage(owner, `project:${project.id}`);
    const lastEventId = (await first.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === seen.id)).payload.event_id as number;
    first.socket.close();
    const missed = [await postMessage(owner, `project:${project.id}`), await postMessage(owner, 'general')];
    const task = await createTask(owner, project.id);
    const again = await socketOf(member, { lastEventId });
    const replayed = await again.rec.waitFor((e) => e.name === 'task-created' && e.payload.id === task.id);
    const live = await postMessage(owner, `project:${project.id}`);
    await again.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === live.id);
    const mine = again.rec.events.filter((e) => e.name === 'new-message' || e.name === 'task-created');
    const ids = mine.map((e) => e.payload.event_id as number);
    assert.deepEqual(ids, [...ids].sort((a, b) => a - b), 'in event_id order');
    assert.equal(new Set(ids).size, ids.length, 'no duplicates');
    assert.ok(ids.every((id) => id > lastEventId));
    const messages = mine.filter((e) => e.name === 'new-message').map((e) => e.payload.id);
    assert.deepEqual(messages.filter((id) => [...missed, live].some((m) => m.id === id)), [...missed, live].map((m) => m.id));
    assert.ok(replayed);
    closeAll();
  });

  test('an event live delivery still holds when the catch-up has replayed it is sent once (the catch-up overtook delivery)', async () => {
    const { owner, member, project } = await team(h);
    const room = `project:${project.id}`;
    const first = await socketOf(member);
    const seen = await postMessage(owner, room);
    const lastEventId = (await first.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === seen.id)).payload.event_id as number;
    first.socket.close();
    // Live delivery reads and packs the next message of the room, then waits here before sending it.
    let holding!: () => void;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    deliveryPause.beforeSend = async (events) => {
      if (!events.some((e) => e.room === room && e.name === 'new-message')) return;
      deliveryPause.beforeSend = undefined;
      holding();
      await released;
    };
    try {
      const missed = await postMessage(owner, room);
      await held;
      // The client reconnects meanwhile: its catch-up reads the message from the outbox and sends it.
      const again = await socketOf(member, { lastEventId });
      await again.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === missed.id);
      release();
      const live = await postMessage(owner, room);
      await again.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === live.id);
      const received = again.rec.events.filter((e) => e.name === 'new-message').map((e) => e.payload.id);
      assert.deepEqual(received, [missed.id, live.id], 'the held message once (not again when delivery went on), then live ones');
    } finally {
      deliveryPause.beforeSend = undefined;
      release();
      closeAll();
    }
  });

  test('what it missed is older than the retention: resync-required with the oldest event_id kept', async () => {
    const user = await h.newUser();
    const s = await socketOf(user);
    // Stays connected: what it receives has been numbered (an event gets its event_id from the
    // sequencer after its commit), so the oldest kept event_id read below is final.
    const witness = await socketOf(user);
    const m = await postMessage(user, 'general');
    const lastEventId = (await s.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === m.id)).payload.event_id as number;
    s.socket.close();
    // Each message is seen before the next is sent, so each lands in a batch of its own: the one
    // the client needs next is then never in the newest batch, which pruning keeps.
    const needed = await postMessage(user, 'general');
    await witness.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === needed.id);
    const newest = await postMessage(user, 'general');
    await witness.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === newest.id);
    // Pruning as maintenance does, up to and including what the client would need next.
    // (Whole batches go, with their rows, and never the newest: it says where numbering stands.)
    await h.server.owner.query(
      `WITH gone AS (DELETE FROM outbox_batches WHERE first_event_id <= $1 AND last_event_id < (SELECT max(last_event_id) FROM outbox_batches) RETURNING row_ids)
       DELETE FROM outbox WHERE id IN (SELECT unnest(row_ids) FROM gone)`,
      [lastEventId + 1],
    );
    const again = await socketOf(user, { lastEventId });
    const resync = (await again.rec.waitFor((e) => e.name === 'resync-required')).payload;
    const oldest = (await h.server.owner.query<{ id: number }>('SELECT min(first_event_id)::int AS id FROM outbox_batches WHERE event_count > 0'))[0]!.id;
    assert.equal(resync.reason, 'retention');
    assert.equal(resync.oldest_event_id, oldest);
    assert.ok((resync.event_id as number) >= oldest);
    const unknown = await socketOf(user, { lastEventId: 10 ** 12 });
    assert.equal((await unknown.rec.waitFor((e) => e.name === 'resync-required')).payload.reason, 'unknown_event_id');
    closeAll();
  });

  test('/admin replays audit records too', async () => {
    const first = await socketOf(h.admin, { namespace: '/admin' });
    const a = await createProject(h.admin);
    const lastEventId = (await first.rec.waitFor((e) => e.name === 'audit-record' && e.payload.resource_id === a.id)).payload.event_id as number;
    first.socket.close();
    const b = await createProject(h.admin);
    const again = await socketOf(h.admin, { namespace: '/admin', lastEventId });
    const replayed = (await again.rec.waitFor((e) => e.name === 'audit-record' && e.payload.resource_id === b.id)).payload;
    assert.equal(replayed.action, 'CREATE_PROJECT');
    closeAll();
  });

  test('/admin: an admin who connects while a batch of records is on its way gets them, records included', async () => {
    // Delivery reads a record only for a room with a socket of this instance in it: here none,
    // while the batch is read and packed; the admin joins before it is sent.
    closeAll();
    await sleep(200); // the server has seen the earlier /admin sockets go
    let holding!: () => void;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    deliveryPause.beforeSend = async (events) => {
      if (!events.some((e) => e.name === 'audit-record')) return;
      deliveryPause.beforeSend = undefined;
      holding();
      await released;
    };
    try {
      const project = await createProject(h.admin);
      await held;
      const admin = await socketOf(h.admin, { namespace: '/admin' });
      release();
      const record = (await admin.rec.waitFor((e) => e.name === 'audit-record' && e.payload.resource_id === project.id)).payload;
      assert.deepEqual([record.action, record.resource_type, record.result, record.actor_id], ['CREATE_PROJECT', 'PROJECT', 'SUCCESS', h.admin.id]);
      assert.equal(typeof record.timestamp, 'string');
    } finally {
      deliveryPause.beforeSend = undefined;
      release();
      closeAll();
    }
  });
});

describe('commit order', () => {
  // On PGlite the owner connection is the service's one connection: holding a transaction there blocks the API itself.
  test('an event committed while an older transaction is still open is delivered at once; the older one comes after it, once it commits', { skip: needsPostgres }, async () => {
    const user = await h.newUser();
    const s = await socketOf(user);
    const late = `late ${uniqueWord()}`;
    let quick: { id: number } | undefined;
    // A transaction that writes an event (taking the lower transaction id) and stays open.
    await h.server.owner.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO outbox (items) VALUES (json_build_array(json_build_object('name', 'new-message', 'room', 'general', 'payload', json_build_object('text', $1::text))))`,
        [late],
      );
      quick = await postMessage(user, 'general');
      // Delivered while the older transaction is still open: it waits for nobody else's commit.
      await s.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === quick!.id);
      assert.equal(s.rec.named('new-message').filter((p) => p.text === late).length, 0, 'the open one is not delivered before it commits');
    });
    await s.rec.waitFor((e) => e.name === 'new-message' && e.payload.text === late);
    const order = s.rec.named('new-message').filter((p) => p.text === late || p.id === quick!.id);
    assert.deepEqual(order.map((p) => (p.text === late ? 'late' : 'quick')), ['quick', 'late'], 'in commit order');
    assert.ok((order[0]!.event_id as number) < (order[1]!.event_id as number));
    closeAll();
  });
});

describe('presence', () => {
  test('user-online on the first socket, user-offline after the last', async () => {
    const [watcher, subject] = await Promise.all([h.newUser(), h.newUser()]);
    const w = await socketOf(watcher);
    const one = await connect(subject);
    const two = await connect(subject);
    await w.rec.waitFor((e) => e.name === 'user-online' && e.payload.user_id === subject.id);
    one.close();
    await sleep(300);
    assert.equal(w.rec.named('user-offline').filter((p) => p.user_id === subject.id).length, 0, 'a socket is still open');
    two.close();
    const offline = (await w.rec.waitFor((e) => e.name === 'user-offline' && e.payload.user_id === subject.id)).payload;
    assert.equal(typeof offline.event_id, 'number');
    assert.equal(w.rec.named('user-online').filter((p) => p.user_id === subject.id).length, 1);
    closeAll();
  });
});

describe('Redis unreachable', () => {
  test('an instance keeps serving its sockets: events still arrive, and nothing crashes', async () => {
    const cut = await startTestServer({ database: h.server.database, env: { RATE_LIMIT_PER_MINUTE: '0', REDIS_URL: 'redis://127.0.0.1:1' } });
    try {
      const someone = await h.newUser();
      const onCut = await connectRecording({ ...someone, client: new Client(cut) });
      open.push(onCut.socket);
      const answer = await emitWithAck(onCut.socket, 'new-message', { text: 'no redis' });
      assert.equal(answer.ok, true, JSON.stringify(answer));
      await onCut.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === (answer.message as { id: number }).id);
      await sleep(500);
      assert.ok(onCut.socket.connected);
    } finally {
      closeAll();
      await cut.close();
    }
  });
});
