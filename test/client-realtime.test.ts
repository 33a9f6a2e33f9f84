// @teamlog/client's real-time side (issue 25) against a real server and real sockets: handlers
// get each event once and in event_id order, also when the connection is cut and events are
// committed meanwhile (the client resumes with last_event_id); resync-required reaches the
// application as a typed event with the advice to reload; ADMINs get the /admin audit stream
// and others are told no; one namespace disconnects and reconnects (resuming or live only)
// while the other stays connected. (The README's example, examples/quickstart.mjs, is run from the
// packed tarball by test/client-package.test.ts.)
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { createClient, type RealtimeEvents, type TeamlogClient } from '../client/src/index.js';
import { randomIp, type Session } from './helpers/client.js';
import { addMember, createProject, postMessage } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { sleep } from './helpers/sockets.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD } from './helpers/server.js';
import { TcpProxy } from './helpers/tcp-proxy.js';

const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0' } });
const open: TeamlogClient[] = [];
after(() => open.forEach((c) => c.close()));

async function signedIn(session: { email: string; password: string }, baseUrl = h.server.url, opts: Partial<Parameters<typeof createClient>[0]> = {}) {
  const c = createClient({ baseUrl, headers: { 'x-forwarded-for': randomIp() }, ...opts });
  open.push(c);
  await c.login(session.email, session.password);
  return c;
}

async function until(what: string, done: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(25);
  }
}

test('handlers get every message once, in event_id order, across a cut connection with messages committed meanwhile', async () => {
  const owner = await h.newUser();
  const member = await h.newUser();
  const project = await createProject(owner);
  await addMember(owner, project.id, member.id);
  const url = new URL(h.server.url);
  const proxy = new TcpProxy({ host: url.hostname, port: Number(url.port) });
  const port = await proxy.start();
  try {
    const teamlog = await signedIn(member, `http://127.0.0.1:${port}`);
    const got: Array<RealtimeEvents['new-message']> = [];
    const states: string[] = [];
    teamlog.realtime.on('connected', ({ resumedFrom }) => void states.push(`connected ${resumedFrom === undefined ? 'live' : 'resumed'}`));
    teamlog.realtime.on('disconnected', () => void states.push('disconnected'));
    // A slow handler: the next event waits for it.
    let running = 0;
    teamlog.realtime.on('new-message', async (m) => {
      assert.equal(running++, 0, 'one event at a time');
      await sleep(m.id % 3);
      got.push(m);
      running--;
    });
    await teamlog.realtime.ready();
    const sent = [];
    for (let i = 0; i < 5; i++) sent.push(await postMessage(owner, i % 2 ? 'general' : `project:${project.id}`));
    await until('the first five', () => got.length === 5);

    await proxy.stop();
    await until('the client sees the cut', () => states.includes('disconnected'));
    for (let i = 0; i < 10; i++) sent.push(await postMessage(owner, i % 2 ? 'general' : `project:${project.id}`));
    await proxy.start(port);
    await until('the ten missed', () => got.length === 15);
    for (let i = 0; i < 5; i++) sent.push(await postMessage(owner, `project:${project.id}`));
    await until('five more, live', () => got.length === 20);
    await sleep(300);

    assert.deepEqual(got.map((m) => m.id), sent.map((m) => m.id), 'each once, in commit order');
    const ids = got.map((m) => m.event_id);
    assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
    assert.equal(new Set(ids).size, ids.length);
    assert.equal(teamlog.realtime.lastEventId(), ids.at(-1));
    assert.deepEqual(states.slice(0, 3), ['connected live', 'disconnected', 'connected resumed']);
  } finally {
    await proxy.stop();
  }
});

test('a client resuming from an id the service does not know is told resync-required, with the advice to reload, and goes on live', async () => {
  const me = await h.newUser();
  const teamlog = await signedIn(me, h.server.url, { realtime: { lastEventId: { '/': 2 ** 50 } } });
  const resyncs: Array<RealtimeEvents['resync-required']> = [];
  const messages: number[] = [];
  teamlog.realtime.on('resync-required', (r) => void resyncs.push(r));
  teamlog.realtime.on('new-message', (m) => void messages.push(m.id));
  await until('resync-required', () => resyncs.length === 1);
  assert.equal(resyncs[0]!.namespace, '/');
  assert.equal(resyncs[0]!.reason, 'unknown_event_id');
  assert.equal(resyncs[0]!.advice, 'reload');
  assert.equal(typeof resyncs[0]!.oldest_event_id, 'number');
  const m = await postMessage(me, 'general');
  await until('the next message', () => messages.includes(m.id));
});

test('ADMINs get each audit record on /admin; a USER subscribing is told forbidden', async () => {
  const admin = await signedIn({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
  const records: Array<RealtimeEvents['audit-record']> = [];
  admin.realtime.on('audit-record', (r) => void records.push(r));
  await admin.realtime.ready('/admin');
  const project = await admin.projects.create({ name: 'Audited' });
  await until('the CREATE_PROJECT record', () => records.some((r) => r.action === 'CREATE_PROJECT' && r.resource_id === project.id));

  const user: Session = await h.newUser();
  const teamlog = await signedIn(user);
  const errors: unknown[] = [];
  teamlog.realtime.on('error', ({ error }) => void errors.push(error));
  teamlog.realtime.on('audit-record', () => assert.fail('a USER got an audit record'));
  await until('forbidden', () => errors.length === 1);
  assert.equal((errors[0] as { code?: string }).code, 'FORBIDDEN');
});

test('disconnect(\'/admin\') leaves / connected; connecting again replays what was missed, or with resume: false goes on live only', async () => {
  const admin = await signedIn({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
  const records: number[] = [];
  const messages: number[] = [];
  const connects: Array<number | undefined> = [];
  admin.realtime.on('audit-record', (r) => void (r.action === 'CREATE_PROJECT' && records.push(r.resource_id!)));
  admin.realtime.on('new-message', (m) => void messages.push(m.id));
  admin.realtime.on('connected', ({ namespace, resumedFrom }) => void (namespace === '/admin' && connects.push(resumedFrom)));
  await Promise.all([admin.realtime.ready('/'), admin.realtime.ready('/admin')]);
  const seen = await admin.projects.create({ name: 'Seen live' });
  await until('the record of a project created while connected', () => records.includes(seen.id));

  admin.realtime.disconnect('/admin');
  assert.equal(admin.realtime.connected('/admin'), false);
  assert.equal(admin.realtime.connected('/'), true);
  const missed = await admin.projects.create({ name: 'Missed' });
  const message = await postMessage(h.admin, 'general');
  await until('a message on /, still connected', () => messages.includes(message.id));
  await sleep(200);
  assert.ok(!records.includes(missed.id), 'no audit record while /admin is disconnected');
  admin.realtime.connect('/admin');
  await until('the missed record, replayed', () => records.includes(missed.id));
  assert.equal(typeof connects[1], 'number', 'resumed from the last event received');

  admin.realtime.disconnect('/admin', { resume: false });
  assert.equal(admin.realtime.lastEventId('/admin'), undefined);
  const forgotten = await admin.projects.create({ name: 'Forgotten' });
  // Delivered in event_id order: once a later message has arrived, the record has been sent.
  const later = await postMessage(h.admin, 'general');
  await until('a message committed after it', () => messages.includes(later.id));
  await admin.realtime.ready('/admin');
  const after = await admin.projects.create({ name: 'After' });
  await until('a record committed after the reconnection', () => records.includes(after.id));
  await sleep(200);
  assert.ok(!records.includes(forgotten.id), 'resume: false replays nothing');
  assert.deepEqual(connects.slice(2), [undefined], 'live only');
  assert.deepEqual(records, [seen.id, missed.id, after.id], 'each once');
  assert.equal(admin.realtime.connected('/'), true);
});
