// What a task looks like from the outside (the API and the task-* events).
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
