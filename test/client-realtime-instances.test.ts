// @teamlog/client's subscriptions across instances (issue 25), on PostgreSQL and Redis: the
// instance holding the client's socket is killed with kill -9, events are committed through
// another instance meanwhile, a new instance starts at the address the client uses (as behind a
// load balancer), and every event reaches the handlers once, in commit order.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { createClient, type RealtimeEvents, type TeamlogClient } from '../client/src/index.js';
import { randomIp, type Session } from './helpers/client.js';
import { addMember, createProject, postMessage } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { sleep } from './helpers/sockets.js';
import { freePort, spawnServer, type ServerProcess } from './helpers/process.js';
import { needsRedis, siblingInstanceEnv } from './helpers/server.js';

const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0' } });

const procs: ServerProcess[] = [];
const dirs: string[] = [];
let teamlog: TeamlogClient | undefined;
after(async () => {
  teamlog?.close();
  await Promise.all(procs.map((p) => p.stop()));
  dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
});

/** Another instance on the test server's database and Redis, with its keys, at `port`. */
async function instance(port: number): Promise<ServerProcess> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-client-instance-'));
  dirs.push(dataDir);
  const proc = await spawnServer({ ...siblingInstanceEnv(h.server, dataDir), PORT: String(port) });
  procs.push(proc);
  await proc.waitReady();
  return proc;
}

async function until(what: string, done: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(25);
  }
}

test('the socket\'s instance killed with kill -9, events committed meanwhile on another, a new instance at its address: each event once, in order', { skip: needsRedis, timeout: 60_000 }, async () => {
  const port = await freePort();
  const doomed = await instance(port);
  const owner: Session = await h.newUser();
  const member: Session = await h.newUser();
  const project = await createProject(owner);
  await addMember(owner, project.id, member.id);

  teamlog = createClient({ baseUrl: doomed.url, headers: { 'x-forwarded-for': randomIp() } });
  await teamlog.login(member.email, member.password);
  const got: Array<[string, number, number]> = [];
  const record = (name: string) => (p: { id: number; event_id: number }) => void got.push([name, p.id, p.event_id]);
  teamlog.realtime.on('new-message', record('new-message'));
  teamlog.realtime.on('task-created', record('task-created'));
  teamlog.realtime.on('task-updated', record('task-updated'));
  const connects: Array<RealtimeEvents['connected']> = [];
  teamlog.realtime.on('connected', (c) => void connects.push(c));
  await teamlog.realtime.ready();

  const expected: Array<[string, number]> = [];
  const message = async (room: string) => expected.push(['new-message', (await postMessage(owner, room)).id]);
  const task = async () => {
    const res = await owner.client.post('/api/v1/tasks', { project_id: project.id, title: `T${expected.length}` }, { token: owner.token });
    assert.equal(res.status, 201, res.text);
    expected.push(['task-created', res.body.id]);
    return res.body.id as number;
  };
  const move = async (id: number, status: string) => {
    const res = await owner.client.put(`/api/v1/tasks/${id}/status`, { status }, { token: owner.token });
    assert.equal(res.status, 200, res.text);
    expected.push(['task-updated', id]);
  };

  await message('general');
  const first = await task();
  await until('the events before the kill', () => got.length === expected.length);

  doomed.child.kill('SIGKILL');
  await doomed.exited;
  // Committed through the instance that lives, while the client has nowhere to connect.
  await message(`project:${project.id}`);
  await move(first, 'IN_PROGRESS');
  const second = await task();
  await message('general');
  await move(second, 'IN_PROGRESS');
  await move(first, 'IN_REVIEW');

  const successor = await instance(port);
  // And while it starts serving the client, more.
  await message(`project:${project.id}`);
  await move(first, 'DONE');
  await until('every event', () => got.length >= expected.length, 30_000);
  await message('general');
  await until('a live one after', () => got.length >= expected.length, 10_000);
  await sleep(500);

  assert.deepEqual(got.map(([name, id]) => [name, id]), expected, 'each event once, in commit order');
  const ids = got.map(([, , e]) => e);
  assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
  assert.ok(connects.length >= 2 && connects.at(-1)!.resumedFrom !== undefined, 'reconnected with last_event_id');
  assert.equal(successor.url, doomed.url);
});
