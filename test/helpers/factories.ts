// Factories for the team domain's tests (projects, members, tasks, messages) and read-only
// looks at what the changes leave behind (audit records, the events outbox, notifications).
// Each factory makes its objects through the real API and fails loudly when the API refuses,
// so a broken factory never passes for a broken feature.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Queryable } from '../../src/db/database.js';
import { auditRows, type Response, type Session } from './client.js';
import type { TestServer } from './server.js';

export interface ProjectBody {
  id: number;
  name: string;
  description: string;
  created_by: number | null;
  created_at: string;
  updated_at: string;
  member_count: number;
}

export interface MemberBody {
  user_id: number;
  role: 'OWNER' | 'MEMBER';
  added_at: string;
}

export interface TaskBody {
  id: number;
  project_id: number;
  title: string;
  description: string;
  status: string;
  assignee_id: number | null;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

/** The members of a problem+json body that tests look at (present on error responses only). */
export interface Problem {
  code?: string;
  detail?: string;
}

/** An audit record as the API shows it (docs/api.md section 5). */
export interface AuditRecordBody {
  id: number;
  actor_id: number | null;
  action: string;
  resource_type: string;
  resource_id: number | null;
  timestamp: string;
  result: string;
  metadata: Record<string, unknown>;
  ip: string | null;
  user_agent: string | null;
  request_id: string;
}

export interface PageBody<T> {
  data: T[];
  next_cursor: string | null;
}

export interface NotificationBody {
  id: number;
  kind: string;
  payload: Record<string, unknown>;
  read_at: string | null;
  created_at: string;
}

export interface EventRow {
  id: number;
  name: string;
  room: string;
  payload: Record<string, unknown>;
}

export interface NotificationRow {
  id: number;
  user_id: number;
  kind: string;
  payload: Record<string, unknown>;
  read_at: string | null;
}

/**
 * A word that appears nowhere else, to tell one test's objects from another's. Letters only,
 * because the tasks' full-text search parses digits as numbers where it can ("1e5abc" is the
 * number 1e5 and the word "abc"): only a letters-only word is sure to be indexed, and found,
 * whole.
 */
export const uniqueWord = (prefix = 'w') => `${prefix}${randomBytes(6).toString('hex').replace(/[0-9]/g, (d) => 'abcdefghij'[Number(d)]!)}`;

/**
 * A project owned by a new user, with `members` new users added as MEMBERs (`member` is the
 * first of them; with none, there is none). `h` makes the users (useTestServer's harness).
 */
export async function team(h: { newUser(): Promise<Session> }, members = 1) {
  const owner = await h.newUser();
  const project = await createProject(owner);
  const others: Session[] = [];
  for (let i = 0; i < members; i++) {
    const m = await h.newUser();
    await addMember(owner, project.id, m.id);
    others.push(m);
  }
  return { owner, project, projectId: project.id, members: others, member: others[0]! };
}

/** Creates a project through the API; `by` becomes its OWNER. */
export async function createProject(by: Session, opts: { name?: string; description?: string } = {}): Promise<ProjectBody> {
  const body: Record<string, string> = { name: opts.name ?? `Project ${uniqueWord()}` };
  if (opts.description !== undefined) body.description = opts.description;
  const res = await by.client.post<ProjectBody>('/api/v1/projects', body, { token: by.token });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

/** The raw PUT of a membership: for tests that re-role a member or expect a refusal. */
export function putMember(by: Session, projectId: number, userId: number, role: 'OWNER' | 'MEMBER', headers?: Record<string, string>) {
  return by.client.put<MemberBody & Problem>(`/api/v1/projects/${projectId}/members/${userId}`, { role }, { token: by.token, headers });
}

/** Adds a new member (as the project's OWNER or an ADMIN): a 201, nothing else; re-roling is putMember's. */
export async function addMember(by: Session, projectId: number, userId: number, role: 'OWNER' | 'MEMBER' = 'MEMBER'): Promise<void> {
  const res = await putMember(by, projectId, userId, role);
  assert.equal(res.status, 201, res.text);
}

/** Creates a task in the project through the API (the default title is letters only, for full-text search). */
export async function createTask(
  by: Session,
  projectId: number,
  opts: { title?: string; description?: string; assignee_id?: number | null } = {},
): Promise<TaskBody> {
  const body = { ...opts, project_id: projectId, title: opts.title ?? `Task ${uniqueWord()}` };
  const res = await by.client.post<TaskBody>('/api/v1/tasks', body, { token: by.token });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

/**
 * A message in `room`, by `by`. A fixture that posts for the same user test after test may go
 * beyond the 20 messages a second a user may send (a fast machine runs a test in 30 ms): a 429
 * is waited out (its Retry-After) and the message sent again, as a client would. The tests of
 * the limit itself post directly.
 */
export async function postMessage(by: Session, room: string, text = `hello ${uniqueWord()}`): Promise<{ id: number; room: string }> {
  for (let attempt = 0; ; attempt++) {
    const res = await by.client.post('/api/v1/messages', { room, text }, { token: by.token });
    if (res.status === 429 && attempt < 3) {
      await new Promise((resolve) => setTimeout(resolve, Number(res.headers.get('retry-after') ?? 1) * 1000));
      continue;
    }
    assert.equal(res.status, 201, res.text);
    return res.body;
  }
}

/** The audit records written while serving one response (matched by its X-Request-Id). */
export function recordsOf(server: TestServer, res: Response) {
  const id = res.headers.get('x-request-id');
  assert.ok(id, 'every response carries X-Request-Id');
  return auditRows(server, 'request_id = $1', [id]);
}

/** `SELECT count(*)` through the owner connection. */
export async function countRows(server: TestServer, sql: string, params: unknown[] = []): Promise<number> {
  const rows = await server.owner.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params);
  return rows[0]!.n;
}

/** How many tasks a project has (owner connection). */
export const tasksInProject = (server: TestServer, projectId: number) => countRows(server, 'tasks WHERE project_id = $1', [projectId]);

/** Events in the outbox (one per item of its rows: the outbox_events view), oldest first; `id` is the row's. */
export function eventRows(server: TestServer, where: string, params: unknown[] = []): Promise<EventRow[]> {
  return server.owner.query<EventRow>(`SELECT row_id AS id, name, room, payload FROM outbox_events WHERE ${where} ORDER BY row_id, position`, params);
}

/** An event as the outbox_events view holds it. */
export interface StoredEvent {
  row_id: number;
  position: number;
  name: string;
  room: string;
  payload: Record<string, unknown>;
  xact_id: string;
}

/** The events of this name in the outbox, oldest first (read through `q`, e.g. the owner's connection). */
export function eventsNamed(q: Queryable, name: string): Promise<StoredEvent[]> {
  return q.query<StoredEvent>(
    'SELECT row_id, position::int, name, room, payload, xact_id::text AS xact_id FROM outbox_events WHERE name = $1 ORDER BY row_id, position',
    [name],
  );
}

/** A user's row as stored (owner connection); undefined when there is none. */
export async function userRow(server: TestServer, id: number) {
  const rows = await server.owner.query<{ id: number; email: string; name: string; role: string; active: boolean; version: number }>(
    'SELECT id, email, name, role, active, version FROM users WHERE id = $1',
    [id],
  );
  return rows[0];
}

/** A record as the API shows it to an ADMIN (personal data resolved); fails unless it is 200. */
export async function apiRecord(admin: Session, id: number): Promise<AuditRecordBody> {
  const res = await admin.client.get<AuditRecordBody>(`/api/v1/audit-logs/${id}`, { token: admin.token });
  assert.equal(res.status, 200, res.text);
  return res.body;
}

/** Stored notifications, oldest first. */
export function notificationRows(server: TestServer, where: string, params: unknown[] = []): Promise<NotificationRow[]> {
  return server.owner.query<NotificationRow>(`SELECT id, user_id, kind, payload, read_at FROM notifications WHERE ${where} ORDER BY id`, params);
}

/** Follows next_cursor from `path` to the last page and returns every row, in page order. */
export async function allPages<T>(session: Session, path: string): Promise<T[]> {
  const rows: T[] = [];
  let url: string | null = path;
  for (let guard = 0; url !== null; guard++) {
    assert.ok(guard < 200, 'pagination does not end');
    const res: { status: number; text: string; body: PageBody<T> } = await session.client.get<PageBody<T>>(url, { token: session.token });
    assert.equal(res.status, 200, res.text);
    rows.push(...res.body.data);
    const cursor = res.body.next_cursor;
    url = cursor === null ? null : `${path}${path.includes('?') ? '&' : '?'}cursor=${encodeURIComponent(cursor)}`;
  }
  return rows;
}

/** Runs fn over items with at most `width` in flight. */
export async function inBatches<T, R>(items: T[], width: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}
