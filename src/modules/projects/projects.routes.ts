import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { API_PREFIX } from '../../http/conventions.js';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { expectedVersion, versionEtag } from '../../http/preconditions.js';
import { authedContext } from '../../http/request-context.js';
import { IdParams, IfMatchHeader, NoContent, Page, errorResponses } from '../../http/schemas.js';
import { presentMember, presentProject } from './projects.presenter.js';
import type { ProjectRow } from './projects.repository.js';
import { CreateProjectBody, ListQuery, Member, MemberBody, MemberParams, Project, UpdateProjectBody } from './projects.schemas.js';
import type { ProjectsService } from './projects.service.js';

const security = [{ bearer: [] }];
const ifMatch = IfMatchHeader('project');

const projectEtag = (p: ProjectRow) => versionEtag('project', p.id, p.version);

export const projectsRoutes: FastifyPluginAsyncTypebox<{ projects: ProjectsService }> = async (app, { projects }) => {
  app.get('/projects', {
    schema: {
      operationId: 'listProjects', tags: ['projects'], summary: 'Projects you belong to (ADMIN: all), newest first',
      description: 'The projects the caller is a member of; an ADMIN sees every project.',
      security, querystring: ListQuery, response: { 200: Page(Project), ...errorResponses(400, 401) },
    },
    handler: async (request, reply) => {
      const page = await projects.list(authedContext(request).actor, pageRequest(request.query));
      return sendPage(request, reply, page, (ps) => ps.map(presentProject));
    },
  });

  app.post('/projects', {
    schema: {
      operationId: 'createProject', tags: ['projects'], summary: 'Create a project; you become its OWNER',
      description: 'Any authenticated user. Writes CREATE_PROJECT (and no ADD_PROJECT_MEMBER for the creator).',
      security, body: CreateProjectBody, response: { 201: Project, ...errorResponses(400, 401) },
      'x-response-headers': { 201: ['Location', 'ETag'] },
    },
    handler: async (request, reply) => {
      const project = await projects.create(authedContext(request), request.body);
      reply.code(201).header('location', `${API_PREFIX}/projects/${project.id}`).header('etag', projectEtag(project));
      return presentProject(project);
    },
  });

  app.get('/projects/:id', {
    schema: {
      operationId: 'getProject', tags: ['projects'], summary: 'A project (members and ADMINs)',
      description: "Members and ADMINs; to anyone else it does not exist (404). Its ETag changes with any change to the project or its members.",
      security, params: IdParams, response: { 200: Project, ...errorResponses(400, 401, 404) },
    },
    handler: async (request, reply) => {
      const project = await projects.get(authedContext(request).actor, request.params.id);
      reply.header('etag', projectEtag(project));
      return presentProject(project);
    },
  });

  app.put('/projects/:id', {
    schema: {
      operationId: 'updateProject', tags: ['projects'], summary: 'Update a project (OWNER or ADMIN)',
      description: 'OWNERs and ADMINs; a MEMBER gets 403. Setting the values it already has changes nothing.',
      security, params: IdParams, headers: ifMatch, body: UpdateProjectBody,
      response: { 200: Project, ...errorResponses(400, 401, 403, 404, 412) },
    },
    handler: async (request, reply) => {
      const project = await projects.update(authedContext(request), request.params.id, request.body, expectedVersion(request, 'project', request.params.id));
      reply.header('etag', projectEtag(project));
      return presentProject(project);
    },
  });

  app.delete('/projects/:id', {
    schema: {
      operationId: 'deleteProject', tags: ['projects'], summary: 'Delete a project with its tasks and messages (OWNER or ADMIN)',
      description: 'OWNERs and ADMINs. Writes one DELETE_PROJECT record (with the number of tasks), none for the tasks.',
      security, params: IdParams,
      response: { 204: NoContent, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request, reply) => {
      await projects.remove(authedContext(request), request.params.id);
      return reply.code(204).send(null);
    },
  });

  app.get('/projects/:id/members', {
    schema: {
      operationId: 'listProjectMembers', tags: ['projects'], summary: "A project's members, by user id",
      description: 'Members and ADMINs. Ordered by user id, ascending (the one list that is not newest first).',
      security, params: IdParams, querystring: ListQuery,
      response: { 200: Page(Member), ...errorResponses(400, 401, 404) },
    },
    handler: async (request, reply) => {
      const page = await projects.members(authedContext(request).actor, request.params.id, pageRequest(request.query));
      // Members page forward by user id; the cursor carries the last user id of the page.
      return sendPage(request, reply, page, (ms) => ms.map(presentMember));
    },
  });

  app.get('/projects/:id/members/:userId', {
    schema: {
      operationId: 'getProjectMember', tags: ['projects'], summary: 'One member of a project (members and ADMINs)',
      description: 'Members and ADMINs. 404 when the project is hidden from the caller or the user is not a member.',
      security, params: MemberParams, response: { 200: Member, ...errorResponses(400, 401, 404) },
    },
    handler: async (request) => {
      return presentMember(await projects.member(authedContext(request).actor, request.params.id, request.params.userId));
    },
  });

  app.put('/projects/:id/members/:userId', {
    schema: {
      operationId: 'setProjectMember',
      tags: ['projects'],
      summary: 'Add a member (201) or change their role (200) (OWNER or ADMIN)',
      description:
        'OWNERs and ADMINs. A new member writes ADD_PROJECT_MEMBER (201, with Location); a role change writes ' +
        'CHANGE_PROJECT_MEMBER_ROLE (200). Demoting the last OWNER is 409 LAST_OWNER. Setting the role a member already has ' +
        "changes nothing. If-Match and the ETag answered are the project's.",
      'x-response-headers': { 201: ['Location'] },
      security, params: MemberParams, headers: ifMatch, body: MemberBody,
      response: { 200: Member, 201: Member, ...errorResponses(400, 401, 403, 404, 409, 412) },
    },
    handler: async (request, reply) => {
      const { created, member, project } = await projects.setMember(
        authedContext(request), request.params.id, request.params.userId, request.body.role, expectedVersion(request, 'project', request.params.id),
      );
      reply.header('etag', projectEtag(project));
      if (created) reply.code(201).header('location', `${API_PREFIX}/projects/${project.id}/members/${member.user_id}`);
      return presentMember(member);
    },
  });

  app.delete('/projects/:id/members/:userId', {
    schema: {
      operationId: 'removeProjectMember', tags: ['projects'], summary: 'Remove a member (OWNER, ADMIN, or the member themself); their tasks here are unassigned',
      description: 'OWNERs, ADMINs, or the member leaving. The last OWNER cannot be removed (409 LAST_OWNER). Writes REMOVE_PROJECT_MEMBER.',
      security, params: MemberParams,
      response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 409) },
    },
    handler: async (request, reply) => {
      await projects.removeMember(authedContext(request), request.params.id, request.params.userId);
      return reply.code(204).send(null);
    },
  });
};
