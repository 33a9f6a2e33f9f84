import { versionEtag } from '../../http/preconditions.js';
import type { TaskRow } from './tasks.repository.js';

export function presentTask(t: TaskRow) {
  return {
    id: t.id,
    project_id: t.project_id,
    title: t.title,
    description: t.description,
    status: t.status,
    assignee_id: t.assignee_id,
    created_by: t.created_by,
    created_at: t.created_at,
    updated_at: t.updated_at,
  };
}

export const taskEtag = (t: TaskRow) => versionEtag('task', t.id, t.version);

/** Real-time events for task changes go to the project's room, carrying the task after the change. */
export const taskEvent = (name: 'task-created' | 'task-updated', t: TaskRow) => ({
  name,
  room: `project:${t.project_id}`,
  payload: presentTask(t) as unknown as Record<string, unknown>,
});
