// The access matrix of the team domain (docs/api.md sections 3, 4 and 5.3), one row per route and
// caller: someone from another project gets 404 for a project's resources (no existence
// leak); a MEMBER gets 403 where only an OWNER may act; an ADMIN is allowed. A refused
// audited action writes exactly one DENIED record naming the resource, whether answered 403
// or 404; a refused non-audited action, a 400 and a 409 write none; and no refusal changes
// anything.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditRows, type Response, type Session } from './helpers/client.js';
import {
  addMember, createProject, createTask, postMessage, recordsOf,
  type PageBody, type ProjectBody, type TaskBody,
} from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();
const who = {} as Record<Who, Session>;
/** A user who belongs to no project of the world: the target of member additions. */
let spare: Session;

type Who = 'owner' | 'member' | 'outsider' | 'admin';

h.before(async () => {
  who.admin = h.admin;
  who.owner = await h.newUser();
  who.member = await h.newUser();
  who.outsider = await h.newUser();
  spare = await h.newUser();
  // The outsider belongs to a project of their own: a user "from another project".
  await createProject(who.outsider);
});

/** A fresh project for each row, so that rows never depend on each other. */
interface World {
  project: ProjectBody;
  /** Created by the OWNER. */
  ownerTask: TaskBody;
  /** Created by the MEMBER. */
  memberTask: TaskBody;
  message: { id: number };
  /** A feed post by the OWNER. */
  post: { id: number };
  /** The MEMBER's project_member_added notification. */
  note: { id: number };
}

async function makeWorld(): Promise<World> {
  const { owner, member } = who;
  const project = await createProject(owner);
  await addMember(owner, project.id, member.id);
  const ownerTask = await createTask(owner, project.id);
  const memberTask = await createTask(member, project.id);
  const message = await postMessage(owner, `project:${project.id}`);
  const post = await owner.client.post('/api/v1/posts', { content: 'hello team' }, { token: owner.token });
  assert.equal(post.status, 201, post.text);
  const notes = await member.client.get<PageBody<{ id: number; payload: { project_id: number } }>>('/api/v1/notifications', { token: member.token });
  const note = notes.body.data.find((n) => n.payload.project_id === project.id);
  assert.ok(note, 'the member was notified of being added');
  return { project, ownerTask, memberTask, message, post: post.body, note };
}

/** Everything a refusal must leave as it was. */
async function snapshot(w: World) {
  const q = (sql: string, params: unknown[]) => h.server.owner.query(sql, params);
  return {
    project: await q('SELECT * FROM projects WHERE id = $1', [w.project.id]),
    members: await q('SELECT * FROM project_members WHERE project_id = $1 ORDER BY user_id', [w.project.id]),
    tasks: await q('SELECT id, title, description, status, assignee_id, version, updated_at FROM tasks WHERE project_id = $1 ORDER BY id', [w.project.id]),
    messages: await q('SELECT id, text FROM messages WHERE room = $1 ORDER BY id', [`project:${w.project.id}`]),
    post: await q('SELECT * FROM posts WHERE id = $1', [w.post.id]),
    likes: await q('SELECT * FROM post_likes WHERE post_id = $1', [w.post.id]),
    note: await q('SELECT * FROM notifications WHERE id = $1', [w.note.id]),
  };
}

type ResourceType = 'PROJECT' | 'TASK';

interface Row {
  route: string;
  as: Who;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: (w: World) => string;
  body?: (w: World) => unknown;
  status: number;
  /** A refused audited action: the one DENIED record it must write. */
  denied?: { action: string; type: ResourceType; id: (w: World) => number };
  /** An allowed audited action: the one SUCCESS record it must write. */
  audited?: string;
  /** Further checks of the response. */
  expect?: (w: World, res: Response) => void | Promise<void>;
  /** Shown in the test name. */
  note?: string;
}

const P = (w: World) => w.project.id;
const T = (w: World) => w.ownerTask.id;
const hasId = (id: number) => (rows: Array<{ id: number }>) => rows.some((r) => r.id === id);

const rows: Row[] = [
  // ── projects ──
  { route: 'GET /projects', as: 'outsider', method: 'GET', path: () => '/api/v1/projects?limit=100', status: 200, note: 'without the project',
    expect: (w, res) => assert.ok(!hasId(P(w))(res.body.data)) },
  { route: 'GET /projects', as: 'member', method: 'GET', path: () => '/api/v1/projects?limit=100', status: 200, note: 'with the project',
    expect: (w, res) => assert.ok(hasId(P(w))(res.body.data)) },
  { route: 'GET /projects', as: 'admin', method: 'GET', path: () => '/api/v1/projects?limit=100', status: 200, note: 'with the project',
    expect: (w, res) => assert.ok(hasId(P(w))(res.body.data)) },
  { route: 'POST /projects', as: 'outsider', method: 'POST', path: () => '/api/v1/projects', body: () => ({ name: 'Mine' }), status: 201, audited: 'CREATE_PROJECT' },

  { route: 'GET /projects/:id', as: 'outsider', method: 'GET', path: (w) => `/api/v1/projects/${P(w)}`, status: 404 },
  { route: 'GET /projects/:id', as: 'member', method: 'GET', path: (w) => `/api/v1/projects/${P(w)}`, status: 200 },
  { route: 'GET /projects/:id', as: 'admin', method: 'GET', path: (w) => `/api/v1/projects/${P(w)}`, status: 200 },

  { route: 'PUT /projects/:id', as: 'outsider', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}`, body: () => ({ name: 'X' }), status: 404 },
  { route: 'PUT /projects/:id', as: 'member', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}`, body: () => ({ name: 'X' }), status: 403 },
  { route: 'PUT /projects/:id', as: 'owner', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}`, body: () => ({ name: 'X' }), status: 200 },
  { route: 'PUT /projects/:id', as: 'admin', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}`, body: () => ({ name: 'X' }), status: 200 },

  { route: 'DELETE /projects/:id', as: 'outsider', method: 'DELETE', path: (w) => `/api/v1/projects/${P(w)}`, status: 404,
    denied: { action: 'DELETE_PROJECT', type: 'PROJECT', id: P } },
  { route: 'DELETE /projects/:id', as: 'member', method: 'DELETE', path: (w) => `/api/v1/projects/${P(w)}`, status: 403,
    denied: { action: 'DELETE_PROJECT', type: 'PROJECT', id: P } },
  { route: 'DELETE /projects/:id', as: 'owner', method: 'DELETE', path: (w) => `/api/v1/projects/${P(w)}`, status: 204, audited: 'DELETE_PROJECT' },
  { route: 'DELETE /projects/:id', as: 'admin', method: 'DELETE', path: (w) => `/api/v1/projects/${P(w)}`, status: 204, audited: 'DELETE_PROJECT' },

  { route: 'GET /projects/:id/members', as: 'outsider', method: 'GET', path: (w) => `/api/v1/projects/${P(w)}/members`, status: 404 },
  { route: 'GET /projects/:id/members', as: 'member', method: 'GET', path: (w) => `/api/v1/projects/${P(w)}/members`, status: 200,
    expect: (_w, res) => assert.equal(res.body.data.length, 2) },
  { route: 'GET /projects/:id/members', as: 'admin', method: 'GET', path: (w) => `/api/v1/projects/${P(w)}/members`, status: 200,
    expect: (_w, res) => assert.equal(res.body.data.length, 2) },

  { route: 'GET /projects/:id/members/:userId', as: 'outsider', method: 'GET', path: (w) => `/api/v1/projects/${P(w)}/members/${who.member.id}`, status: 404 },
  { route: 'GET /projects/:id/members/:userId', as: 'member', method: 'GET', path: (w) => `/api/v1/projects/${P(w)}/members/${who.owner.id}`, status: 200,
    expect: (_w, res) => assert.deepEqual([res.body.user_id, res.body.role], [who.owner.id, 'OWNER']) },
  { route: 'GET /projects/:id/members/:userId', as: 'admin', method: 'GET', path: (w) => `/api/v1/projects/${P(w)}/members/${who.member.id}`, status: 200,
    expect: (_w, res) => assert.deepEqual([res.body.user_id, res.body.role], [who.member.id, 'MEMBER']) },
  { route: 'GET /projects/:id/members/:userId', as: 'member', method: 'GET', path: (w) => `/api/v1/projects/${P(w)}/members/${who.outsider.id}`, status: 404, note: 'not a member' },

  // adding a member
  { route: 'PUT /projects/:id/members/:userId (new)', as: 'outsider', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${spare.id}`,
    body: () => ({ role: 'MEMBER' }), status: 404, denied: { action: 'ADD_PROJECT_MEMBER', type: 'PROJECT', id: P } },
  { route: 'PUT /projects/:id/members/:userId (new)', as: 'outsider', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${who.outsider.id}`,
    body: () => ({ role: 'OWNER' }), status: 404, denied: { action: 'ADD_PROJECT_MEMBER', type: 'PROJECT', id: P }, note: 'adding themself' },
  { route: 'PUT /projects/:id/members/:userId (new)', as: 'member', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${spare.id}`,
    body: () => ({ role: 'MEMBER' }), status: 403, denied: { action: 'ADD_PROJECT_MEMBER', type: 'PROJECT', id: P } },
  { route: 'PUT /projects/:id/members/:userId (new)', as: 'owner', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${spare.id}`,
    body: () => ({ role: 'MEMBER' }), status: 201, audited: 'ADD_PROJECT_MEMBER' },
  { route: 'PUT /projects/:id/members/:userId (new)', as: 'admin', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${spare.id}`,
    body: () => ({ role: 'MEMBER' }), status: 201, audited: 'ADD_PROJECT_MEMBER' },

  // changing a role
  { route: 'PUT /projects/:id/members/:userId (role)', as: 'outsider', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${who.member.id}`,
    body: () => ({ role: 'OWNER' }), status: 404, denied: { action: 'CHANGE_PROJECT_MEMBER_ROLE', type: 'PROJECT', id: P } },
  { route: 'PUT /projects/:id/members/:userId (role)', as: 'member', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${who.member.id}`,
    body: () => ({ role: 'OWNER' }), status: 403, denied: { action: 'CHANGE_PROJECT_MEMBER_ROLE', type: 'PROJECT', id: P }, note: 'promoting themself' },
  { route: 'PUT /projects/:id/members/:userId (role)', as: 'member', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${who.owner.id}`,
    body: () => ({ role: 'MEMBER' }), status: 403, denied: { action: 'CHANGE_PROJECT_MEMBER_ROLE', type: 'PROJECT', id: P }, note: 'demoting the OWNER' },
  { route: 'PUT /projects/:id/members/:userId (role)', as: 'owner', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${who.member.id}`,
    body: () => ({ role: 'OWNER' }), status: 200, audited: 'CHANGE_PROJECT_MEMBER_ROLE' },
  { route: 'PUT /projects/:id/members/:userId (role)', as: 'admin', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${who.member.id}`,
    body: () => ({ role: 'OWNER' }), status: 200, audited: 'CHANGE_PROJECT_MEMBER_ROLE' },

  // removing a member
  { route: 'DELETE /projects/:id/members/:userId', as: 'outsider', method: 'DELETE', path: (w) => `/api/v1/projects/${P(w)}/members/${who.member.id}`,
    status: 404, denied: { action: 'REMOVE_PROJECT_MEMBER', type: 'PROJECT', id: P } },
  { route: 'DELETE /projects/:id/members/:userId', as: 'member', method: 'DELETE', path: (w) => `/api/v1/projects/${P(w)}/members/${who.owner.id}`,
    status: 403, denied: { action: 'REMOVE_PROJECT_MEMBER', type: 'PROJECT', id: P }, note: 'removing someone else' },
  { route: 'DELETE /projects/:id/members/:userId', as: 'member', method: 'DELETE', path: (w) => `/api/v1/projects/${P(w)}/members/${who.member.id}`,
    status: 204, audited: 'REMOVE_PROJECT_MEMBER', note: 'removing themself' },
  { route: 'DELETE /projects/:id/members/:userId', as: 'owner', method: 'DELETE', path: (w) => `/api/v1/projects/${P(w)}/members/${who.member.id}`,
    status: 204, audited: 'REMOVE_PROJECT_MEMBER' },
  { route: 'DELETE /projects/:id/members/:userId', as: 'admin', method: 'DELETE', path: (w) => `/api/v1/projects/${P(w)}/members/${who.member.id}`,
    status: 204, audited: 'REMOVE_PROJECT_MEMBER' },

  // ── tasks ──
  { route: 'GET /tasks?project_id', as: 'outsider', method: 'GET', path: (w) => `/api/v1/tasks?project_id=${P(w)}`, status: 200, note: 'and sees none of its tasks',
    expect: (_w, res) => assert.deepEqual(res.body.data, []) },
  { route: 'GET /tasks?project_id', as: 'member', method: 'GET', path: (w) => `/api/v1/tasks?project_id=${P(w)}`, status: 200, note: 'with its tasks',
    expect: (w, res) => assert.deepEqual(res.body.data.map((t: TaskBody) => t.id), [w.memberTask.id, w.ownerTask.id]) },
  { route: 'GET /tasks?project_id', as: 'admin', method: 'GET', path: (w) => `/api/v1/tasks?project_id=${P(w)}`, status: 200, note: 'with its tasks',
    expect: (w, res) => assert.deepEqual(res.body.data.map((t: TaskBody) => t.id), [w.memberTask.id, w.ownerTask.id]) },
  { route: 'GET /tasks', as: 'outsider', method: 'GET', path: () => '/api/v1/tasks?limit=100', status: 200, note: 'without its tasks',
    expect: (w, res) => assert.ok(!hasId(T(w))(res.body.data)) },

  { route: 'POST /tasks', as: 'outsider', method: 'POST', path: () => '/api/v1/tasks', body: (w) => ({ project_id: P(w), title: 'Sneaky' }), status: 404,
    denied: { action: 'CREATE_TASK', type: 'PROJECT', id: P } },
  { route: 'POST /tasks', as: 'member', method: 'POST', path: () => '/api/v1/tasks', body: (w) => ({ project_id: P(w), title: 'Fine' }), status: 201, audited: 'CREATE_TASK' },
  { route: 'POST /tasks', as: 'admin', method: 'POST', path: () => '/api/v1/tasks', body: (w) => ({ project_id: P(w), title: 'Fine' }), status: 201, audited: 'CREATE_TASK' },

  { route: 'GET /tasks/:id', as: 'outsider', method: 'GET', path: (w) => `/api/v1/tasks/${T(w)}`, status: 404 },
  { route: 'GET /tasks/:id', as: 'member', method: 'GET', path: (w) => `/api/v1/tasks/${T(w)}`, status: 200 },
  { route: 'GET /tasks/:id', as: 'admin', method: 'GET', path: (w) => `/api/v1/tasks/${T(w)}`, status: 200 },

  { route: 'PUT /tasks/:id', as: 'outsider', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}`, body: () => ({ title: 'X' }), status: 404 },
  { route: 'PUT /tasks/:id', as: 'member', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}`, body: () => ({ title: 'X' }), status: 200 },
  { route: 'PUT /tasks/:id', as: 'admin', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}`, body: () => ({ title: 'X' }), status: 200 },

  { route: 'PUT /tasks/:id/assignee', as: 'outsider', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}/assignee`, body: () => ({ assignee_id: who.member.id }),
    status: 404, denied: { action: 'ASSIGN_TASK', type: 'TASK', id: T } },
  { route: 'PUT /tasks/:id/assignee', as: 'member', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}/assignee`, body: () => ({ assignee_id: who.member.id }),
    status: 200, audited: 'ASSIGN_TASK' },
  { route: 'PUT /tasks/:id/assignee', as: 'admin', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}/assignee`, body: () => ({ assignee_id: who.member.id }),
    status: 200, audited: 'ASSIGN_TASK' },

  { route: 'PUT /tasks/:id/status', as: 'outsider', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}/status`, body: () => ({ status: 'IN_PROGRESS' }),
    status: 404, denied: { action: 'CHANGE_TASK_STATUS', type: 'TASK', id: T } },
  { route: 'PUT /tasks/:id/status', as: 'member', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}/status`, body: () => ({ status: 'IN_PROGRESS' }),
    status: 200, audited: 'CHANGE_TASK_STATUS' },
  { route: 'PUT /tasks/:id/status', as: 'admin', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}/status`, body: () => ({ status: 'IN_PROGRESS' }),
    status: 200, audited: 'CHANGE_TASK_STATUS' },

  { route: 'DELETE /tasks/:id', as: 'outsider', method: 'DELETE', path: (w) => `/api/v1/tasks/${T(w)}`, status: 404,
    denied: { action: 'DELETE_TASK', type: 'TASK', id: T } },
  { route: 'DELETE /tasks/:id', as: 'member', method: 'DELETE', path: (w) => `/api/v1/tasks/${T(w)}`, status: 403,
    denied: { action: 'DELETE_TASK', type: 'TASK', id: T }, note: "someone else's task" },
  { route: 'DELETE /tasks/:id', as: 'member', method: 'DELETE', path: (w) => `/api/v1/tasks/${w.memberTask.id}`, status: 204, audited: 'DELETE_TASK', note: 'their own task' },
  { route: 'DELETE /tasks/:id', as: 'owner', method: 'DELETE', path: (w) => `/api/v1/tasks/${w.memberTask.id}`, status: 204, audited: 'DELETE_TASK', note: "a member's task" },
  { route: 'DELETE /tasks/:id', as: 'admin', method: 'DELETE', path: (w) => `/api/v1/tasks/${T(w)}`, status: 204, audited: 'DELETE_TASK' },

  // ── messages ──
  { route: 'GET /messages?room=project:<id>', as: 'outsider', method: 'GET', path: (w) => `/api/v1/messages?room=project:${P(w)}`, status: 404 },
  { route: 'GET /messages?room=project:<id>', as: 'member', method: 'GET', path: (w) => `/api/v1/messages?room=project:${P(w)}`, status: 200,
    expect: (w, res) => assert.deepEqual(res.body.data.map((m: { id: number }) => m.id), [w.message.id]) },
  { route: 'GET /messages?room=project:<id>', as: 'admin', method: 'GET', path: (w) => `/api/v1/messages?room=project:${P(w)}`, status: 200,
    expect: (w, res) => assert.deepEqual(res.body.data.map((m: { id: number }) => m.id), [w.message.id]) },
  { route: 'POST /messages (project room)', as: 'outsider', method: 'POST', path: () => '/api/v1/messages', body: (w) => ({ room: `project:${P(w)}`, text: 'hi' }), status: 404 },
  { route: 'POST /messages (project room)', as: 'member', method: 'POST', path: () => '/api/v1/messages', body: (w) => ({ room: `project:${P(w)}`, text: 'hi' }), status: 201 },
  { route: 'POST /messages (project room)', as: 'admin', method: 'POST', path: () => '/api/v1/messages', body: (w) => ({ room: `project:${P(w)}`, text: 'hi' }), status: 201 },
  { route: 'GET /messages (general)', as: 'outsider', method: 'GET', path: () => '/api/v1/messages', status: 200 },
  { route: 'POST /messages (general)', as: 'outsider', method: 'POST', path: () => '/api/v1/messages', body: () => ({ text: 'hi all' }), status: 201 },

  // ── posts (the team feed belongs to every user) ──
  { route: 'GET /posts', as: 'outsider', method: 'GET', path: () => '/api/v1/posts?limit=100', status: 200,
    expect: (w, res) => assert.ok(hasId(w.post.id)(res.body.data)) },
  { route: 'POST /posts', as: 'outsider', method: 'POST', path: () => '/api/v1/posts', body: () => ({ content: 'me too' }), status: 201 },
  { route: 'GET /posts/:id', as: 'outsider', method: 'GET', path: (w) => `/api/v1/posts/${w.post.id}`, status: 200 },
  { route: 'PUT /posts/:id/like', as: 'outsider', method: 'PUT', path: (w) => `/api/v1/posts/${w.post.id}/like`, status: 200 },
  { route: 'DELETE /posts/:id/like', as: 'outsider', method: 'DELETE', path: (w) => `/api/v1/posts/${w.post.id}/like`, status: 200 },
  { route: 'DELETE /posts/:id', as: 'member', method: 'DELETE', path: (w) => `/api/v1/posts/${w.post.id}`, status: 403, note: "someone else's post" },
  { route: 'DELETE /posts/:id', as: 'outsider', method: 'DELETE', path: (w) => `/api/v1/posts/${w.post.id}`, status: 403, note: "someone else's post" },
  { route: 'DELETE /posts/:id', as: 'owner', method: 'DELETE', path: (w) => `/api/v1/posts/${w.post.id}`, status: 204, note: 'their own post' },
  { route: 'DELETE /posts/:id', as: 'admin', method: 'DELETE', path: (w) => `/api/v1/posts/${w.post.id}`, status: 204 },

  // ── notifications (each user's own) ──
  { route: 'GET /notifications', as: 'outsider', method: 'GET', path: () => '/api/v1/notifications?limit=100', status: 200, note: "without the member's",
    expect: (w, res) => assert.ok(!hasId(w.note.id)(res.body.data)) },
  { route: 'GET /notifications', as: 'member', method: 'GET', path: () => '/api/v1/notifications?limit=100', status: 200, note: 'with their own',
    expect: (w, res) => assert.ok(hasId(w.note.id)(res.body.data)) },
  { route: 'PUT /notifications/:id/read', as: 'outsider', method: 'PUT', path: (w) => `/api/v1/notifications/${w.note.id}/read`, status: 404 },
  { route: 'PUT /notifications/:id/read', as: 'owner', method: 'PUT', path: (w) => `/api/v1/notifications/${w.note.id}/read`, status: 404 },
  { route: 'PUT /notifications/:id/read', as: 'member', method: 'PUT', path: (w) => `/api/v1/notifications/${w.note.id}/read`, status: 200 },
  { route: 'PUT /notifications/read', as: 'outsider', method: 'PUT', path: () => '/api/v1/notifications/read', status: 204, note: "leaving the member's unread",
    expect: async (w) => {
      const rows = await h.server.owner.query<{ read_at: string | null }>('SELECT read_at FROM notifications WHERE id = $1', [w.note.id]);
      assert.equal(rows[0]!.read_at, null);
    } },

  // ── 400s, 409s and missing resources write no record ──
  { route: 'PUT /projects/:id/members/:userId', as: 'outsider', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${spare.id}`,
    body: () => ({ role: 'BOSS' }), status: 400, note: 'for a bad role' },
  { route: 'PUT /projects/:id/members/:userId', as: 'owner', method: 'PUT', path: (w) => `/api/v1/projects/${P(w)}/members/${who.owner.id}`,
    body: () => ({ role: 'MEMBER' }), status: 409, note: 'LAST_OWNER', expect: (_w, res) => assert.equal(res.body.code, 'LAST_OWNER') },
  { route: 'DELETE /projects/:id/members/:userId', as: 'owner', method: 'DELETE', path: (w) => `/api/v1/projects/${P(w)}/members/${who.owner.id}`,
    status: 409, note: 'LAST_OWNER', expect: (_w, res) => assert.equal(res.body.code, 'LAST_OWNER') },
  { route: 'DELETE /projects/:id/members/:userId', as: 'admin', method: 'DELETE', path: (w) => `/api/v1/projects/${P(w)}/members/${who.owner.id}`,
    status: 409, note: 'LAST_OWNER', expect: (_w, res) => assert.equal(res.body.code, 'LAST_OWNER') },
  { route: 'PUT /tasks/:id/status', as: 'member', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}/status`, body: () => ({ status: 'DONE' }),
    status: 409, note: 'INVALID_TRANSITION', expect: (_w, res) => assert.equal(res.body.code, 'INVALID_TRANSITION') },
  { route: 'PUT /tasks/:id/status', as: 'outsider', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}/status`, body: () => ({ status: 'WHATEVER' }),
    status: 400, note: 'for a bad status' },
  { route: 'PUT /tasks/:id/assignee', as: 'member', method: 'PUT', path: (w) => `/api/v1/tasks/${T(w)}/assignee`, body: () => ({ assignee_id: who.outsider.id }),
    status: 400, note: 'for a non-member assignee' },
  { route: 'POST /tasks', as: 'owner', method: 'POST', path: () => '/api/v1/tasks', body: (w) => ({ project_id: P(w), title: 'x', assignee_id: who.outsider.id }),
    status: 400, note: 'for a non-member assignee' },
  { route: 'POST /tasks', as: 'outsider', method: 'POST', path: () => '/api/v1/tasks', body: (w) => ({ project_id: P(w), title: '' }), status: 400, note: 'for an empty title' },
  { route: 'DELETE /projects/:id', as: 'outsider', method: 'DELETE', path: () => '/api/v1/projects/abc', status: 400, note: 'for an id that is not one' },
  { route: 'DELETE /projects/:id', as: 'outsider', method: 'DELETE', path: () => '/api/v1/projects/987654321', status: 404, note: 'for a project that does not exist' },
  { route: 'DELETE /tasks/:id', as: 'member', method: 'DELETE', path: () => '/api/v1/tasks/987654321', status: 404, note: 'for a task that does not exist' },
  { route: 'PUT /tasks/:id/status', as: 'member', method: 'PUT', path: () => '/api/v1/tasks/987654321/status', body: () => ({ status: 'DONE' }), status: 404,
    note: 'for a task that does not exist' },
  { route: 'POST /tasks', as: 'member', method: 'POST', path: () => '/api/v1/tasks', body: () => ({ project_id: 987654321, title: 'x' }), status: 404,
    note: 'for a project that does not exist' },
  { route: 'PUT /projects/:id/members/:userId', as: 'member', method: 'PUT', path: () => `/api/v1/projects/987654321/members/${spare.id}`,
    body: () => ({ role: 'MEMBER' }), status: 404, note: 'for a project that does not exist' },
];

function title(r: Row): string {
  const what = r.denied
    ? `and one DENIED ${r.denied.action}`
    : r.audited
      ? `and one ${r.audited}`
      : 'and no audit record';
  return `${r.route}${r.note ? ` (${r.note})` : ''}: the ${r.as} gets ${r.status} ${what}`;
}

describe('the access matrix of the team domain', () => {
  for (const r of rows) {
    test(title(r), async () => {
      const w = await makeWorld();
      const caller = who[r.as];
      const before = await snapshot(w);
      const res = await caller.client.request(r.method, r.path(w), { token: caller.token, body: r.body?.(w) });
      assert.equal(res.status, r.status, res.text);
      if (r.status >= 400) {
        assert.match(res.headers.get('content-type') ?? '', /application\/problem\+json/);
        // A refusal, a conflict or a validation failure changes nothing.
        assert.deepEqual(await snapshot(w), before);
      }
      await r.expect?.(w, res);

      const records = await recordsOf(h.server, res);
      if (r.denied) {
        assert.equal(records.length, 1, `one DENIED record expected, got ${JSON.stringify(records)}`);
        const [d] = records;
        assert.equal(d!.action, r.denied.action);
        assert.equal(d!.result, 'DENIED');
        assert.equal(d!.resource_type, r.denied.type);
        assert.equal(d!.resource_id, r.denied.id(w));
        assert.equal(d!.actor_id, caller.id);
        assert.equal(d!.ip, caller.client.ip);
      } else if (r.audited) {
        assert.deepEqual(records.map((x) => [x.action, x.result, x.actor_id]), [[r.audited, 'SUCCESS', caller.id]]);
      } else {
        assert.deepEqual(records, [], 'no audit record expected');
      }
    });
  }

  test('covers every route of the team domain', () => {
    const routes = new Set<string>();
    const teamRoutes = [
      'GET /projects', 'POST /projects', 'GET /projects/:id', 'PUT /projects/:id', 'DELETE /projects/:id',
      'GET /projects/:id/members', 'GET /projects/:id/members/:userId', 'PUT /projects/:id/members/:userId', 'DELETE /projects/:id/members/:userId',
      'GET /tasks', 'POST /tasks', 'GET /tasks/:id', 'PUT /tasks/:id', 'PUT /tasks/:id/assignee', 'PUT /tasks/:id/status', 'DELETE /tasks/:id',
      'GET /posts', 'POST /posts', 'GET /posts/:id', 'DELETE /posts/:id', 'PUT /posts/:id/like', 'DELETE /posts/:id/like',
      'GET /messages', 'POST /messages',
      'GET /notifications', 'PUT /notifications/read', 'PUT /notifications/:id/read',
    ];
    for (const r of rows) routes.add(r.route.replace(/ \(.*\)$/, '').replace(/\?.*$/, ''));
    for (const route of teamRoutes) assert.ok(routes.has(route), `no row for ${route}`);
    for (const route of teamRoutes) {
      const [method, path] = route.split(' ') as [string, string];
      assert.ok(h.server.app.hasRoute({ method: method as 'GET', url: `/api/v1${path}` }), `${route} is not a route of the app`);
    }
  });

  test('records a refused audited action once even when the refusal is repeated by another caller', async () => {
    const w = await makeWorld();
    const a = await who.outsider.client.delete(`/api/v1/projects/${P(w)}`, { token: who.outsider.token });
    const b = await who.member.client.delete(`/api/v1/projects/${P(w)}`, { token: who.member.token });
    assert.deepEqual([a.status, b.status], [404, 403]);
    const denied = await auditRows(h.server, `resource_type = 'PROJECT' AND resource_id = $1 AND result = 'DENIED'`, [P(w)]);
    assert.deepEqual(denied.map((d) => [d.action, d.actor_id]), [['DELETE_PROJECT', who.outsider.id], ['DELETE_PROJECT', who.member.id]]);
  });
});
