// The task status machine (docs/api.md, Tasks). Anything not listed is 409 INVALID_TRANSITION;
// setting the current status again is a 200 that changes nothing.
export const TASK_STATUSES = ['TODO', 'IN_PROGRESS', 'IN_REVIEW', 'DONE', 'CANCELED'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

export const TRANSITIONS: Record<TaskStatus, readonly TaskStatus[]> = {
  TODO: ['IN_PROGRESS', 'CANCELED'],
  IN_PROGRESS: ['TODO', 'IN_REVIEW', 'DONE', 'CANCELED'],
  IN_REVIEW: ['IN_PROGRESS', 'DONE', 'CANCELED'],
  DONE: ['IN_PROGRESS'],
  CANCELED: ['TODO'],
};

export const canTransition = (from: TaskStatus, to: TaskStatus) => TRANSITIONS[from].includes(to);
