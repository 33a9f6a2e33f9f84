// Tasks (docs/api.md section 4 "Tasks"), the list: GET /tasks, its filters and its pages, and
// concurrent creation. The changes themselves: tasks-changes.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditRows, type Session } from './helpers/client.js';
import { addMember, allPages, createTask, eventRows, tasksInProject, team, uniqueWord, type PageBody, type TaskBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';

const h = useTestServer();

// ── little helpers ─────────────────────────────────────────────────────────────────────

async function list(who: Session, query: string): Promise<number[]> {
  const res = await who.client.get<PageBody<TaskBody>>(`/api/v1/tasks?${query}`, { token: who.token });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.next_cursor, null, `the filter ${query} should fit on one page`);
  return res.body.data.map((t) => t.id);
}

const desc = (...ids: number[]) => [...ids].sort((a, b) => b - a);

// ── listing ────────────────────────────────────────────────────────────────────────────

describe('listing tasks', () => {
  // Two projects: `viewer` belongs to the first only. Words make q searches unique to this suite.
  let viewer: Session;
  let other: Session;
  let p1: number;
  let p2: number;
  const w1 = uniqueWord('alpha');
  const w2 = uniqueWord('beta');
  const shared = uniqueWord('shared');
  const absent = uniqueWord('absent');
  const t: Record<string, TaskBody> = {};

  h.before(async () => {
    const first = await team(h, 1);
    const second = await team(h, 0);
    p1 = first.projectId;
    p2 = second.projectId;
    viewer = first.members[0]!;
    other = await h.newUser();
    await addMember(first.owner, p1, other.id);
    const o1 = first.owner;
    const move = async (task: TaskBody, ...steps: string[]) => {
      for (const s of steps) assert.equal((await o1.client.put(`/api/v1/tasks/${task.id}/status`, { status: s }, { token: o1.token })).status, 200);
    };
    t.a = await createTask(o1, p1, { title: `first ${w1}`, assignee_id: viewer.id });
    t.b = await createTask(o1, p1, { title: 'second', description: `the word ${w2} hides in here`, assignee_id: other.id });
    await move(t.b, 'IN_PROGRESS');
    t.c = await createTask(o1, p1, { title: `${w1} third`, assignee_id: viewer.id });
    await move(t.c, 'IN_PROGRESS');
    t.d = await createTask(o1, p1, { title: 'fourth' });
    await move(t.d, 'IN_PROGRESS', 'DONE');
    t.e = await createTask(o1, p1, { title: `fifth ${shared}`, assignee_id: other.id });
    t.u = await createTask(second.owner, p2, { title: `${shared} ${w1} elsewhere`, description: w2 });
    t.v = await createTask(second.owner, p2, { title: 'elsewhere too' });
    assert.equal((await second.owner.client.put(`/api/v1/tasks/${t.v.id}/status`, { status: 'IN_PROGRESS' }, { token: second.owner.token })).status, 200);
  });

  test("a user sees only their projects' tasks, newest first", async () => {
    const res = await viewer.client.get<PageBody<TaskBody>>('/api/v1/tasks', { token: viewer.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers.get('cache-control'), 'private, no-cache');
    assert.ok(res.headers.get('etag'));
    assert.deepEqual(res.body.data.map((x) => x.id), desc(t.a!.id, t.b!.id, t.c!.id, t.d!.id, t.e!.id));
    const created = res.body.data.map((x) => x.created_at);
    assert.deepEqual(created, [...created].sort().reverse(), 'newest first');
    assert.equal(res.body.data.find((x) => x.id === t.d!.id)!.status, 'DONE');
  });

  test('an ADMIN sees the tasks of every project', async () => {
    assert.deepEqual(await list(h.admin, `q=${shared}`), desc(t.e!.id, t.u!.id));
    assert.deepEqual(await list(h.admin, `project_id=${p2}`), desc(t.u!.id, t.v!.id));
    assert.deepEqual(await list(viewer, `q=${shared}`), [t.e!.id], 'a member of one project sees only its task');
  });

  test('filters by project_id', async () => {
    assert.deepEqual(await list(viewer, `project_id=${p1}`), desc(t.a!.id, t.b!.id, t.c!.id, t.d!.id, t.e!.id));
    assert.deepEqual(await list(viewer, `project_id=${p2}`), [], "another project's tasks stay hidden");
  });

  test('filters by assignee_id', async () => {
    assert.deepEqual(await list(viewer, `assignee_id=${viewer.id}`), desc(t.a!.id, t.c!.id));
    assert.deepEqual(await list(viewer, `assignee_id=${other.id}`), desc(t.b!.id, t.e!.id));
  });

  test('filters by status', async () => {
    assert.deepEqual(await list(viewer, 'status=IN_PROGRESS'), desc(t.b!.id, t.c!.id));
    assert.deepEqual(await list(viewer, 'status=DONE'), [t.d!.id]);
    assert.deepEqual(await list(viewer, 'status=CANCELED'), []);
  });

  test('q searches the full text of title and description', async () => {
    assert.deepEqual(await list(viewer, `q=${w2}`), [t.b!.id], 'a word of the description finds the task');
    assert.deepEqual(await list(viewer, `q=${w1}`), desc(t.a!.id, t.c!.id), 'a word of the title finds the task');
    assert.deepEqual(await list(viewer, `q=${w1.toUpperCase()}`), desc(t.a!.id, t.c!.id), 'case does not matter');
    assert.deepEqual(await list(viewer, `q=${absent}`), [], 'a word that is nowhere finds nothing');
    assert.deepEqual(await list(viewer, `q=${encodeURIComponent(`${w1} third`)}`), [t.c!.id], 'several words must all match');
  });

  test('an empty or blank q filters nothing out', async () => {
    const all = desc(t.a!.id, t.b!.id, t.c!.id, t.d!.id, t.e!.id);
    assert.deepEqual(await list(viewer, 'q='), all);
    assert.deepEqual(await list(viewer, 'q=%20%20'), all);
    assert.deepEqual(await list(viewer, `q=&project_id=${p1}&status=DONE`), [t.d!.id]);
  });

  test('q with search-operator characters is taken as plain text, never an error', async () => {
    for (const q of ['"unbalanced', '& | ! ( ) :*', `-${w1}`, `${w1} OR ${w2}`, "'; DROP TABLE tasks; --"]) {
      const res = await viewer.client.get(`/api/v1/tasks?q=${encodeURIComponent(q)}`, { token: viewer.token });
      assert.equal(res.status, 200, `${q}: ${res.text}`);
    }
    assert.deepEqual(await list(viewer, `q=${encodeURIComponent(`${w1} or ${w2}`)}`), desc(t.a!.id, t.b!.id, t.c!.id), 'websearch OR');
    assert.equal(await tasksInProject(h.server, p1), 5);
  });

  test('filters combine', async () => {
    assert.deepEqual(await list(viewer, `assignee_id=${viewer.id}&status=IN_PROGRESS`), [t.c!.id]);
    assert.deepEqual(await list(viewer, `project_id=${p1}&status=TODO&q=${w1}`), [t.a!.id]);
    assert.deepEqual(await list(viewer, `assignee_id=${other.id}&q=${shared}`), [t.e!.id]);
    assert.deepEqual(await list(viewer, `project_id=${p1}&assignee_id=${viewer.id}&status=TODO&q=${w1}`), [t.a!.id]);
    assert.deepEqual(await list(viewer, `project_id=${p1}&assignee_id=${viewer.id}&status=DONE&q=${w1}`), []);
    assert.deepEqual(await list(h.admin, `project_id=${p2}&status=IN_PROGRESS`), [t.v!.id]);
    assert.deepEqual(await list(h.admin, `q=${w2}&project_id=${p2}`), [t.u!.id]);
  });

  test('one filter combination asked again and again with other values answers each time for its values', async () => {
    // A list statement is prepared per combination of filters, with one generic plan for every
    // value (db/postgres.ts). Alternating values, again and again, must still filter by each.
    const expected: Record<string, number[]> = { TODO: desc(t.a!.id, t.e!.id), IN_PROGRESS: desc(t.b!.id, t.c!.id), DONE: [t.d!.id], CANCELED: [] };
    for (let round = 0; round < 3; round++) {
      for (const [status, ids] of Object.entries(expected)) assert.deepEqual(await list(viewer, `status=${status}`), ids, `${status}, round ${round + 1}`);
      assert.deepEqual(await list(viewer, `assignee_id=${round % 2 ? viewer.id : other.id}`), round % 2 ? desc(t.a!.id, t.c!.id) : desc(t.b!.id, t.e!.id));
    }
  });

  test('refuses malformed filters with 400', async () => {
    for (const query of ['status=ARCHIVED', 'project_id=abc', 'assignee_id=0', 'limit=0', 'limit=101', 'cursor=!!', 'colour=red']) {
      const res = await viewer.client.get(`/api/v1/tasks?${query}`, { token: viewer.token });
      assert.equal(res.status, 400, `${query}: ${res.text}`);
    }
  });
});

describe('the JSON of a page', () => {
  // A page's tasks and a single task are serialized by two schemas (Page(Task) and Task): the
  // two must answer the same value, fields in the same order, for any text a user may type.
  test('each listed task equals GET /tasks/:id of it: the same fields, values and order, any text', async () => {
    const { owner, projectId } = await team(h, 0);
    const texts = [
      'quotes " and \\ backslash / slash',
      'control \u0001\u0008\t\n\r\u001f and DEL \u007f',
      'unicode é 日本 🙂 \u2028 \u2029 and a lone surrogate-free astral 𝄞',
      '<script>alert(1)</script> & \'single\'',
    ];
    const created = [];
    for (const [i, text] of texts.entries()) created.push(await createTask(owner, projectId, { title: text, description: texts[(i + 1) % texts.length] }));
    const res = await owner.client.get<PageBody<TaskBody>>(`/api/v1/tasks?project_id=${projectId}&limit=${texts.length - 1}`, { token: owner.token });
    assert.equal(res.status, 200, res.text);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json; charset=utf-8$/);
    const next = await owner.client.get<PageBody<TaskBody>>(`/api/v1/tasks?project_id=${projectId}&limit=${texts.length - 1}&cursor=${res.body.next_cursor}`, { token: owner.token });
    const listed = [...res.body.data, ...next.body.data];
    assert.deepEqual(listed.map((t) => t.id), created.map((t) => t.id).reverse());
    for (const item of listed) {
      const one = await owner.client.get<TaskBody>(`/api/v1/tasks/${item.id}`, { token: owner.token });
      assert.equal(one.status, 200, one.text);
      assert.deepEqual(Object.keys(item), Object.keys(one.body), 'the same fields in the same order');
      assert.deepEqual(item, one.body);
    }
    assert.deepEqual(listed.map((t) => t.title), [...texts].reverse());
    assert.ok(listed.every((t) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(t.created_at)), 'ISO 8601 UTC with milliseconds');
  });
});

describe('paginating tasks', () => {
  test('pages stay stable while tasks are inserted between page requests: no duplicates, no gaps', async () => {
    const { owner, projectId, members: [member] } = await team(h, 1);
    const original: number[] = [];
    for (let i = 0; i < 7; i++) original.push((await createTask(owner, projectId, { title: `page ${i}` })).id);

    const seen: number[] = [];
    const inserted: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = `project_id=${projectId}&limit=3${cursor ? `&cursor=${cursor}` : ''}`;
      const res: { status: number; text: string; headers: Headers; body: PageBody<TaskBody> } =
        await member!.client.get<PageBody<TaskBody>>(`/api/v1/tasks?${query}`, { token: member!.token });
      assert.equal(res.status, 200, res.text);
      seen.push(...res.body.data.map((x) => x.id));
      cursor = res.body.next_cursor;
      if (cursor) {
        assert.match(res.headers.get('link') ?? '', /rel="next"/);
        assert.ok((res.headers.get('link') ?? '').includes(`cursor=${cursor}`));
      } else {
        assert.equal(res.headers.get('link'), null);
      }
      // Someone adds tasks while the reader is between pages.
      for (let i = 0; i < 2; i++) inserted.push((await createTask(owner, projectId, { title: `late ${pages}-${i}` })).id);
      pages++;
    } while (cursor !== null);

    assert.equal(pages, 3);
    assert.deepEqual(seen, desc(...original), 'exactly the tasks that existed when paging started, in order');
    const everything = await allPages<TaskBody>(member!, `/api/v1/tasks?project_id=${projectId}&limit=4`);
    assert.deepEqual(everything.map((x) => x.id), desc(...original, ...inserted));
  });
});

// ── concurrency ────────────────────────────────────────────────────────────────────────

describe('concurrent creation', () => {
  test('100 concurrent task creations by members of one project give 100 tasks and 100 CREATE_TASK records', { skip: needsPostgres }, async () => {
    const { owner, projectId, members } = await team(h, 4);
    const creators = [owner, ...members];
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => {
        const who = creators[i % creators.length]!;
        return who.client.post<TaskBody>('/api/v1/tasks', { project_id: projectId, title: `parallel ${i}` }, { token: who.token });
      }),
    );
    assert.deepEqual(results.map((r) => r.status), Array(100).fill(201), results.find((r) => r.status !== 201)?.text);
    const ids = new Set(results.map((r) => r.body.id));
    assert.equal(ids.size, 100);
    assert.equal(await tasksInProject(h.server, projectId), 100);
    const records = await auditRows(h.server, `action = 'CREATE_TASK' AND result = 'SUCCESS' AND (metadata->>'projectId')::bigint = $1`, [projectId]);
    assert.equal(records.length, 100);
    assert.deepEqual(new Set(records.map((r) => r.resource_id)), ids, 'one record per task');
    const events = await eventRows(h.server, `name = 'task-created' AND room = $1`, [`project:${projectId}`]);
    assert.equal(events.length, 100);
  });
});
