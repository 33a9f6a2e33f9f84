import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { API_PREFIX } from '../../http/conventions.js';
import { sendCachedPage, type PageCache } from '../../http/page-cache.js';
import { pageRequest } from '../../http/pagination.js';
import { expectedVersion, versionEtag } from '../../http/preconditions.js';
import { authedContext } from '../../http/request-context.js';
import { FreeText, Id, IdParams, IfMatchHeader, NoContent, NullableId, Page, PageQuery, StringEnum, Text, Timestamp, errorResponses, named } from '../../http/schemas.js';
import { TASK_STATUSES } from './tasks.status.js';
import { presentTask } from './tasks.presenter.js';
import type { TaskRow } from './tasks.repository.js';
import type { TasksService } from './tasks.service.js';

const security = [{ bearer: [] }];
const Status = named('TaskStatus', StringEnum(TASK_STATUSES, { description: 'TODO → IN_PROGRESS → IN_REVIEW → DONE, or CANCELED (see PUT /tasks/{id}/status)' }), 'IN_PROGRESS');
const Assignee = Type.Union([Id, Type.Null()], { description: 'A member of the project, or null for nobody' });
const ifMatch = IfMatchHeader('task');
const taskEtag = (t: TaskRow) => versionEtag('task', t.id, t.version);

const Task = named(
  'Task',
  Type.Object({
    id: Id,
    project_id: Id,
    title: Text(200),
    description: FreeText(10000),
    status: Status,
    assignee_id: NullableId({ description: 'The member it is assigned to, or null' }),
    created_by: NullableId({ description: 'Its creator; null once that user is deleted' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  }),
  {
    id: 58,
    project_id: 12,
    title: 'Write the launch announcement',
    description: 'Two paragraphs for the blog and a short version for the newsletter.',
    status: 'IN_PROGRESS',
    assignee_id: 9,
    created_by: 7,
    created_at: '2026-11-21T11:20:03.774Z',
    updated_at: '2026-11-22T09:12:45.101Z',
  },
);

const CreateTaskBody = named(
  'CreateTaskRequest',
  Type.Object({ project_id: Id, title: Text(200), description: Type.Optional(FreeText(10000)), assignee_id: Type.Optional(Assignee) }, { additionalProperties: false }),
  { project_id: 12, title: 'Write the launch announcement', description: 'Two paragraphs for the blog and a short version for the newsletter.', assignee_id: 9 },
);
const UpdateTaskBody = named(
  'UpdateTaskRequest',
  Type.Object({ title: Type.Optional(Text(200)), description: Type.Optional(FreeText(10000)) }, { additionalProperties: false, minProperties: 1, description: 'Fields left out keep their value' }),
  { title: 'Write and schedule the launch announcement' },
);
const AssigneeBody = named('TaskAssigneeRequest', Type.Object({ assignee_id: Assignee }, { additionalProperties: false }), { assignee_id: 9 });
const StatusBody = named('TaskStatusRequest', Type.Object({ status: Status }, { additionalProperties: false }), { status: 'IN_REVIEW' });

const TaskQuery = Type.Object(
  {
    project_id: Type.Optional(Id),
    assignee_id: Type.Optional(Id),
    status: Type.Optional(Status),
    q: Type.Optional(FreeText(200, { description: 'Full-text search of title and description (PostgreSQL, simple configuration: whole words)' })),
    ...PageQuery,
  },
  { additionalProperties: false },
);

export const tasksRoutes: FastifyPluginAsyncTypebox<{ tasks: TasksService; pages: PageCache }> = async (app, { tasks, pages }) => {
  app.get('/tasks', {
    schema: {
      operationId: 'listTasks', tags: ['tasks'], summary: 'Tasks of your projects (ADMIN: all), newest first',
      description: "Tasks of the caller's projects; an ADMIN sees all. Filters combine with AND.",
      security, querystring: TaskQuery, response: { 200: Page(Task), ...errorResponses(400, 401) },
    },
    handler: async (request, reply) => {
      const { limit, cursor, ...filters } = request.query;
      const { actor } = authedContext(request);
      const page = pageRequest({ limit, cursor });
      return sendCachedPage(request, reply, pages, actor, (since) => tasks.list(actor, filters, page, since), (ts) => ts.map(presentTask));
    },
  });

  app.post('/tasks', {
    schema: {
      operationId: 'createTask', tags: ['tasks'], summary: 'Create a task in a project you belong to (it starts TODO)',
      description:
        'Project members. A project hidden from the caller is 404 (recorded as a DENIED CREATE_TASK on it); an assignee who is ' +
        'not a member is 400. Writes CREATE_TASK.',
      security, body: CreateTaskBody,
      'x-response-headers': { 201: ['Location', 'ETag'] },
      response: { 201: Task, ...errorResponses(400, 401, 404) },
    },
    handler: async (request, reply) => {
      const task = await tasks.create(authedContext(request), request.body);
      reply.code(201).header('location', `${API_PREFIX}/tasks/${task.id}`).header('etag', taskEtag(task));
      return presentTask(task);
    },
  });

  app.get('/tasks/:id', {
    schema: {
      operationId: 'getTask', tags: ['tasks'], summary: 'A task (project members and ADMINs)',
      description: "Members of the task's project and ADMINs; to anyone else it does not exist (404).",
      security, params: IdParams, response: { 200: Task, ...errorResponses(400, 401, 404) },
    },
    handler: async (request, reply) => {
      const task = await tasks.get(authedContext(request).actor, request.params.id);
      reply.header('etag', taskEtag(task));
      return presentTask(task);
    },
  });

  app.put('/tasks/:id', {
    schema: {
      operationId: 'updateTask', tags: ['tasks'], summary: 'Edit title and description (project members)',
      description: 'Project members. Setting the values it already has changes nothing.',
      security, params: IdParams, headers: ifMatch, body: UpdateTaskBody,
      response: { 200: Task, ...errorResponses(400, 401, 403, 404, 412) },
    },
    handler: async (request, reply) => {
      const task = await tasks.update(authedContext(request), request.params.id, request.body, expectedVersion(request, 'task', request.params.id));
      reply.header('etag', taskEtag(task));
      return presentTask(task);
    },
  });

  app.put('/tasks/:id/assignee', {
    schema: {
      operationId: 'assignTask', tags: ['tasks'], summary: 'Assign to a project member, or to nobody (null)',
      description: 'Project members. A non-member is 400. Writes ASSIGN_TASK and notifies the new assignee when the assignee changes.',
      security, params: IdParams, headers: ifMatch, body: AssigneeBody,
      response: { 200: Task, ...errorResponses(400, 401, 403, 404, 412) },
    },
    handler: async (request, reply) => {
      const task = await tasks.assign(authedContext(request), request.params.id, request.body.assignee_id, expectedVersion(request, 'task', request.params.id));
      reply.header('etag', taskEtag(task));
      return presentTask(task);
    },
  });

  app.put('/tasks/:id/status', {
    schema: {
      operationId: 'setTaskStatus', tags: ['tasks'], summary: 'Move a task through the status machine',
      description: 'TODO→IN_PROGRESS|CANCELED; IN_PROGRESS→TODO|IN_REVIEW|DONE|CANCELED; IN_REVIEW→IN_PROGRESS|DONE|CANCELED; DONE→IN_PROGRESS; CANCELED→TODO. Anything else is 409 INVALID_TRANSITION with allowed_transitions; the current status again is 200 and changes nothing.',
      security, params: IdParams, headers: ifMatch,
      body: StatusBody,
      response: { 200: Task, ...errorResponses(400, 401, 403, 404, 409, 412) },
    },
    handler: async (request, reply) => {
      const task = await tasks.setStatus(authedContext(request), request.params.id, request.body.status, expectedVersion(request, 'task', request.params.id));
      reply.header('etag', taskEtag(task));
      return presentTask(task);
    },
  });

  app.delete('/tasks/:id', {
    schema: {
      operationId: 'deleteTask', tags: ['tasks'], summary: 'Delete a task (its creator, a project OWNER or an ADMIN)',
      description: 'Its creator, an OWNER of its project, or an ADMIN; other members get 403. Writes DELETE_TASK.',
      security, params: IdParams, response: { 204: NoContent, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request, reply) => {
      await tasks.remove(authedContext(request), request.params.id);
      return reply.code(204).send(null);
    },
  });
};
