import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { API_PREFIX } from '../../http/conventions.js';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { expectedVersion } from '../../http/preconditions.js';
import { authedContext } from '../../http/request-context.js';
import { IdParams, IfMatchHeader, NoContent, Page, errorResponses } from '../../http/schemas.js';
import { USER_VIEWS, presentUser, userEtag } from './users.presenter.js';
import { ActiveBody, CreateUserBody, RoleBody, UpdateUserBody, User, UserListQuery } from './users.schemas.js';
import type { UsersService } from './users.service.js';

const security = [{ bearer: [] }];
const ifMatchHeader = IfMatchHeader('user');
const expectedUserVersion = (request: Parameters<typeof expectedVersion>[0], id: number) => expectedVersion(request, 'user', id, USER_VIEWS);

export const usersRoutes: FastifyPluginAsyncTypebox<{ users: UsersService }> = async (app, { users }) => {
  app.get('/users', {
    schema: { tags: ['users'], summary: 'List users (newest first)', security, querystring: UserListQuery, response: { 200: Page(User), ...errorResponses(400, 401) } },
    handler: async (request, reply) => {
      const { actor } = authedContext(request);
      const { limit, cursor, ...filters } = request.query;
      const page = await users.list(actor, filters, pageRequest({ limit, cursor }));
      return sendPage(request, reply, page, (us) => us.map((u) => presentUser(u, actor)));
    },
  });

  app.post('/users', {
    schema: { tags: ['users'], summary: 'Create a user (ADMIN)', security, body: CreateUserBody, response: { 201: User, ...errorResponses(400, 401, 403, 409) } },
    handler: async (request, reply) => {
      const ctx = authedContext(request);
      const user = await users.create(ctx, request.body);
      reply.code(201).header('location', `${API_PREFIX}/users/${user.id}`).header('etag', userEtag(user, ctx.actor));
      return presentUser(user, ctx.actor);
    },
  });

  app.get('/users/:id', {
    schema: { tags: ['users'], summary: 'Get a user', security, params: IdParams, response: { 200: User, ...errorResponses(400, 401, 404) } },
    handler: async (request, reply) => {
      const { actor } = authedContext(request);
      const user = await users.get(request.params.id);
      reply.header('etag', userEtag(user, actor));
      return presentUser(user, actor);
    },
  });

  app.put('/users/:id', {
    schema: {
      tags: ['users'],
      summary: 'Update a user (ADMIN or self)',
      description: 'A change of email writes UPDATE_USER_EMAIL; setting the values the user already has changes nothing.',
      security, params: IdParams, headers: ifMatchHeader, body: UpdateUserBody,
      response: { 200: User, ...errorResponses(400, 401, 403, 404, 409, 412, 429) },
    },
    handler: async (request, reply) => {
      const ctx = authedContext(request);
      const user = await users.update(ctx, request.params.id, request.body, expectedUserVersion(request, request.params.id));
      reply.header('etag', userEtag(user, ctx.actor));
      return presentUser(user, ctx.actor);
    },
  });

  app.put('/users/:id/role', {
    schema: {
      tags: ['users'], summary: "Set a user's role (ADMIN)", security, params: IdParams, headers: ifMatchHeader, body: RoleBody,
      response: { 200: User, ...errorResponses(400, 401, 403, 404, 409, 412) },
    },
    handler: async (request, reply) => {
      const ctx = authedContext(request);
      const user = await users.setRole(ctx, request.params.id, request.body.role, expectedUserVersion(request, request.params.id));
      reply.header('etag', userEtag(user, ctx.actor));
      return presentUser(user, ctx.actor);
    },
  });

  app.put('/users/:id/active', {
    schema: {
      tags: ['users'], summary: 'Activate or deactivate a user (ADMIN)',
      description: "Deactivation revokes the user's sessions at once.",
      security, params: IdParams, headers: ifMatchHeader, body: ActiveBody,
      response: { 200: User, ...errorResponses(400, 401, 403, 404, 409, 412) },
    },
    handler: async (request, reply) => {
      const ctx = authedContext(request);
      const user = await users.setActive(ctx, request.params.id, request.body.active, expectedUserVersion(request, request.params.id));
      reply.header('etag', userEtag(user, ctx.actor));
      return presentUser(user, ctx.actor);
    },
  });

  app.delete('/users/:id', {
    schema: { tags: ['users'], summary: 'Delete a user (ADMIN)', security, params: IdParams, response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 409) } },
    handler: async (request, reply) => {
      await users.remove(authedContext(request), request.params.id);
      return reply.code(204).send(null);
    },
  });
};
