// Projects (docs/api.md section 4 "Projects"): creation, listing, reading with ETags, updates with
// If-Match, deletion with its tasks and messages, and the audit records each writes (section
// 5). The member roster: projects-members.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditRows } from './helpers/client.js';
import {
  addMember, allPages, countRows, createProject, createTask, postMessage, recordsOf, uniqueWord, type MemberBody, type PageBody, type ProjectBody,
} from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { projectChecks } from './helpers/projects.js';

const h = useTestServer();

const { projectRecords, projectRow, getProject } = projectChecks(h);

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
