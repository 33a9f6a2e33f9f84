// @teamlog/client's REST side (issue 25) against a real server: pages as async iterators and
// one page with its cursor, Idempotency-Key generated for a creation and the same on its retry,
// If-Match from the version last seen, every refusal one typed TeamlogError with the problem's
// code, detail and extensions, and the audit log's routes (q passed through, proofs, export).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { TeamlogError, createClient, type Task, type TeamlogClient } from '../client/src/index.js';
import { randomIp } from './helpers/client.js';
import { addMember, countRows, createProject, uniqueWord } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD } from './helpers/server.js';

const h = useTestServer();

/** A client of the test server, posing as an address of its own (the login throttle counts per address). */
function client(opts: Partial<Parameters<typeof createClient>[0]> = {}): TeamlogClient {
  return createClient({ baseUrl: h.server.url, headers: { 'x-forwarded-for': randomIp() }, ...opts });
}

async function signedIn(session: { email: string; password: string }, opts: Partial<Parameters<typeof createClient>[0]> = {}) {
  const c = client(opts);
  await c.login(session.email, session.password);
  return c;
}

describe('pages', () => {
  test('for await walks every keyset page of a list, and page() answers one page with the cursor of the next', async () => {
    const me = await h.newUser();
    const teamlog = await signedIn(me);
    const project = await teamlog.projects.create({ name: `Pages ${uniqueWord()}` });
    const created: Task[] = [];
    for (let i = 0; i < 5; i++) created.push(await teamlog.tasks.create({ project_id: project.id, title: `Task ${i}` }));

    const walked: number[] = [];
    for await (const task of teamlog.tasks.list({ project_id: project.id, limit: 2 })) walked.push(task.id);
    assert.deepEqual(walked, created.map((t) => t.id).reverse(), 'every task once, newest first, over three pages');

    const first = await teamlog.tasks.list({ project_id: project.id, limit: 2 }).page();
    assert.equal(first.data.length, 2);
    assert.equal(typeof first.next_cursor, 'string');
    // A page's next_cursor goes back in as it is (string or null): it type-checks and it works.
    const second = await teamlog.tasks.list({ project_id: project.id, limit: 2, cursor: first.next_cursor }).page();
    const third = await teamlog.tasks.list({ project_id: project.id, limit: 2 }).page(second.next_cursor);
    assert.deepEqual([...first.data, ...second.data, ...third.data].map((t) => t.id), walked);
    assert.equal(third.next_cursor, null);

    const pages = [];
    for await (const page of teamlog.tasks.list({ project_id: project.id, limit: 2 }).pages()) pages.push(page.data.length);
    assert.deepEqual(pages, [2, 2, 1]);
    assert.deepEqual((await teamlog.tasks.list({ project_id: project.id }).toArray(3)).length, 3);
    teamlog.close();
  });
});

describe('creations and changes', () => {
  test('a creation whose answer is lost is sent again with the same Idempotency-Key, and makes one project', async () => {
    const me = await h.newUser();
    const sent: Array<string | null> = [];
    let dropped = false;
    // A network that loses the first answer to a POST /projects: the request reached the service.
    const lossy: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (init?.method === 'POST' && String(input).endsWith('/projects')) {
        sent.push(new Headers(init.headers).get('idempotency-key'));
        if (!dropped) {
          dropped = true;
          throw new TypeError('fetch failed (the answer was lost)');
        }
      }
      return res;
    };
    const teamlog = await signedIn(me, { fetch: lossy });
    const name = `Once ${uniqueWord()}`;
    const project = await teamlog.projects.create({ name });
    assert.equal(sent.length, 2);
    assert.match(sent[0]!, /^[0-9a-f-]{36}$/);
    assert.equal(sent[1], sent[0], 'the retry carries the first key');
    assert.equal(await countRows(h.server, 'projects WHERE name = $1', [name]), 1);
    assert.equal(project.name, name);

    // Two calls are two creations: a key per call, not per client.
    await teamlog.projects.create({ name });
    assert.notEqual(sent[2], sent[0]);
    assert.equal(await countRows(h.server, 'projects WHERE name = $1', [name]), 2);
    teamlog.close();
  });

  test('a change sends If-Match with the version last seen: a task changed by someone else meanwhile is 412, and ifMatch: false overrides', async () => {
    const owner = await h.newUser();
    const other = await h.newUser();
    const project = await createProject(owner);
    await addMember(owner, project.id, other.id);
    const teamlog = await signedIn(owner);
    const task = await teamlog.tasks.create({ project_id: project.id, title: 'Versioned' });
    assert.match(teamlog.versionOf(`/tasks/${task.id}`) ?? '', /^"task-\d+-v1"$/);
    const moved = await teamlog.tasks.setStatus(task.id, 'IN_PROGRESS');
    assert.equal(moved.status, 'IN_PROGRESS');
    assert.match(teamlog.versionOf(`/tasks/${task.id}`) ?? '', /-v2"$/, 'the answer to a change is the version now');

    const res = await other.client.put(`/api/v1/tasks/${task.id}`, { title: 'Renamed by the other', description: '' }, { token: other.token });
    assert.equal(res.status, 200);
    await assert.rejects(teamlog.tasks.update(task.id, { title: 'Mine', description: '' }), (err: unknown) => {
      assert.ok(err instanceof TeamlogError);
      assert.equal(err.status, 412);
      assert.equal(err.code, 'PRECONDITION_FAILED');
      return true;
    });
    await teamlog.tasks.get(task.id);
    assert.equal((await teamlog.tasks.update(task.id, { title: 'Mine after reading', description: '' })).title, 'Mine after reading');
    await other.client.put(`/api/v1/tasks/${task.id}`, { title: 'Again', description: '' }, { token: other.token });
    assert.equal((await teamlog.tasks.update(task.id, { title: 'Mine regardless', description: '' }, { ifMatch: false })).title, 'Mine regardless');
    teamlog.close();
  });
});

describe('errors', () => {
  test('a refusal is a TeamlogError with the status, the code of the contract, the detail and the typed extensions', async () => {
    const me = await h.newUser();
    const teamlog = await signedIn(me);
    const project = await teamlog.projects.create({ name: `Errors ${uniqueWord()}` });
    const task = await teamlog.tasks.create({ project_id: project.id, title: 'Not started' });

    const transition = await teamlog.tasks.setStatus(task.id, 'DONE').catch((err: unknown) => err);
    assert.ok(transition instanceof TeamlogError);
    assert.equal(transition.status, 409);
    assert.equal(transition.code, 'INVALID_TRANSITION');
    assert.equal(transition.currentStatus, 'TODO');
    assert.deepEqual(transition.allowedTransitions, ['IN_PROGRESS', 'CANCELED']);
    assert.match(transition.detail, /./);
    assert.match(transition.requestId, /./);

    const invalid = await teamlog.tasks.create({ project_id: project.id, title: 'x'.repeat(201) }).catch((err: unknown) => err);
    assert.ok(invalid instanceof TeamlogError);
    assert.equal(invalid.code, 'VALIDATION_FAILED');
    assert.deepEqual(invalid.errors.map((e) => e.field), ['/title']);

    const hidden = await teamlog.projects.get(2 ** 40).catch((err: unknown) => err);
    assert.ok(hidden instanceof TeamlogError && hidden.status === 404 && hidden.code === 'NOT_FOUND');

    const notAdmin = await teamlog.auditLogs.list().page().catch((err: unknown) => err);
    assert.ok(notAdmin instanceof TeamlogError && notAdmin.status === 403 && notAdmin.code === 'FORBIDDEN');
    teamlog.close();
  });

  test('the last OWNER of a project cannot be deleted: LAST_OWNER names the projects', async () => {
    const admin = await signedIn({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
    const owner = await h.newUser();
    const project = await createProject(owner);
    const err = await admin.users.delete(owner.id).catch((e: unknown) => e);
    assert.ok(err instanceof TeamlogError);
    assert.equal(err.code, 'LAST_OWNER');
    assert.deepEqual(err.projects?.map((p) => p.id), [project.id]);
    admin.close();
  });
});

describe('resources', () => {
  test('users, profile, members, posts, messages and notifications, each through its own object', async () => {
    const admin = await signedIn({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
    const email = `${uniqueWord('client')}@test.local`;
    const created = await admin.users.create({ email, name: 'Client User', password: 'client-password-1' });
    assert.equal((await admin.users.get(created.id)).email, email);
    assert.equal((await admin.users.setRole(created.id, 'ADMIN')).role, 'ADMIN');
    assert.equal((await admin.users.setRole(created.id, 'USER')).role, 'USER');
    const found = await admin.users.list({ q: 'Client User' }).toArray();
    assert.ok(found.some((u) => u.id === created.id));

    const user = await signedIn({ email, password: 'client-password-1' });
    assert.equal((await user.profile.get()).id, created.id);
    assert.equal((await user.profile.update({ name: 'Renamed Client' })).name, 'Renamed Client');
    assert.ok((await user.profile.securityLog().toArray()).some((r) => r.action === 'LOGIN_SUCCESS'));

    const project = await admin.projects.create({ name: `Members ${uniqueWord()}` });
    assert.equal((await admin.projects.members.set(project.id, created.id, 'MEMBER')).role, 'MEMBER');
    assert.deepEqual((await admin.projects.members.list(project.id).toArray()).map((m) => m.user_id).sort(), [1, created.id].sort());
    const task = await admin.tasks.create({ project_id: project.id, title: 'For the member' });
    assert.equal((await admin.tasks.assign(task.id, created.id)).assignee_id, created.id);

    const [notification] = await user.notifications.list({ unread: true }).toArray();
    assert.equal(notification?.kind, 'task_assigned');
    assert.ok((await user.notifications.markRead(notification!.id)).read_at);
    await user.notifications.markAllRead();

    const post = await user.posts.create({ content: 'Hello from the client' });
    assert.equal((await admin.posts.like(post.id)).like_count, 1);
    assert.equal((await admin.posts.unlike(post.id)).like_count, 0);
    const message = await user.messages.create({ text: 'Hi', room: `project:${project.id}` });
    const [latest] = await user.messages.list({ room: `project:${project.id}` }).toArray(1);
    assert.equal(latest?.id, message.id);

    await admin.projects.members.remove(project.id, created.id);
    // The user renamed themself since the admin last saw them: the admin's version is stale.
    const stale = await admin.users.setActive(created.id, false).catch((err: unknown) => err);
    assert.ok(stale instanceof TeamlogError && stale.code === 'PRECONDITION_FAILED');
    assert.equal((await admin.users.get(created.id)).name, 'Renamed Client');
    await admin.users.setActive(created.id, false);
    await admin.users.setActive(created.id, true);
    admin.close();
    user.close();
  });

  test('the audit log: filters with q passed through, a record, verification, checkpoint, keys, proofs, the export and its URL', async () => {
    const admin = await signedIn({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
    const [newest] = await admin.auditLogs.list({ action: ['LOGIN_SUCCESS'], limit: 1 }).toArray(1);
    assert.equal(newest?.action, 'LOGIN_SUCCESS');
    assert.equal((await admin.auditLogs.get(newest!.id)).id, newest!.id);

    // q goes out as it is: the search syntax, or a 400 that names what is wrong with it.
    const url = admin.auditLogs.exportUrl({ q: 'action:LOGIN_SUCCESS actor:1', format: 'csv', action: ['LOGIN_SUCCESS', 'LOGOUT'] });
    assert.equal(url, `${h.server.url}/api/v1/audit-logs/export?q=action%3ALOGIN_SUCCESS+actor%3A1&format=csv&action=LOGIN_SUCCESS&action=LOGOUT`);
    // A service without q yet refuses the unknown parameter (400 VALIDATION_FAILED); with it, it searches.
    try {
      const searched = await admin.auditLogs.list({ q: 'action:LOGIN_SUCCESS' }).page();
      assert.ok(searched.data.every((r) => r.action === 'LOGIN_SUCCESS'));
    } catch (err) {
      assert.ok(err instanceof TeamlogError && err.code === 'VALIDATION_FAILED' && /\bq\b/.test(err.detail), String(err));
    }

    const report = await admin.auditLogs.verify();
    assert.equal(report.ok, true);
    const keys = await admin.auditLogs.publicKeys();
    assert.equal(keys[0]?.algorithm, 'Ed25519');

    // Sealing and signing happen after commit: wait for a checkpoint that covers the login.
    let checkpoint = await admin.auditLogs.latestCheckpoint().catch(() => undefined);
    for (let i = 0; i < 100 && (checkpoint === undefined || checkpoint.tree_size < 2); i++) {
      await new Promise((r) => setTimeout(r, 100));
      checkpoint = await admin.auditLogs.latestCheckpoint().catch(() => undefined);
    }
    assert.ok(checkpoint && checkpoint.tree_size >= 2);
    const note = await admin.auditLogs.checkpointNote();
    assert.match(note, new RegExp(`^[^\\n]+\\n${checkpoint.tree_size}\\n`));
    const sealed = (await admin.auditLogs.list().toArray()).at(-1)!;
    const proof = await admin.auditLogs.inclusionProof(sealed.id, { tree_size: checkpoint.tree_size });
    assert.equal(proof.id, sealed.id);
    const consistency = await admin.auditLogs.consistencyProof({ from: 1, to: checkpoint.tree_size });
    assert.equal(consistency.to, checkpoint.tree_size);
    const tile = await admin.auditLogs.tile(`entries/000.p/${Math.min(checkpoint.tree_size, 255)}`);
    assert.ok(tile instanceof Uint8Array && tile.length > 0);

    const exported = await admin.auditLogs.export({ format: 'ndjson', action: ['LOGIN_SUCCESS'] });
    const lines = (await exported.text()).trim().split('\n').map((l) => JSON.parse(l) as { type: string });
    assert.equal(lines.at(-1)?.type, 'checkpoint');
    assert.ok(lines.some((l) => l.type === 'record'));
    admin.close();
  });
});
