// Projects and their members. The creator becomes OWNER; the last OWNER can be neither
// removed nor demoted; removing a member unassigns their tasks in the project.
import type { Actor, RequestContext } from '../../context.js';
import type { Tx } from '../../db/database.js';
import type { Deps } from '../../deps.js';
import { conflict, notFound } from '../../http/errors.js';
import { pageRequest } from '../../http/pagination.js';
import { checkIfMatch, type IfMatch } from '../../http/preconditions.js';
import { notify } from '../notifications/notifications.writer.js';
import { refuse } from '../refusal.js';
import { taskEvent } from '../tasks/tasks.presenter.js';
import { TASK_COLUMNS, type TaskRow } from '../tasks/tasks.repository.js';
import { findUserById } from '../users/users.repository.js';
import { accessOf, projectPolicy, type ProjectAccess, type ProjectRole } from './projects.policy.js';
import * as repo from './projects.repository.js';
import type { ProjectRow } from './projects.repository.js';

type Ctx = RequestContext & { actor: Actor };

export function createProjectsService(deps: Deps) {
  const { db, audit } = deps;

  /** Loads a project the caller may see, with their access; 404 (optionally audited) otherwise. */
  async function load(ctx: Ctx, id: number, deniedAction?: Parameters<typeof audit.record>[2]['action']): Promise<{ project: ProjectRow; access: ProjectAccess }> {
    const project = await repo.findProject(db, id);
    if (!project) throw notFound('Project');
    const access = accessOf(ctx.actor, await repo.memberRole(db, id, ctx.actor.id));
    if (!projectPolicy.see(access)) {
      await refuse(deps, ctx, { status: 404, what: 'Project' }, deniedAction && { action: deniedAction, resourceType: 'PROJECT', resourceId: id });
    }
    return { project, access };
  }

  async function lockProject(tx: Tx, id: number): Promise<ProjectRow> {
    const project = await repo.findProject(tx, id, { forUpdate: true });
    if (!project) throw notFound('Project');
    return project;
  }

  async function guardLastOwner(tx: Tx, projectId: number, role: ProjectRole | undefined): Promise<void> {
    if (role === 'OWNER' && (await repo.countOwners(tx, projectId)) <= 1) {
      throw conflict('LAST_OWNER', 'The last OWNER of a project can be neither removed nor demoted');
    }
  }

  return {
    load,

    async list(actor: Actor, query: { limit?: number; cursor?: string }) {
      const page = pageRequest(query);
      const rows = await repo.listProjects(db, actor.role === 'ADMIN' ? null : actor.id, page.beforeId, page.limit);
      return { rows, page };
    },

    async create(ctx: Ctx, body: { name: string; description?: string }): Promise<ProjectRow> {
      return db.transaction(async (tx) => {
        const id = await repo.insertProject(tx, { name: body.name.trim(), description: body.description ?? '', createdBy: ctx.actor.id });
        await tx.query(`INSERT INTO project_members (project_id, user_id, role) VALUES ($1, $2, 'OWNER')`, [id, ctx.actor.id]);
        // One record per action: creating a project is CREATE_PROJECT, not also ADD_PROJECT_MEMBER.
        audit.record(tx, ctx, { action: 'CREATE_PROJECT', resourceType: 'PROJECT', resourceId: id, metadata: { name: body.name.trim() } });
        return (await repo.findProject(tx, id))!;
      });
    },

    async update(ctx: Ctx, id: number, body: { name?: string; description?: string }, ifMatch: IfMatch): Promise<ProjectRow> {
      const { access } = await load(ctx, id);
      if (!projectPolicy.manage(access)) await refuse(deps, ctx, { status: 403 });
      return db.transaction(async (tx) => {
        const project = await lockProject(tx, id);
        checkIfMatch(ifMatch, 'project', id, project.version);
        const name = body.name?.trim();
        const changed = (name !== undefined && name !== project.name) || (body.description !== undefined && body.description !== project.description);
        if (!changed) return project;
        await repo.bumpProject(tx, id, { name, description: body.description });
        return (await repo.findProject(tx, id))!;
      });
    },

    async remove(ctx: Ctx, id: number): Promise<void> {
      const { access } = await load(ctx, id, 'DELETE_PROJECT');
      if (!projectPolicy.manage(access)) await refuse(deps, ctx, { status: 403 }, { action: 'DELETE_PROJECT', resourceType: 'PROJECT', resourceId: id });
      await db.transaction(async (tx) => {
        const project = await lockProject(tx, id);
        const tasks = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks WHERE project_id = $1', [id]);
        await tx.query('DELETE FROM projects WHERE id = $1', [id]);
        audit.record(tx, ctx, { action: 'DELETE_PROJECT', resourceType: 'PROJECT', resourceId: id, metadata: { name: project.name, taskCount: tasks[0]!.n } });
      });
    },

    async members(ctx: Ctx, id: number, query: { limit?: number; cursor?: string }) {
      await load(ctx, id);
      const page = pageRequest(query);
      const rows = await repo.listMembers(db, id, page.beforeId, page.limit);
      return { rows, page };
    },

    async member(ctx: Ctx, id: number, userId: number): Promise<repo.MemberRow> {
      await load(ctx, id);
      const rows = await db.query<repo.MemberRow>('SELECT user_id, role, added_at FROM project_members WHERE project_id = $1 AND user_id = $2', [id, userId]);
      if (!rows[0]) throw notFound('Member');
      return rows[0];
    },

    /** Adds a member (201) or changes their role (200); setting the same role changes nothing. */
    async setMember(ctx: Ctx, id: number, userId: number, role: ProjectRole, ifMatch: IfMatch): Promise<{ created: boolean; member: repo.MemberRow; project: ProjectRow }> {
      const existingRole = await repo.memberRole(db, id, userId);
      const action = existingRole === undefined ? 'ADD_PROJECT_MEMBER' : 'CHANGE_PROJECT_MEMBER_ROLE';
      const { access } = await load(ctx, id, action);
      if (!projectPolicy.manage(access)) await refuse(deps, ctx, { status: 403 }, { action, resourceType: 'PROJECT', resourceId: id });
      const user = await findUserById(db, userId);
      if (!user) throw notFound('User');
      return db.transaction(async (tx) => {
        const project = await lockProject(tx, id);
        checkIfMatch(ifMatch, 'project', id, project.version);
        const current = await repo.memberRole(tx, id, userId);
        if (current === role) {
          const member = (await tx.query<repo.MemberRow>('SELECT user_id, role, added_at FROM project_members WHERE project_id = $1 AND user_id = $2', [id, userId]))[0]!;
          return { created: false, member, project };
        }
        if (current === undefined) {
          await tx.query('INSERT INTO project_members (project_id, user_id, role) VALUES ($1, $2, $3)', [id, userId, role]);
          audit.record(tx, ctx, { action: 'ADD_PROJECT_MEMBER', resourceType: 'PROJECT', resourceId: id, metadata: { userId, role } }, [
            { name: 'membership-changed', room: `user:${userId}`, payload: { project_id: id, user_id: userId, role } },
          ]);
          await notify(tx, ctx.actor.id, [userId], 'project_member_added', { project_id: id, project_name: project.name, role, actor_id: ctx.actor.id });
        } else {
          await guardLastOwner(tx, id, current);
          await tx.query('UPDATE project_members SET role = $3 WHERE project_id = $1 AND user_id = $2', [id, userId, role]);
          audit.record(tx, ctx, { action: 'CHANGE_PROJECT_MEMBER_ROLE', resourceType: 'PROJECT', resourceId: id, metadata: { userId, oldRole: current, newRole: role } });
        }
        await repo.bumpProject(tx, id);
        const member = (await tx.query<repo.MemberRow>('SELECT user_id, role, added_at FROM project_members WHERE project_id = $1 AND user_id = $2', [id, userId]))[0]!;
        return { created: current === undefined, member, project: (await repo.findProject(tx, id))! };
      });
    },

    async removeMember(ctx: Ctx, id: number, userId: number): Promise<void> {
      const { access } = await load(ctx, id, 'REMOVE_PROJECT_MEMBER');
      if (!projectPolicy.removeMember(access, ctx.actor, userId)) {
        await refuse(deps, ctx, { status: 403 }, { action: 'REMOVE_PROJECT_MEMBER', resourceType: 'PROJECT', resourceId: id });
      }
      await db.transaction(async (tx) => {
        await lockProject(tx, id);
        const role = await repo.memberRole(tx, id, userId);
        if (role === undefined) throw notFound('Member');
        await guardLastOwner(tx, id, role);
        await tx.query('DELETE FROM project_members WHERE project_id = $1 AND user_id = $2', [id, userId]);
        const unassigned = await tx.query<TaskRow>(
          `UPDATE tasks SET assignee_id = NULL, version = version + 1, updated_at = now()
            WHERE project_id = $1 AND assignee_id = $2 RETURNING ${TASK_COLUMNS}`,
          [id, userId],
        );
        await repo.bumpProject(tx, id);
        audit.record(tx, ctx, { action: 'REMOVE_PROJECT_MEMBER', resourceType: 'PROJECT', resourceId: id, metadata: { userId, role } }, [
          { name: 'membership-changed', room: `user:${userId}`, payload: { project_id: id, user_id: userId, role: null } },
          ...unassigned.map((t) => taskEvent('task-updated', t)),
        ]);
      });
    },
  };
}

export type ProjectsService = ReturnType<typeof createProjectsService>;
