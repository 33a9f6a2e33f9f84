import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { API_PREFIX } from '../../http/conventions.js';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { expectedVersion, versionEtag } from '../../http/preconditions.js';
import { authedContext } from '../../http/request-context.js';
import { FreeText, Id, IdParams, IfMatchHeader, NoContent, NullableInteger, Page, PageQuery, StringEnum, Text, Timestamp, errorResponses } from '../../http/schemas.js';
import { TASK_STATUSES } from './task-status.js';
import { presentTask } from './tasks.presenter.js';
import type { TaskRow } from './tasks.repository.js';
import type { TasksService } from './tasks.service.js';

const security = [{ bearer: [] }];
const Status = StringEnum(TASK_STATUSES);
const Assignee = Type.Union([Id, Type.Null()]);
const ifMatch = IfMatchHeader('task');
const taskEtag = (t: TaskRow) => versionEtag('task', t.id, t.version);

const Task = Type.Object({
  id: Type.Integer(),
  project_id: Type.Integer(),
  title: Type.String(),
  description: Type.String(),
  status: Status,
  assignee_id: NullableInteger(),
  created_by: NullableInteger(),
  created_at: Timestamp,
  updated_at: Timestamp,
});

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

export const tasksRoutes: FastifyPluginAsyncTypebox<{ tasks: TasksService }> = async (app, { tasks }) => {
  app.get('/tasks', {
    schema: { tags: ['tasks'], summary: 'Tasks of your projects (ADMIN: all), newest first', security, querystring: TaskQuery, response: { 200: Page(Task), ...errorResponses(400, 401) } },
    handler: async (request, reply) => {
      const { limit, cursor, ...filters } = request.query;
      const page = await tasks.list(authedContext(request).actor, filters, pageRequest({ limit, cursor }));
      return sendPage(request, reply, page, (ts) => ts.map(presentTask));
    },
  });

  app.post('/tasks', {
    schema: {
      tags: ['tasks'], summary: 'Create a task in a project you belong to (it starts TODO)', security,
      body: Type.Object({ project_id: Id, title: Text(200), description: Type.Optional(FreeText(10000)), assignee_id: Type.Optional(Assignee) }, { additionalProperties: false }),
      response: { 201: Task, ...errorResponses(400, 401, 404) },
    },
    handler: async (request, reply) => {
      const task = await tasks.create(authedContext(request), request.body);
      reply.code(201).header('location', `${API_PREFIX}/tasks/${task.id}`).header('etag', taskEtag(task));
      return presentTask(task);
    },
  });

  app.get('/tasks/:id', {
    schema: { tags: ['tasks'], summary: 'A task (project members and ADMINs)', security, params: IdParams, response: { 200: Task, ...errorResponses(400, 401, 404) } },
    handler: async (request, reply) => {
      const task = await tasks.get(authedContext(request).actor, request.params.id);
      reply.header('etag', taskEtag(task));
      return presentTask(task);
    },
  });

  app.put('/tasks/:id', {
    schema: {
      tags: ['tasks'], summary: 'Edit title and description (project members)', security, params: IdParams, headers: ifMatch,
      body: Type.Object({ title: Type.Optional(Text(200)), description: Type.Optional(FreeText(10000)) }, { additionalProperties: false, minProperties: 1 }),
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
      tags: ['tasks'], summary: 'Assign to a project member, or to nobody (null)', security, params: IdParams, headers: ifMatch,
      body: Type.Object({ assignee_id: Assignee }, { additionalProperties: false }),
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
      tags: ['tasks'], summary: 'Move a task through the status machine',
      description: 'TODO→IN_PROGRESS|CANCELED; IN_PROGRESS→TODO|IN_REVIEW|DONE|CANCELED; IN_REVIEW→IN_PROGRESS|DONE|CANCELED; DONE→IN_PROGRESS; CANCELED→TODO. Anything else is 409 INVALID_TRANSITION with allowed_transitions; the current status again is 200 and changes nothing.',
      security, params: IdParams, headers: ifMatch,
      body: Type.Object({ status: Status }, { additionalProperties: false }),
      response: { 200: Task, ...errorResponses(400, 401, 403, 404, 409, 412) },
    },
    handler: async (request, reply) => {
      const task = await tasks.setStatus(authedContext(request), request.params.id, request.body.status, expectedVersion(request, 'task', request.params.id));
      reply.header('etag', taskEtag(task));
      return presentTask(task);
    },
  });

  app.delete('/tasks/:id', {
    schema: { tags: ['tasks'], summary: 'Delete a task (its creator, a project OWNER or an ADMIN)', security, params: IdParams, response: { 204: NoContent, ...errorResponses(400, 401, 403, 404) } },
    handler: async (request, reply) => {
      await tasks.remove(authedContext(request), request.params.id);
      return reply.code(204).send(null);
    },
  });
};
