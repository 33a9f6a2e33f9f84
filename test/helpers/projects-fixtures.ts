// Factories for the team domain's tests (projects, members, tasks, messages): each makes its
// objects through the real API and fails loudly when the API refuses, so a broken factory
// never passes for a broken feature.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
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

export interface PageBody<T> {
  data: T[];
  next_cursor: string | null;
}

/** A word that appears nowhere else, to tell one test's objects from another's. */
export const tag = () => `t${randomBytes(5).toString('hex')}`;

export async function createProject(by: Session, opts: { name?: string; description?: string } = {}): Promise<ProjectBody> {
  const body: Record<string, string> = { name: opts.name ?? `Project ${tag()}` };
  if (opts.description !== undefined) body.description = opts.description;
  const res = await by.client.post<ProjectBody>('/api/v1/projects', body, { token: by.token });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

export function putMember(by: Session, projectId: number, userId: number, role: 'OWNER' | 'MEMBER', headers?: Record<string, string>) {
  return by.client.put<MemberBody & Problem>(`/api/v1/projects/${projectId}/members/${userId}`, { role }, { token: by.token, headers });
}

/** Adds (or re-roles) a member and insists it worked. */
export async function addMember(by: Session, projectId: number, userId: number, role: 'OWNER' | 'MEMBER' = 'MEMBER'): Promise<void> {
  const res = await putMember(by, projectId, userId, role);
  assert.ok(res.status === 201 || res.status === 200, res.text);
}

export async function createTask(
  by: Session,
  projectId: number,
  opts: { title?: string; description?: string; assignee_id?: number | null } = {},
): Promise<TaskBody> {
  const res = await by.client.post<TaskBody>('/api/v1/tasks', { project_id: projectId, title: opts.title ?? `Task ${tag()}`, ...opts }, { token: by.token });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

export async function postMessage(by: Session, room: string, text = `hello ${tag()}`): Promise<{ id: number; room: string }> {
  const res = await by.client.post('/api/v1/messages', { room, text }, { token: by.token });
  assert.equal(res.status, 201, res.text);
  return res.body;
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
