// Shared set-up for the team-domain tests (tasks, task status, posts, messages,
// notifications): projects and members made through the API, and read-only looks at the
// events outbox and notifications through the owner connection.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Session } from './client.js';
import * as fixtures from './projects-fixtures.js';
import type { PageBody, TaskBody } from './projects-fixtures.js';
import type { TestServer } from './server.js';

export type { PageBody, TaskBody, Problem as ProblemFields } from './projects-fixtures.js';

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

/** A word that appears nowhere else (letters only, so full-text search keeps it whole). */
export const uniqueWord = (prefix = 'w') => `${prefix}${randomBytes(6).toString('hex').replace(/[0-9]/g, (d) => 'abcdefghij'[Number(d)]!)}`;

/** Creates a project through the API; the session becomes its OWNER. */
export async function createProject(owner: Session, name = `Project ${uniqueWord()}`): Promise<{ id: number; name: string }> {
  const project = await fixtures.createProject(owner, { name });
  return { id: project.id, name: project.name };
}

/** Adds a new member to a project through the API (as its OWNER or an ADMIN): a 201, nothing else. */
export async function addMember(by: Session, projectId: number, userId: number, role: 'OWNER' | 'MEMBER' = 'MEMBER'): Promise<void> {
  const res = await fixtures.putMember(by, projectId, userId, role);
  assert.equal(res.status, 201, res.text);
}

/** Creates a task through the API and expects 201 (titles are letters only, for full-text search). */
export function createTask(
  by: Session,
  body: { project_id: number; title?: string; description?: string; assignee_id?: number | null },
): Promise<TaskBody> {
  const { project_id, ...rest } = body;
  return fixtures.createTask(by, project_id, { ...rest, title: body.title ?? `Task ${uniqueWord()}` });
}

/** Rows of the events outbox, oldest first. */
export function eventRows(server: TestServer, where: string, params: unknown[] = []): Promise<EventRow[]> {
  return server.owner.query<EventRow>(`SELECT id, name, room, payload FROM events WHERE ${where} ORDER BY id`, params);
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
