// Tasks live in projects: members create, edit, assign and move them through the status
// machine; the creator, a project OWNER or an ADMIN may delete them.
import type { Actor, RequestContext } from '../../context.js';
import type { Queryable } from '../../db/database.js';
import type { Deps } from '../../deps.js';
import { AppError, invalid, notFound } from '../../http/errors.js';
import { pageRequest } from '../../http/pagination.js';
import { checkIfMatch, type IfMatch } from '../../http/preconditions.js';
import type { AuditAction } from '../audit/audit.writer.js';
import { notify } from '../notifications/notifications.writer.js';
import { addEvents } from '../outbox/outbox.js';
import { accessOf, projectPolicy, type ProjectAccess } from '../projects/projects.policy.js';
import { memberRole, projectAndRole } from '../projects/projects.repository.js';
import { refuse } from '../refusal.js';
import { TRANSITIONS, canTransition, type TaskStatus } from './task-status.js';
import { taskEvent } from './tasks.presenter.js';
import * as repo from './tasks.repository.js';
import type { TaskRow } from './tasks.repository.js';

type Ctx = RequestContext & { actor: Actor };

export function createTasksService(deps: Deps) {
  const { db, audit } = deps;

  /**
   * Loads a task whose project the caller may see; 404 otherwise (recorded as DENIED when
   * the refused action is audited).
   */
  async function load(ctx: Ctx, id: number, deniedAction?: AuditAction): Promise<{ task: TaskRow; access: ProjectAccess }> {
    const found = await repo.findTaskWithRole(db, id, ctx.actor.id);
    if (!found) throw notFound('Task');
    const { task, role } = found;
    const access = accessOf(ctx.actor, role);
    if (!projectPolicy.see(access)) {
      await refuse(deps, ctx, { status: 404, what: 'Task' }, deniedAction && { action: deniedAction, resourceType: 'TASK', resourceId: id });
    }
    return { task, access };
  }

  async function assertAssignable(q: Queryable, projectId: number, assigneeId: number | null) {
    if (assigneeId === null) return;
    if ((await memberRole(q, projectId, assigneeId)) === undefined) {
      throw invalid('/assignee_id', 'must be a member of the project');
    }
  }

  return {
    get: async (ctx: Ctx, id: number) => (await load(ctx, id)).task,

    async list(actor: Actor, query: { project_id?: number; assignee_id?: number; status?: TaskStatus; q?: string; limit?: number; cursor?: string }) {
      const page = pageRequest(query);
      // An empty or blank search (`?q=`) is no filter, not a search that matches nothing.
      const q = query.q?.trim() || undefined;
      const rows = await repo.listTasks(db, { ...query, q, memberId: actor.role === 'ADMIN' ? null : actor.id }, page.beforeId, page.limit);
      return { rows, page };
    },

    async create(ctx: Ctx, body: { project_id: number; title: string; description?: string; assignee_id?: number | null }): Promise<TaskRow> {
      const projectId = body.project_id;
      const { exists, role } = await projectAndRole(db, projectId, ctx.actor.id);
      if (!exists) throw notFound('Project');
      if (!projectPolicy.workOnTasks(accessOf(ctx.actor, role))) {
        // A task in a project the caller cannot see: 404, recorded as DENIED CREATE_TASK on that project.
        await refuse(deps, ctx, { status: 404, what: 'Project' }, { action: 'CREATE_TASK', resourceType: 'PROJECT', resourceId: projectId });
      }
      const assigneeId = body.assignee_id ?? null;
      return db.transaction(async (tx) => {
        // No lock on the project: the task's foreign key holds the project (KEY SHARE) against a
        // concurrent deletion, and taking FOR UPDATE here would serialize every creation in it.
        await assertAssignable(tx, projectId, assigneeId);
        const task = await repo.insertTask(tx, { projectId, title: body.title.trim(), description: body.description ?? '', assigneeId, createdBy: ctx.actor.id });
        audit.record(tx, ctx, { action: 'CREATE_TASK', resourceType: 'TASK', resourceId: task.id, metadata: { projectId, title: task.title, assigneeId } }, [taskEvent('task-created', task)]);
        await notify(tx, ctx.actor.id, [assigneeId], 'task_assigned', { task_id: task.id, project_id: projectId, title: task.title, actor_id: ctx.actor.id });
        return task;
      });
    },

    async update(ctx: Ctx, id: number, body: { title?: string; description?: string }, ifMatch: IfMatch): Promise<TaskRow> {
      const { access } = await load(ctx, id);
      if (!projectPolicy.workOnTasks(access)) await refuse(deps, ctx, { status: 403 });
      return db.transaction(async (tx) => {
        const task = await repo.findTask(tx, id, { forUpdate: true });
        if (!task) throw notFound('Task');
        checkIfMatch(ifMatch, 'task', id, task.version);
        const title = body.title?.trim();
        const changed = (title !== undefined && title !== task.title) || (body.description !== undefined && body.description !== task.description);
        if (!changed) return task;
        const updated = await repo.updateTask(tx, id, { title, description: body.description });
        addEvents(tx, [taskEvent('task-updated', updated)]);
        return updated;
      });
    },

    async assign(ctx: Ctx, id: number, assigneeId: number | null, ifMatch: IfMatch): Promise<TaskRow> {
      const { access } = await load(ctx, id, 'ASSIGN_TASK');
      if (!projectPolicy.workOnTasks(access)) await refuse(deps, ctx, { status: 403 }, { action: 'ASSIGN_TASK', resourceType: 'TASK', resourceId: id });
      return db.transaction(async (tx) => {
        const task = await repo.findTask(tx, id, { forUpdate: true });
        if (!task) throw notFound('Task');
        checkIfMatch(ifMatch, 'task', id, task.version);
        if (task.assignee_id === assigneeId) return task;
        await assertAssignable(tx, task.project_id, assigneeId);
        const updated = await repo.updateTask(tx, id, { assignee_id: assigneeId });
        audit.record(tx, ctx, { action: 'ASSIGN_TASK', resourceType: 'TASK', resourceId: id, metadata: { oldAssigneeId: task.assignee_id, newAssigneeId: assigneeId } }, [taskEvent('task-updated', updated)]);
        await notify(tx, ctx.actor.id, [assigneeId], 'task_assigned', { task_id: id, project_id: task.project_id, title: task.title, actor_id: ctx.actor.id });
        return updated;
      });
    },

    async setStatus(ctx: Ctx, id: number, status: TaskStatus, ifMatch: IfMatch): Promise<TaskRow> {
      const { access } = await load(ctx, id, 'CHANGE_TASK_STATUS');
      if (!projectPolicy.workOnTasks(access)) await refuse(deps, ctx, { status: 403 }, { action: 'CHANGE_TASK_STATUS', resourceType: 'TASK', resourceId: id });
      return db.transaction(async (tx) => {
        const task = await repo.findTask(tx, id, { forUpdate: true });
        if (!task) throw notFound('Task');
        checkIfMatch(ifMatch, 'task', id, task.version);
        if (task.status === status) return task;
        if (!canTransition(task.status, status)) {
          throw new AppError(409, 'INVALID_TRANSITION', `A ${task.status} task cannot become ${status}; allowed: ${TRANSITIONS[task.status].join(', ')}`, {
            members: { current_status: task.status, allowed_transitions: TRANSITIONS[task.status] },
          });
        }
        const updated = await repo.updateTask(tx, id, { status });
        audit.record(tx, ctx, { action: 'CHANGE_TASK_STATUS', resourceType: 'TASK', resourceId: id, metadata: { oldStatus: task.status, newStatus: status } }, [taskEvent('task-updated', updated)]);
        await notify(tx, ctx.actor.id, [task.created_by, task.assignee_id], 'task_status_changed', {
          task_id: id, project_id: task.project_id, title: task.title, old_status: task.status, new_status: status, actor_id: ctx.actor.id,
        });
        return updated;
      });
    },

    async remove(ctx: Ctx, id: number): Promise<void> {
      const { task, access } = await load(ctx, id, 'DELETE_TASK');
      if (!projectPolicy.deleteTask(access, ctx.actor, task)) {
        await refuse(deps, ctx, { status: 403 }, { action: 'DELETE_TASK', resourceType: 'TASK', resourceId: id });
      }
      await db.transaction(async (tx) => {
        const locked = await repo.findTask(tx, id, { forUpdate: true });
        if (!locked) throw notFound('Task');
        await tx.query('DELETE FROM tasks WHERE id = $1', [id]);
        audit.record(tx, ctx, { action: 'DELETE_TASK', resourceType: 'TASK', resourceId: id, metadata: { projectId: locked.project_id, title: locked.title } }, [
          { name: 'task-deleted', room: `project:${locked.project_id}`, payload: { id, project_id: locked.project_id } },
        ]);
      });
    },
  };
}

export type TasksService = ReturnType<typeof createTasksService>;
