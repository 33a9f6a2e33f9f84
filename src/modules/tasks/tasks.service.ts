// Tasks live in projects: members create, edit, assign and move them through the status
// machine; the creator, a project OWNER or an ADMIN may delete them. Every change decides
// the caller's right inside its transaction, on locked rows (projects.access.ts).
import type { Actor, ActorContext } from '../../context.js';
import type { Deps } from '../../deps.js';
import { authorize } from '../../domain/authorization.js';
import { DomainError, invalid, notFound } from '../../domain/errors.js';
import { pageOf, type PageAtSnapshot, type PageRequest } from '../../domain/page.js';
import { checkVersion, type ExpectedVersion } from '../../domain/versions.js';
import { useCase, type UnitOfWork } from '../../use-cases/runner.js';
import type { AuditAction } from '../audit/audit.writer.js';
import { notify } from '../notifications/notifications.writer.js';
import { lockProjectAccess } from '../projects/projects.access.js';
import { accessOf, projectPolicy, type ProjectRole } from '../projects/projects.policy.js';
import { TRANSITIONS, canTransition, type TaskStatus } from './tasks.status.js';
import { taskDeletedEvent, taskEvent } from './tasks.events.js';
import * as repo from './tasks.repository.js';
import type { TaskRow } from './tasks.repository.js';

const CREATE = useCase('tasks.create', ['CREATE_TASK'], { batch: true });
const UPDATE = useCase('tasks.update');
const ASSIGN = useCase('tasks.assign', ['ASSIGN_TASK'], { batch: true });
const SET_STATUS = useCase('tasks.setStatus', ['CHANGE_TASK_STATUS'], { batch: true });
const DELETE = useCase('tasks.delete', ['DELETE_TASK']);

export interface TaskQuery {
  project_id?: number;
  assignee_id?: number;
  status?: TaskStatus;
  q?: string;
}

/** Assigning is to a member of the task's project, or to nobody. */
function assertAssignable(roles: Map<number, ProjectRole>, assigneeId: number | null): void {
  if (assigneeId !== null && !roles.has(assigneeId)) throw invalid('/assignee_id', 'must be a member of the project');
}

export function createTasksService(deps: Deps) {
  const { db, run } = deps;

  /**
   * The task locked for a change, after the project and the memberships of the caller (and of
   * `others`) that decide it: 404 when it does not exist, and a refusal (recorded as DENIED when
   * `action` is given) when the caller may not see it.
   */
  async function lockForWork(uow: UnitOfWork, id: number, action: AuditAction | undefined, others: Array<number | null> = []) {
    const [locked, task] = await Promise.all([lockProjectAccess(uow, { taskId: id }, others), repo.lockTask(uow.tx, id)]);
    if (!task) throw notFound('Task');
    const record = action && ({ action, resourceType: 'TASK', resourceId: id } as const);
    uow.authorize(projectPolicy.can('see', locked.access), 'Task', record);
    return { task, ...locked, record };
  }

  return {
    /** For reads: a task whose project the caller may see; 404 otherwise. */
    async get(actor: Actor, id: number): Promise<TaskRow> {
      const found = await repo.findTaskWithRole(db, id, actor.id);
      if (!found) throw notFound('Task');
      authorize(projectPolicy.can('see', accessOf(actor, found.role)), 'Task');
      return found.task;
    },

    /** A page of the caller's tasks; none when `unchangedSince` is still the database's snapshot. */
    async list(actor: Actor, query: TaskQuery, page: PageRequest, unchangedSince?: string): Promise<PageAtSnapshot<TaskRow>> {
      // An empty or blank search (`?q=`) is no filter, not a search that matches nothing.
      const q = query.q?.trim() || undefined;
      const read = await repo.listTasks(db, { ...query, q, memberId: actor.role === 'ADMIN' ? null : actor.id }, page.after, page.limit, unchangedSince);
      return { snapshot: read.snapshot, page: read.rows && pageOf(read.rows, page) };
    },

    async create(ctx: ActorContext, body: { project_id: number; title: string; description?: string; assignee_id?: number | null }): Promise<TaskRow> {
      const projectId = body.project_id;
      const assigneeId = body.assignee_id ?? null;
      return run(ctx, CREATE, async (uow) => {
        const { projectId: found, access, roles } = await lockProjectAccess(uow, { projectId }, [assigneeId]);
        if (found === undefined) throw notFound('Project');
        // A task in a project the caller cannot see: 404, recorded as DENIED CREATE_TASK on that project.
        uow.authorize(projectPolicy.can('workOnTasks', access), 'Project', { action: 'CREATE_TASK', resourceType: 'PROJECT', resourceId: projectId });
        assertAssignable(roles, assigneeId);
        const task = await repo.insertTask(uow.tx, { projectId, title: body.title.trim(), description: body.description ?? '', assigneeId, createdBy: ctx.actor.id });
        uow.audit({ action: 'CREATE_TASK', resourceType: 'TASK', resourceId: task.id, metadata: { projectId, title: task.title, assigneeId } });
        uow.emit(taskEvent('task-created', task));
        await notify(uow, [assigneeId], 'task_assigned', { task_id: task.id, project_id: projectId, title: task.title, actor_id: ctx.actor.id });
        return task;
      }, {
        // Alone, a member's task without an assignee goes as one statement (repo.CREATE_TASK_ALONE).
        alone: assigneeId === null ? { change: repo.CREATE_TASK_ALONE, params: [projectId, body.title.trim(), body.description ?? ''], answer: repo.taskOfRow } : undefined,
      });
    },

    async update(ctx: ActorContext, id: number, body: { title?: string; description?: string }, expected: ExpectedVersion): Promise<TaskRow> {
      return run(ctx, UPDATE, async (uow) => {
        const { task, access } = await lockForWork(uow, id, undefined);
        uow.authorize(projectPolicy.can('workOnTasks', access), 'Task');
        checkVersion(expected, task.version);
        const title = body.title?.trim();
        const changed = (title !== undefined && title !== task.title) || (body.description !== undefined && body.description !== task.description);
        if (!changed) return task;
        const updated = await repo.updateTask(uow.tx, id, { title, description: body.description });
        uow.emit(taskEvent('task-updated', updated));
        return updated;
      });
    },

    async assign(ctx: ActorContext, id: number, assigneeId: number | null, expected: ExpectedVersion): Promise<TaskRow> {
      return run(ctx, ASSIGN, async (uow) => {
        // The assignee's membership is locked too: their removal waits, or is seen here.
        const { task, access, roles, record } = await lockForWork(uow, id, 'ASSIGN_TASK', [assigneeId]);
        uow.authorize(projectPolicy.can('workOnTasks', access), 'Task', record);
        checkVersion(expected, task.version);
        if (task.assignee_id === assigneeId) {
          uow.withoutRecord('unchanged');
          return task;
        }
        assertAssignable(roles, assigneeId);
        const updated = await repo.updateTask(uow.tx, id, { assignee_id: assigneeId });
        uow.audit({ action: 'ASSIGN_TASK', resourceType: 'TASK', resourceId: id, metadata: { oldAssigneeId: task.assignee_id, newAssigneeId: assigneeId } });
        uow.emit(taskEvent('task-updated', updated));
        await notify(uow, [assigneeId], 'task_assigned', { task_id: id, project_id: task.project_id, title: task.title, actor_id: ctx.actor.id });
        return updated;
      }, { batchKey: `task:${id}` });
    },

    async setStatus(ctx: ActorContext, id: number, status: TaskStatus, expected: ExpectedVersion): Promise<TaskRow> {
      return run(ctx, SET_STATUS, async (uow) => {
        const { task, access, record } = await lockForWork(uow, id, 'CHANGE_TASK_STATUS');
        uow.authorize(projectPolicy.can('workOnTasks', access), 'Task', record);
        checkVersion(expected, task.version);
        if (task.status === status) {
          uow.withoutRecord('unchanged');
          return task;
        }
        if (!canTransition(task.status, status)) {
          throw new DomainError('conflict', 'INVALID_TRANSITION', `A ${task.status} task cannot become ${status}; allowed: ${TRANSITIONS[task.status].join(', ')}`, {
            members: { current_status: task.status, allowed_transitions: TRANSITIONS[task.status] },
          });
        }
        const updated = await repo.updateTask(uow.tx, id, { status });
        uow.audit({ action: 'CHANGE_TASK_STATUS', resourceType: 'TASK', resourceId: id, metadata: { oldStatus: task.status, newStatus: status } });
        uow.emit(taskEvent('task-updated', updated));
        await notify(
          uow,
          [task.created_by, task.assignee_id],
          'task_status_changed',
          { task_id: id, project_id: task.project_id, title: task.title, old_status: task.status, new_status: status, actor_id: ctx.actor.id },
          { aboutProject: task.project_id },
        );
        return updated;
      }, {
        batchKey: `task:${id}`,
        // A member's move that notifies nobody else goes as one statement (repo.SET_TASK_STATUS_ALONE),
        // when it expects one version or none (If-Match naming several is left to the body).
        alone: expected === undefined || expected.length === 1
          ? { change: repo.SET_TASK_STATUS_ALONE, params: [id, status, expected?.[0] ?? null], answer: repo.taskOfRow }
          : undefined,
      });
    },

    async remove(ctx: ActorContext, id: number): Promise<void> {
      await run(ctx, DELETE, async (uow) => {
        const { task, access, record } = await lockForWork(uow, id, 'DELETE_TASK');
        uow.authorize(projectPolicy.can('deleteTask', access, { createdBy: task.created_by }), 'Task', record);
        await repo.deleteTask(uow.tx, id);
        uow.audit({ action: 'DELETE_TASK', resourceType: 'TASK', resourceId: id, metadata: { projectId: task.project_id, title: task.title } });
        uow.emit(taskDeletedEvent(task));
      });
    },
  };
}

export type TasksService = ReturnType<typeof createTasksService>;

/** What leaving a project or being deleted does to a user's tasks (steps wired in src/services.ts). */
export const unassignOnMemberRemoval = async (uow: UnitOfWork, projectId: number, userId: number): Promise<void> => {
  uow.emit(...(await repo.unassignTasks(uow.tx, userId, projectId)).map((t) => taskEvent('task-updated', t)));
};

export const unassignOnUserDeletion = async (uow: UnitOfWork, user: { id: number }): Promise<void> => {
  uow.emit(...(await repo.unassignTasks(uow.tx, user.id, null)).map((t) => taskEvent('task-updated', t)));
};

