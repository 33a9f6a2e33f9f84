// Projects and their members. The creator becomes OWNER; the last OWNER can be neither
// removed nor demoted; removing a member unassigns their tasks in the project (a step the
// tasks module contributes, wired in src/services.ts).
import type { Actor, ActorContext } from '../../context.js';
import type { Tx } from '../../db/database.js';
import type { Deps } from '../../deps.js';
import { authorize } from '../../domain/authorization.js';
import { conflict, notFound } from '../../domain/errors.js';
import { pageOf, type PageRequest } from '../../domain/page.js';
import { checkVersion, type ExpectedVersion } from '../../domain/versions.js';
import { useCase, type UnitOfWork } from '../../use-cases/runner.js';
import { notify } from '../notifications/notifications.writer.js';
import { membershipChanged, projectDeleted } from '../outbox/outbox.control-events.js';
import { findUserById } from '../users/users.repository.js';
import { lockProjectAccess } from './projects.access.js';
import { accessOf, projectPolicy, type ProjectAccess, type ProjectRole } from './projects.policy.js';
import * as repo from './projects.repository.js';
import type { MemberRow, ProjectRow } from './projects.repository.js';

const CREATE = useCase('projects.create', ['CREATE_PROJECT']);
const UPDATE = useCase('projects.update');
const DELETE = useCase('projects.delete', ['DELETE_PROJECT']);
const SET_MEMBER = useCase('projects.setMember', ['ADD_PROJECT_MEMBER', 'CHANGE_PROJECT_MEMBER_ROLE']);
const REMOVE_MEMBER = useCase('projects.removeMember', ['REMOVE_PROJECT_MEMBER']);

/** What another module does, inside the removal's transaction, when a member leaves a project. */
export type MemberRemovalStep = (uow: UnitOfWork, projectId: number, userId: number) => Promise<void>;

export interface ProjectsServiceOptions {
  memberRemovalSteps: MemberRemovalStep[];
}

export function createProjectsService(deps: Deps, { memberRemovalSteps }: ProjectsServiceOptions) {
  const { db, run } = deps;

  /** For reads: a project the caller may see, with their access; 404 otherwise. */
  async function load(actor: Actor, id: number): Promise<{ project: ProjectRow; access: ProjectAccess }> {
    const [project, { role }] = await Promise.all([repo.findProject(db, id), repo.projectAndRole(db, id, actor.id)]);
    const access = accessOf(actor, role);
    if (!project) throw notFound('Project');
    authorize(projectPolicy.can('see', access), 'Project');
    return { project, access };
  }

  /**
   * For member changes and renames: the project locked for a change, and the caller's (and
   * `others`') memberships locked for the decision. 404 when it does not exist.
   */
  async function lockForChange(uow: UnitOfWork, id: number, others: number[] = []) {
    const [project, locked] = await Promise.all([repo.lockProjectForChange(uow.tx, id), lockProjectAccess(uow, { projectId: id }, others)]);
    if (!project) throw notFound('Project');
    return { project, ...locked };
  }

  async function guardLastOwner(tx: Tx, projectId: number, role: ProjectRole | undefined): Promise<void> {
    if (role === 'OWNER' && (await repo.countOwners(tx, projectId)) <= 1) {
      throw conflict('LAST_OWNER', 'The last OWNER of a project can be neither removed nor demoted');
    }
  }

  return {
    get: async (actor: Actor, id: number) => (await load(actor, id)).project,

    async list(viewer: Actor, page: PageRequest) {
      return pageOf(await repo.listProjects(db, viewer.role === 'ADMIN' ? null : viewer.id, page.after, page.limit), page);
    },

    async create(ctx: ActorContext, body: { name: string; description?: string }): Promise<ProjectRow> {
      return run(ctx, CREATE, async (uow) => {
        const name = body.name.trim();
        const id = await repo.insertProject(uow.tx, { name, description: body.description ?? '', createdBy: ctx.actor.id });
        const [, project] = await Promise.all([repo.insertMember(uow.tx, id, ctx.actor.id, 'OWNER'), repo.findProject(uow.tx, id)]);
        // One record per action: creating a project is CREATE_PROJECT, not also ADD_PROJECT_MEMBER.
        uow.audit({ action: 'CREATE_PROJECT', resourceType: 'PROJECT', resourceId: id, metadata: { name } });
        // The creator's open sockets join the new project's room, as a member added later's do.
        uow.emit(membershipChanged(id, ctx.actor.id, 'OWNER'));
        return project!;
      });
    },

    async update(ctx: ActorContext, id: number, body: { name?: string; description?: string }, expected: ExpectedVersion): Promise<ProjectRow> {
      return run(ctx, UPDATE, async (uow) => {
        const { project, access } = await lockForChange(uow, id);
        uow.authorize(projectPolicy.can('manage', access), 'Project');
        checkVersion(expected, project.version);
        const name = body.name?.trim();
        const changed = (name !== undefined && name !== project.name) || (body.description !== undefined && body.description !== project.description);
        if (!changed) return project;
        await repo.bumpProject(uow.tx, id, { name, description: body.description });
        return (await repo.findProject(uow.tx, id))!;
      });
    },

    async remove(ctx: ActorContext, id: number): Promise<void> {
      await run(ctx, DELETE, async (uow) => {
        const [project, { access }] = await Promise.all([repo.lockProjectForDelete(uow.tx, id), lockProjectAccess(uow, { projectId: id })]);
        if (!project) throw notFound('Project');
        const record = { action: 'DELETE_PROJECT', resourceType: 'PROJECT', resourceId: id } as const;
        uow.authorize(projectPolicy.can('manage', access), 'Project', record);
        const taskCount = await repo.countTasks(uow.tx, id);
        await repo.deleteProject(uow.tx, id);
        uow.audit({ ...record, metadata: { name: project.name, taskCount } });
        uow.emit(projectDeleted(id));
      });
    },

    async members(actor: Actor, id: number, page: PageRequest) {
      await load(actor, id);
      return pageOf(await repo.listMembers(db, id, page.after, page.limit), page, (m) => m.user_id);
    },

    async member(actor: Actor, id: number, userId: number): Promise<MemberRow> {
      await load(actor, id);
      const member = await repo.findMember(db, id, userId);
      if (!member) throw notFound('Member');
      return member;
    },

    /** Adds a member (created) or changes their role; setting the role they have changes nothing. */
    async setMember(ctx: ActorContext, id: number, userId: number, role: ProjectRole, expected: ExpectedVersion): Promise<{ created: boolean; member: MemberRow; project: ProjectRow }> {
      return run(ctx, SET_MEMBER, async (uow) => {
        const { project, access, roles } = await lockForChange(uow, id, [userId]);
        const current = roles.get(userId);
        const record = { action: current === undefined ? 'ADD_PROJECT_MEMBER' : 'CHANGE_PROJECT_MEMBER_ROLE', resourceType: 'PROJECT', resourceId: id } as const;
        uow.authorize(projectPolicy.can('manage', access), 'Project', record);
        if (!(await findUserById(uow.tx, userId))) throw notFound('User');
        checkVersion(expected, project.version);
        if (current === role) {
          uow.withoutRecord('unchanged');
          return { created: false, member: (await repo.findMember(uow.tx, id, userId))!, project };
        }
        const actorId = ctx.actor.id;
        if (current === undefined) {
          await repo.insertMember(uow.tx, id, userId, role);
          uow.audit({ ...record, metadata: { userId, role } });
          uow.emit(membershipChanged(id, userId, role));
          await notify(uow, [userId], 'project_member_added', { project_id: id, project_name: project.name, role, actor_id: actorId });
        } else {
          await guardLastOwner(uow.tx, id, current);
          await repo.updateMemberRole(uow.tx, id, userId, role);
          uow.audit({ ...record, metadata: { userId, oldRole: current, newRole: role } });
          uow.emit(membershipChanged(id, userId, role));
        }
        await repo.bumpProject(uow.tx, id);
        const [member, updated] = await Promise.all([repo.findMember(uow.tx, id, userId), repo.findProject(uow.tx, id)]);
        return { created: current === undefined, member: member!, project: updated! };
      });
    },

    async removeMember(ctx: ActorContext, id: number, userId: number): Promise<void> {
      await run(ctx, REMOVE_MEMBER, async (uow) => {
        const { access, roles } = await lockForChange(uow, id, [userId]);
        const record = { action: 'REMOVE_PROJECT_MEMBER', resourceType: 'PROJECT', resourceId: id } as const;
        uow.authorize(projectPolicy.can('removeMember', access, { userId }), 'Project', record);
        const role = roles.get(userId);
        if (role === undefined) throw notFound('Member');
        await guardLastOwner(uow.tx, id, role);
        await repo.deleteMember(uow.tx, id, userId);
        for (const step of memberRemovalSteps) await step(uow, id, userId);
        await repo.bumpProject(uow.tx, id);
        uow.audit({ ...record, metadata: { userId, role } });
        uow.emit(membershipChanged(id, userId, null));
      });
    },
  };
}

export type ProjectsService = ReturnType<typeof createProjectsService>;
