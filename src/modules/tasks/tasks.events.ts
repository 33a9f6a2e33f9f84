// Real-time events of task changes: to the project's room, carrying the task after the change.
import type { OutboxEvent } from '../outbox/outbox.events.js';
import { presentTask } from './tasks.presenter.js';
import type { TaskRow } from './tasks.repository.js';

export const taskEvent = (name: 'task-created' | 'task-updated', t: TaskRow): OutboxEvent => ({
  name,
  room: `project:${t.project_id}`,
  payload: presentTask(t) as unknown as Record<string, unknown>,
});

export const taskDeletedEvent = (t: { id: number; project_id: number }): OutboxEvent => ({
  name: 'task-deleted',
  room: `project:${t.project_id}`,
  payload: { id: t.id, project_id: t.project_id },
});
