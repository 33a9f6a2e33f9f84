// Projects and their members (API.md section 4 "Projects"): creation, listing, reading with
// ETags, updates with If-Match, deletion with its tasks and messages, the member roster and
// its rules (LAST_OWNER, self-removal, unassignment), the audit records each writes
// (section 5), and that a failing audit insert takes the whole change down with it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditRows, type Session } from './helpers/client.js';
import {
  addMember, allPages, countRows, createProject, createTask, postMessage, putMember, recordsOf, uniqueWord,
  type MemberBody, type PageBody, type Problem, type ProjectBody, type TaskBody,
} from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';

const h = useTestServer();

/** Audit records about one project, oldest first. */
const projectRecords = (projectId: number, action?: string) =>
  action === undefined
    ? auditRows(h.server, `resource_type = 'PROJECT' AND resource_id = $1`, [projectId])
    : auditRows(h.server, `resource_type = 'PROJECT' AND resource_id = $1 AND action = $2`, [projectId, action]);

async function projectRow(id: number) {
  const rows = await h.server.owner.query<{ name: string; description: string; version: number; updated_at: string }>(
    'SELECT name, description, version, updated_at FROM projects WHERE id = $1',
    [id],
  );
  return rows[0];
}

async function memberRoleOf(projectId: number, userId: number): Promise<string | undefined> {
  const rows = await h.server.owner.query<{ role: string }>('SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2', [projectId, userId]);
  return rows[0]?.role;
}

async function getProject(by: Session, id: number) {
  return by.client.get<ProjectBody & Problem>(`/api/v1/projects/${id}`, { token: by.token });
}

/**
 * A test-only trigger that makes the audit insert of one action fail, so that the change it
 * describes must roll back with it (API.md 5.2). Dropped afterwards whatever happens.
 */
async function withFailingAudit<T>(action: string, fn: () => Promise<T>): Promise<T> {
  const name = `test_fail_audit_${uniqueWord()}`;
  await h.server.owner.query(
    `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       IF NEW.action = '${action}' THEN RAISE EXCEPTION 'forced audit failure'; END IF;
       RETURN NEW;
     END $$`,
  );
  await h.server.owner.query(`CREATE TRIGGER ${name} BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION ${name}()`);
  try {
    return await fn();
  } finally {
    await h.server.owner.query(`DROP TRIGGER ${name} ON audit_log`);
    await h.server.owner.query(`DROP FUNCTION ${name}()`);
  }
}

describe('creating a project', () => {
  test('creates a project with 201, a Location and the creator as its only OWNER', async () => {
    const alice = await h.newUser();
    const name = `Apollo ${uniqueWord()}`;
    const res = await alice.client.post<ProjectBody>('/api/v1/projects', { name, description: 'To the moon' }, { token: alice.token });
    assert.equal(res.status, 201, res.text);
    const p = res.body;
    assert.equal(res.headers.get('location'), `/api/v1/projects/${p.id}`);
    assert.equal(p.name, name);
    assert.equal(p.description, 'To the moon');
    assert.equal(p.created_by, alice.id);
    assert.equal(p.member_count, 1);
    assert.match(p.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.deepEqual(Object.keys(p).sort(), ['created_at', 'created_by', 'description', 'id', 'member_count', 'name', 'updated_at']);

    const members = await alice.client.get<PageBody<MemberBody>>(`/api/v1/projects/${p.id}/members`, { token: alice.token });
    assert.equal(members.status, 200, members.text);
    assert.deepEqual(members.body.data.map((m) => [m.user_id, m.role]), [[alice.id, 'OWNER']]);
  });

  test('gives the description an empty default when none is sent', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice);
    assert.equal(p.description, '');
  });

  test('records exactly one CREATE_PROJECT with the name and no ADD_PROJECT_MEMBER for the owner', async () => {
    const alice = await h.newUser();
    const name = `Gemini ${uniqueWord()}`;
    const res = await alice.client.post<ProjectBody>('/api/v1/projects', { name }, { token: alice.token });
    assert.equal(res.status, 201, res.text);
    const records = await projectRecords(res.body.id);
    assert.equal(records.length, 1);
    const [r] = records;
    assert.equal(r!.action, 'CREATE_PROJECT');
    assert.equal(r!.result, 'SUCCESS');
    assert.equal(r!.actor_id, alice.id);
    assert.deepEqual(r!.metadata, { name });
    assert.equal(r!.request_id, res.headers.get('x-request-id'));
    // The request wrote nothing else (in particular no ADD_PROJECT_MEMBER for the creator).
    assert.deepEqual((await recordsOf(h.server, res)).map((x) => x.action), ['CREATE_PROJECT']);
  });

  test('rejects a blank name, a missing name and unknown fields with 400 and creates nothing', async () => {
    const alice = await h.newUser();
    for (const body of [{ name: '   ' }, {}, { name: 'ok', id: 5 }, { name: 'ok', created_by: 1 }, { name: 'x'.repeat(201) }]) {
      const res = await alice.client.post('/api/v1/projects', body, { token: alice.token });
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.code, 'VALIDATION_FAILED');
      assert.equal((await recordsOf(h.server, res)).length, 0);
    }
    assert.equal(await countRows(h.server, 'projects WHERE created_by = $1', [alice.id]), 0);
  });

  test('replays a retried creation with the same Idempotency-Key and creates one project', async () => {
    const alice = await h.newUser();
    const name = `Retry ${uniqueWord()}`;
    const headers = { 'idempotency-key': `key-${uniqueWord()}` };
    const first = await alice.client.post<ProjectBody>('/api/v1/projects', { name }, { token: alice.token, headers });
    const second = await alice.client.post<ProjectBody>('/api/v1/projects', { name }, { token: alice.token, headers });
    assert.equal(first.status, 201, first.text);
    assert.equal(second.status, 201, second.text);
    assert.equal(second.body.id, first.body.id);
    assert.equal(await countRows(h.server, 'projects WHERE name = $1', [name]), 1);
    assert.equal((await projectRecords(first.body.id, 'CREATE_PROJECT')).length, 1);
  });
});

describe('listing projects', () => {
  test('lists only the projects the caller belongs to, newest first', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const mine1 = await createProject(alice);
    const theirs = await createProject(bob);
    const mine2 = await createProject(alice);
    const shared = await createProject(bob);
    await addMember(bob, shared.id, alice.id);
    const mine3 = await createProject(alice);

    const list = await allPages<ProjectBody>(alice, '/api/v1/projects?limit=100');
    assert.deepEqual(list.map((p) => p.id), [mine3.id, shared.id, mine2.id, mine1.id]);
    assert.ok(!list.some((p) => p.id === theirs.id));
    assert.equal(list.find((p) => p.id === shared.id)!.member_count, 2);
  });

  test('pages the list with limit, next_cursor and a Link header, without repeats or gaps', async () => {
    const alice = await h.newUser();
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push((await createProject(alice)).id);
    const expected = ids.reverse();

    const seen: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = cursor ? `?limit=2&cursor=${cursor}` : '?limit=2';
      const res = await alice.client.get<PageBody<ProjectBody>>(`/api/v1/projects${q}`, { token: alice.token });
      assert.equal(res.status, 200, res.text);
      assert.ok(res.body.data.length <= 2);
      seen.push(...res.body.data.map((p) => p.id));
      cursor = res.body.next_cursor;
      if (cursor) assert.match(res.headers.get('link') ?? '', /rel="next"/);
      else assert.equal(res.headers.get('link'), null);
      // A project created mid-way does not shift the following pages.
      if (pages === 0) await createProject(alice);
      pages++;
    } while (cursor);
    assert.equal(pages, 3);
    assert.deepEqual(seen, expected);
  });

  test('shows an ADMIN every project, including ones they do not belong to', async () => {
    const bob = await h.newUser();
    const p = await createProject(bob);
    const list = await allPages<ProjectBody>(h.admin, '/api/v1/projects?limit=100');
    assert.ok(list.some((x) => x.id === p.id));
    const ids = list.map((x) => x.id);
    assert.deepEqual(ids, [...ids].sort((a, b) => b - a));
  });

  test('rejects a limit outside 1..100 and a forged cursor with 400', async () => {
    const alice = await h.newUser();
    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'cursor=not-a-cursor', 'other=1']) {
      const res = await alice.client.get(`/api/v1/projects?${q}`, { token: alice.token });
      assert.equal(res.status, 400, `${q}: ${res.text}`);
    }
  });
});

describe('reading a project', () => {
  test('serves a member the project with a strong ETag and answers a matching If-None-Match with 304', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    const res = await getProject(bob, p.id);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.member_count, 2);
    assert.equal(res.headers.get('cache-control'), 'private, no-cache');
    const etag = res.headers.get('etag');
    assert.ok(etag && !etag.startsWith('W/'), `strong ETag expected, got ${etag}`);

    const again = await bob.client.get(`/api/v1/projects/${p.id}`, { token: bob.token, headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    assert.equal(again.text, '');
  });

  test('changes the ETag when a member is added (a sub-resource change)', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    const before = (await getProject(alice, p.id)).headers.get('etag');
    await addMember(alice, p.id, bob.id);
    const res = await alice.client.get(`/api/v1/projects/${p.id}`, { token: alice.token, headers: { 'if-none-match': before! } });
    assert.equal(res.status, 200);
    assert.notEqual(res.headers.get('etag'), before);
  });

  test('hides a project from a non-member with 404 but shows it to an ADMIN', async () => {
    const alice = await h.newUser();
    const eve = await h.newUser();
    const p = await createProject(alice);
    const hidden = await getProject(eve, p.id);
    assert.equal(hidden.status, 404);
    assert.equal(hidden.body.code, 'NOT_FOUND');
    assert.equal((await getProject(h.admin, p.id)).status, 200);
  });

  test('answers 404 for a project that does not exist and 400 for an id that is not one', async () => {
    const alice = await h.newUser();
    assert.equal((await alice.client.get('/api/v1/projects/999999999', { token: alice.token })).status, 404);
    for (const id of ['abc', '0', '-1', '99999999999999999999', '1.5']) {
      const res = await alice.client.get(`/api/v1/projects/${id}`, { token: alice.token });
      assert.equal(res.status, 400, `${id}: ${res.text}`);
    }
  });
});

describe('updating a project', () => {
  test('lets the OWNER change name and description and gives the new version a new ETag', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice, { description: 'old' });
    const before = await getProject(alice, p.id);
    const res = await alice.client.put<ProjectBody>(`/api/v1/projects/${p.id}`, { name: 'Renamed', description: 'new' }, { token: alice.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.name, 'Renamed');
    assert.equal(res.body.description, 'new');
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.notEqual(res.headers.get('etag'), before.headers.get('etag'));
    assert.ok(Date.parse(res.body.updated_at) >= Date.parse(before.body.updated_at));
    const row = await projectRow(p.id);
    assert.equal(row!.name, 'Renamed');
    assert.equal(row!.description, 'new');
    // Updating a project is not an audited action.
    assert.equal((await recordsOf(h.server, res)).length, 0);
  });

  test('keeps the fields a partial update leaves out', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice, { description: 'kept' });
    const res = await alice.client.put<ProjectBody>(`/api/v1/projects/${p.id}`, { name: 'Only the name' }, { token: alice.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.description, 'kept');
  });

  test('lets an ADMIN who is not a member update the project', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice);
    const res = await h.admin.client.put<ProjectBody>(`/api/v1/projects/${p.id}`, { name: 'By the admin' }, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
    assert.equal((await projectRow(p.id))!.name, 'By the admin');
  });

  test('refuses a MEMBER with 403 and a non-member with 404, leaving the project unchanged', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const eve = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    const before = await projectRow(p.id);
    const byMember = await bob.client.put(`/api/v1/projects/${p.id}`, { name: 'Hijacked' }, { token: bob.token });
    assert.equal(byMember.status, 403);
    assert.equal(byMember.body.code, 'FORBIDDEN');
    const byStranger = await eve.client.put(`/api/v1/projects/${p.id}`, { name: 'Hijacked' }, { token: eve.token });
    assert.equal(byStranger.status, 404);
    assert.deepEqual(await projectRow(p.id), before);
    // Not an audited action: its refusals write no DENIED record.
    assert.equal((await recordsOf(h.server, byMember)).length, 0);
    assert.equal((await recordsOf(h.server, byStranger)).length, 0);
  });

  test('refuses a stale If-Match with 412 and accepts the current one', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice);
    const stale = (await getProject(alice, p.id)).headers.get('etag')!;
    const first = await alice.client.put(`/api/v1/projects/${p.id}`, { name: 'First' }, { token: alice.token, headers: { 'if-match': stale } });
    assert.equal(first.status, 200, first.text);
    const second = await alice.client.put(`/api/v1/projects/${p.id}`, { name: 'Second' }, { token: alice.token, headers: { 'if-match': stale } });
    assert.equal(second.status, 412);
    assert.equal(second.body.code, 'PRECONDITION_FAILED');
    assert.equal((await projectRow(p.id))!.name, 'First');
    const current = first.headers.get('etag')!;
    const third = await alice.client.put(`/api/v1/projects/${p.id}`, { name: 'Third' }, { token: alice.token, headers: { 'if-match': current } });
    assert.equal(third.status, 200, third.text);
  });

  test('answers an update to the values it already has with 200 and changes nothing', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice, { description: 'same' });
    const before = await projectRow(p.id);
    const etag = (await getProject(alice, p.id)).headers.get('etag');
    const res = await alice.client.put<ProjectBody>(`/api/v1/projects/${p.id}`, { name: p.name, description: 'same' }, { token: alice.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.updated_at, p.updated_at);
    assert.equal(res.headers.get('etag'), etag);
    assert.deepEqual(await projectRow(p.id), before);
  });

  test('rejects an empty body and over-long values with 400', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice);
    for (const body of [{}, { name: '' }, { description: 'x'.repeat(10001) }, { name: 'ok', member_count: 3 }]) {
      const res = await alice.client.put(`/api/v1/projects/${p.id}`, body, { token: alice.token });
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
    }
  });
});

describe('deleting a project', () => {
  test('deletes the project with its tasks and messages and records one DELETE_PROJECT with name and taskCount', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    const tasks = [await createTask(alice, p.id), await createTask(bob, p.id, { assignee_id: bob.id }), await createTask(alice, p.id)];
    await postMessage(alice, `project:${p.id}`);
    await postMessage(bob, `project:${p.id}`);

    const res = await alice.client.delete(`/api/v1/projects/${p.id}`, { token: alice.token });
    assert.equal(res.status, 204, res.text);
    assert.equal(res.text, '');

    assert.equal((await getProject(alice, p.id)).status, 404);
    assert.equal(await countRows(h.server, 'projects WHERE id = $1', [p.id]), 0);
    assert.equal(await countRows(h.server, 'tasks WHERE project_id = $1', [p.id]), 0);
    assert.equal(await countRows(h.server, 'messages WHERE room = $1', [`project:${p.id}`]), 0);
    assert.equal(await countRows(h.server, 'project_members WHERE project_id = $1', [p.id]), 0);
    assert.equal((await alice.client.get(`/api/v1/tasks/${tasks[0]!.id}`, { token: alice.token })).status, 404);

    const records = await recordsOf(h.server, res);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.action, 'DELETE_PROJECT');
    assert.equal(records[0]!.result, 'SUCCESS');
    assert.equal(records[0]!.actor_id, alice.id);
    assert.equal(records[0]!.resource_type, 'PROJECT');
    assert.equal(records[0]!.resource_id, p.id);
    assert.deepEqual(records[0]!.metadata, { name: p.name, taskCount: 3 });
    const taskIds = tasks.map((t) => t.id);
    const deleteTasks = await auditRows(h.server, `action = 'DELETE_TASK' AND resource_id = ANY($1::bigint[])`, [taskIds]);
    assert.equal(deleteTasks.length, 0, 'a cascade writes no DELETE_TASK');
  });

  test('lets an ADMIN delete a project and records taskCount 0 for an empty one', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice);
    const res = await h.admin.client.delete(`/api/v1/projects/${p.id}`, { token: h.admin.token });
    assert.equal(res.status, 204, res.text);
    const records = await recordsOf(h.server, res);
    assert.deepEqual(records.map((r) => [r.action, r.actor_id, r.metadata]), [['DELETE_PROJECT', h.admin.id, { name: p.name, taskCount: 0 }]]);
  });

  test('refuses a MEMBER with 403 and a DENIED record, and keeps the project', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    const res = await bob.client.delete(`/api/v1/projects/${p.id}`, { token: bob.token });
    assert.equal(res.status, 403);
    const records = await recordsOf(h.server, res);
    assert.deepEqual(records.map((r) => [r.action, r.result, r.resource_type, r.resource_id, r.actor_id]), [['DELETE_PROJECT', 'DENIED', 'PROJECT', p.id, bob.id]]);
    assert.equal(await countRows(h.server, 'projects WHERE id = $1', [p.id]), 1);
  });

  test('answers 404 for a project that does not exist and records nothing', async () => {
    const alice = await h.newUser();
    const res = await alice.client.delete('/api/v1/projects/987654321', { token: alice.token });
    assert.equal(res.status, 404);
    assert.equal((await recordsOf(h.server, res)).length, 0);
  });
});

describe('project members', () => {
  test('adds a member with 201, one ADD_PROJECT_MEMBER record and a project_member_added notification', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    const res = await putMember(alice, p.id, bob.id, 'MEMBER');
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.user_id, bob.id);
    assert.equal(res.body.role, 'MEMBER');
    assert.match(res.body.added_at, /Z$/);
    assert.equal(res.headers.get('location'), `/api/v1/projects/${p.id}/members/${bob.id}`);
    // The Location can be read back.
    const located = await bob.client.get(res.headers.get('location')!, { token: bob.token });
    assert.equal(located.status, 200, located.text);
    assert.deepEqual(located.body, res.body);
    assert.equal(await memberRoleOf(p.id, bob.id), 'MEMBER');
    assert.equal((await getProject(alice, p.id)).body.member_count, 2);

    const records = await recordsOf(h.server, res);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.action, 'ADD_PROJECT_MEMBER');
    assert.equal(records[0]!.result, 'SUCCESS');
    assert.equal(records[0]!.actor_id, alice.id);
    assert.equal(records[0]!.resource_type, 'PROJECT');
    assert.equal(records[0]!.resource_id, p.id);
    assert.deepEqual(records[0]!.metadata, { userId: bob.id, role: 'MEMBER' });

    const notes = await bob.client.get<PageBody<{ kind: string; payload: Record<string, unknown>; read_at: string | null }>>('/api/v1/notifications', { token: bob.token });
    assert.equal(notes.status, 200, notes.text);
    const added = notes.body.data.filter((n) => n.kind === 'project_member_added');
    assert.equal(added.length, 1);
    assert.deepEqual(added[0]!.payload, { project_id: p.id, project_name: p.name, role: 'MEMBER', actor_id: alice.id });
    assert.equal(added[0]!.read_at, null);
    // The notification has its real-time event beside it.
    assert.equal(await countRows(h.server, `outbox_events WHERE room = $1 AND name = 'new-notification'`, [`user:${bob.id}`]), 1);
    // The actor is not notified of their own action.
    assert.equal(await countRows(h.server, 'notifications WHERE user_id = $1', [alice.id]), 0);
  });

  test('adds an OWNER with the role in the record and the notification', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    const res = await putMember(alice, p.id, bob.id, 'OWNER');
    assert.equal(res.status, 201, res.text);
    assert.deepEqual((await recordsOf(h.server, res))[0]!.metadata, { userId: bob.id, role: 'OWNER' });
    const rows = await h.server.owner.query<{ payload: Record<string, unknown> }>(`SELECT payload FROM notifications WHERE user_id = $1 AND kind = 'project_member_added'`, [bob.id]);
    assert.deepEqual(rows.map((r) => r.payload.role), ['OWNER']);
  });

  test('does not notify an ADMIN who adds themself', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice);
    const res = await putMember(h.admin, p.id, h.admin.id, 'MEMBER');
    assert.equal(res.status, 201, res.text);
    const notes = await h.server.owner.query<{ payload: { project_id: number } }>(`SELECT payload FROM notifications WHERE user_id = $1 AND kind = 'project_member_added'`, [h.admin.id]);
    assert.ok(!notes.some((n) => n.payload.project_id === p.id));
  });

  test('changes a role with 200 and one CHANGE_PROJECT_MEMBER_ROLE record with old and new role', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    const notesBefore = await countRows(h.server, 'notifications WHERE user_id = $1', [bob.id]);
    const res = await putMember(alice, p.id, bob.id, 'OWNER');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.role, 'OWNER');
    assert.equal(res.headers.get('location'), null);
    assert.equal(await memberRoleOf(p.id, bob.id), 'OWNER');
    const records = await recordsOf(h.server, res);
    assert.deepEqual(records.map((r) => [r.action, r.result, r.actor_id, r.resource_type, r.resource_id]), [['CHANGE_PROJECT_MEMBER_ROLE', 'SUCCESS', alice.id, 'PROJECT', p.id]]);
    assert.deepEqual(records[0]!.metadata, { userId: bob.id, oldRole: 'MEMBER', newRole: 'OWNER' });
    assert.equal(await countRows(h.server, 'notifications WHERE user_id = $1', [bob.id]), notesBefore);

    // And back down, now that there is another OWNER.
    const down = await putMember(bob, p.id, alice.id, 'MEMBER');
    assert.equal(down.status, 200, down.text);
    assert.deepEqual((await recordsOf(h.server, down))[0]!.metadata, { userId: alice.id, oldRole: 'OWNER', newRole: 'MEMBER' });
  });

  test('answers the role a member already has with 200 and writes no record, notification or version', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    const before = await projectRow(p.id);
    const notesBefore = await countRows(h.server, 'notifications WHERE user_id = $1', [bob.id]);
    const eventsBefore = await countRows(h.server, 'outbox_events WHERE room = $1', [`user:${bob.id}`]);
    const res = await putMember(alice, p.id, bob.id, 'MEMBER');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.role, 'MEMBER');
    assert.equal((await recordsOf(h.server, res)).length, 0);
    assert.deepEqual(await projectRow(p.id), before);
    assert.equal(await countRows(h.server, 'notifications WHERE user_id = $1', [bob.id]), notesBefore);
    assert.equal(await countRows(h.server, 'outbox_events WHERE room = $1', [`user:${bob.id}`]), eventsBefore);
  });

  test('refuses to demote or remove the last OWNER with 409 LAST_OWNER and writes no record', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);

    const demote = await putMember(alice, p.id, alice.id, 'MEMBER');
    assert.equal(demote.status, 409, demote.text);
    assert.equal(demote.body.code, 'LAST_OWNER');
    const removeSelf = await alice.client.delete(`/api/v1/projects/${p.id}/members/${alice.id}`, { token: alice.token });
    assert.equal(removeSelf.status, 409, removeSelf.text);
    assert.equal(removeSelf.body.code, 'LAST_OWNER');
    const byAdmin = await h.admin.client.delete(`/api/v1/projects/${p.id}/members/${alice.id}`, { token: h.admin.token });
    assert.equal(byAdmin.status, 409, byAdmin.text);
    const demoteByAdmin = await putMember(h.admin, p.id, alice.id, 'MEMBER');
    assert.equal(demoteByAdmin.status, 409, demoteByAdmin.text);
    for (const res of [demote, removeSelf, byAdmin, demoteByAdmin]) assert.equal((await recordsOf(h.server, res)).length, 0);
    assert.equal(await memberRoleOf(p.id, alice.id), 'OWNER');

    // With a second OWNER, the first may step down.
    const promoted = await putMember(alice, p.id, bob.id, 'OWNER');
    assert.equal(promoted.status, 200, promoted.text);
    const ok = await putMember(alice, p.id, alice.id, 'MEMBER');
    assert.equal(ok.status, 200, ok.text);
    assert.equal(await memberRoleOf(p.id, alice.id), 'MEMBER');
  });

  test('lets only one of two OWNERs leave when both try at the same time', { skip: needsPostgres }, async () => {
    for (let round = 0; round < 5; round++) {
      const alice = await h.newUser();
      const bob = await h.newUser();
      const p = await createProject(alice);
      await addMember(alice, p.id, bob.id, 'OWNER');
      const [a, b] = await Promise.all([
        alice.client.delete(`/api/v1/projects/${p.id}/members/${alice.id}`, { token: alice.token }),
        bob.client.delete(`/api/v1/projects/${p.id}/members/${bob.id}`, { token: bob.token }),
      ]);
      assert.deepEqual([a.status, b.status].sort(), [204, 409], `${a.text} ${b.text}`);
      assert.equal(await countRows(h.server, `project_members WHERE project_id = $1 AND role = 'OWNER'`, [p.id]), 1);
      assert.equal((await projectRecords(p.id, 'REMOVE_PROJECT_MEMBER')).length, 1);
    }
  });

  test('adds a member once when the same addition arrives twice at the same time', { skip: needsPostgres }, async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    const results = await Promise.all([putMember(alice, p.id, bob.id, 'MEMBER'), putMember(alice, p.id, bob.id, 'MEMBER'), putMember(alice, p.id, bob.id, 'MEMBER')]);
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 200, 201], results.map((r) => r.text).join(' '));
    assert.equal((await projectRecords(p.id, 'ADD_PROJECT_MEMBER')).length, 1);
    assert.equal(await countRows(h.server, `notifications WHERE user_id = $1 AND kind = 'project_member_added'`, [bob.id]), 1);
  });

  test('lets a member remove themself and records REMOVE_PROJECT_MEMBER with their role', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    const res = await bob.client.delete(`/api/v1/projects/${p.id}/members/${bob.id}`, { token: bob.token });
    assert.equal(res.status, 204, res.text);
    assert.equal(await memberRoleOf(p.id, bob.id), undefined);
    const records = await recordsOf(h.server, res);
    assert.deepEqual(records.map((r) => [r.action, r.result, r.actor_id, r.resource_type, r.resource_id]), [['REMOVE_PROJECT_MEMBER', 'SUCCESS', bob.id, 'PROJECT', p.id]]);
    assert.deepEqual(records[0]!.metadata, { userId: bob.id, role: 'MEMBER' });
    // Out of the project, out of sight.
    assert.equal((await getProject(bob, p.id)).status, 404);
    assert.equal((await getProject(alice, p.id)).body.member_count, 1);
  });

  test('unassigns a removed member\u2019s tasks in that project and keeps their tasks elsewhere', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    const q = await createProject(alice);
    await addMember(alice, p.id, bob.id);
    await addMember(alice, q.id, bob.id);
    const here1 = await createTask(alice, p.id, { assignee_id: bob.id });
    const here2 = await createTask(bob, p.id, { assignee_id: bob.id });
    const hereOther = await createTask(alice, p.id, { assignee_id: alice.id });
    const elsewhere = await createTask(alice, q.id, { assignee_id: bob.id });

    const res = await alice.client.delete(`/api/v1/projects/${p.id}/members/${bob.id}`, { token: alice.token });
    assert.equal(res.status, 204, res.text);
    const assignee = async (t: TaskBody) => (await alice.client.get<TaskBody>(`/api/v1/tasks/${t.id}`, { token: alice.token })).body.assignee_id;
    assert.equal(await assignee(here1), null);
    assert.equal(await assignee(here2), null);
    assert.equal(await assignee(hereOther), alice.id);
    assert.equal(await assignee(elsewhere), bob.id);
    // The unassignment is part of the removal, not an ASSIGN_TASK of its own.
    const records = await recordsOf(h.server, res);
    assert.deepEqual(records.map((r) => r.action), ['REMOVE_PROJECT_MEMBER']);
    assert.deepEqual(records[0]!.metadata, { userId: bob.id, role: 'MEMBER' });
  });

  test('lets an OWNER remove another OWNER while one remains', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    await addMember(alice, p.id, bob.id, 'OWNER');
    const res = await bob.client.delete(`/api/v1/projects/${p.id}/members/${alice.id}`, { token: bob.token });
    assert.equal(res.status, 204, res.text);
    assert.deepEqual((await recordsOf(h.server, res))[0]!.metadata, { userId: alice.id, role: 'OWNER' });
  });

  test('lists members as {user_id, role, added_at}, paginated by user id', async () => {
    const alice = await h.newUser();
    const p = await createProject(alice);
    const others: Session[] = [];
    for (let i = 0; i < 4; i++) others.push(await h.newUser());
    for (const o of others) await addMember(alice, p.id, o.id);

    const seen: MemberBody[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = cursor ? `?limit=2&cursor=${cursor}` : '?limit=2';
      const res = await others[0]!.client.get<PageBody<MemberBody>>(`/api/v1/projects/${p.id}/members${q}`, { token: others[0]!.token });
      assert.equal(res.status, 200, res.text);
      for (const m of res.body.data) assert.deepEqual(Object.keys(m).sort(), ['added_at', 'role', 'user_id']);
      seen.push(...res.body.data);
      cursor = res.body.next_cursor;
      pages++;
    } while (cursor);
    assert.equal(pages, 3);
    const expected = [alice.id, ...others.map((o) => o.id)].sort((a, b) => a - b);
    assert.deepEqual(seen.map((m) => m.user_id), expected);
    assert.equal(seen.find((m) => m.user_id === alice.id)!.role, 'OWNER');
    assert.ok(seen.filter((m) => m.user_id !== alice.id).every((m) => m.role === 'MEMBER'));
  });

  test('answers 404 for an unknown user, and for removing someone who is not a member', async () => {
    const alice = await h.newUser();
    const eve = await h.newUser();
    const p = await createProject(alice);
    const add = await putMember(alice, p.id, 987654321, 'MEMBER');
    assert.equal(add.status, 404, add.text);
    assert.equal(await countRows(h.server, 'project_members WHERE project_id = $1', [p.id]), 1);
    const remove = await alice.client.delete(`/api/v1/projects/${p.id}/members/${eve.id}`, { token: alice.token });
    assert.equal(remove.status, 404, remove.text);
    const removeUnknown = await alice.client.delete(`/api/v1/projects/${p.id}/members/987654321`, { token: alice.token });
    assert.equal(removeUnknown.status, 404, removeUnknown.text);
    for (const res of [add, remove, removeUnknown]) assert.equal((await recordsOf(h.server, res)).length, 0);
  });

  test('rejects a role outside OWNER and MEMBER, and extra fields, with 400', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    for (const body of [{ role: 'ADMIN' }, { role: 'owner' }, {}, { role: 'MEMBER', user_id: 1 }]) {
      const res = await alice.client.put(`/api/v1/projects/${p.id}/members/${bob.id}`, body, { token: alice.token });
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal((await recordsOf(h.server, res)).length, 0);
    }
    assert.equal(await memberRoleOf(p.id, bob.id), undefined);
  });

  test('refuses a member change with a stale If-Match with 412', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const carol = await h.newUser();
    const p = await createProject(alice);
    const stale = (await getProject(alice, p.id)).headers.get('etag')!;
    await addMember(alice, p.id, bob.id);
    const res = await putMember(alice, p.id, carol.id, 'MEMBER', { 'if-match': stale });
    assert.equal(res.status, 412, res.text);
    assert.equal(await memberRoleOf(p.id, carol.id), undefined);
    assert.equal((await recordsOf(h.server, res)).length, 0);
    const current = (await getProject(alice, p.id)).headers.get('etag')!;
    const ok = await putMember(alice, p.id, carol.id, 'MEMBER', { 'if-match': current });
    assert.equal(ok.status, 201, ok.text);
  });
});

describe('a failing audit insert', () => {
  test('leaves no membership, notification or event behind when ADD_PROJECT_MEMBER cannot be recorded', async () => {
    const alice = await h.newUser();
    const bob = await h.newUser();
    const p = await createProject(alice);
    const before = await projectRow(p.id);
    const res = await withFailingAudit('ADD_PROJECT_MEMBER', () => putMember(alice, p.id, bob.id, 'MEMBER'));
    assert.equal(res.status, 500, res.text);
    assert.equal(res.body.code, 'INTERNAL');
    assert.ok(!res.text.includes('forced audit failure'), 'a 500 body hides the database error');

    assert.equal(await memberRoleOf(p.id, bob.id), undefined);
    assert.equal(await countRows(h.server, 'notifications WHERE user_id = $1', [bob.id]), 0);
    assert.equal(await countRows(h.server, 'outbox_events WHERE room = $1', [`user:${bob.id}`]), 0);
    assert.equal(await countRows(h.server, `outbox_events WHERE payload->>'project_id' = $1`, [String(p.id)]), 0);
    assert.deepEqual(await projectRow(p.id), before);
    assert.equal((await recordsOf(h.server, res)).length, 0);

    // With the trigger gone, the same request works.
    const retry = await putMember(alice, p.id, bob.id, 'MEMBER');
    assert.equal(retry.status, 201, retry.text);
  });

  test('leaves no project and no membership behind when CREATE_PROJECT cannot be recorded', async () => {
    const alice = await h.newUser();
    const name = `Doomed ${uniqueWord()}`;
    const res = await withFailingAudit('CREATE_PROJECT', () => alice.client.post('/api/v1/projects', { name }, { token: alice.token }));
    assert.equal(res.status, 500, res.text);
    assert.equal(await countRows(h.server, 'projects WHERE name = $1', [name]), 0);
    assert.equal(await countRows(h.server, 'project_members WHERE user_id = $1', [alice.id]), 0);
    assert.equal((await recordsOf(h.server, res)).length, 0);
    const list = await alice.client.get<PageBody<ProjectBody>>('/api/v1/projects', { token: alice.token });
    assert.deepEqual(list.body.data, []);
  });
});
