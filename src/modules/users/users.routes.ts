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
    schema: {
      operationId: 'listUsers', tags: ['users'], summary: 'List users (newest first)',
      description: 'Any authenticated user. Filters combine with AND; `q` matches names, and for ADMINs also emails. Email is shown only to ADMINs and to the user themself.',
      security, querystring: UserListQuery, response: { 200: Page(User), ...errorResponses(400, 401) },
    },
    handler: async (request, reply) => {
      const { actor } = authedContext(request);
      const { limit, cursor, ...filters } = request.query;
      const page = await users.list(actor, filters, pageRequest({ limit, cursor }));
      return sendPage(request, reply, page, (us) => us.map((u) => presentUser(u, actor)));
    },
  });

  app.post('/users', {
    schema: {
      operationId: 'createUser', tags: ['users'], summary: 'Create a user (ADMIN)',
      description: 'ADMIN only (anyone else: 403, recorded as a DENIED CREATE_USER). An email already taken is 409 EMAIL_TAKEN. Writes CREATE_USER.',
      security, body: CreateUserBody, response: { 201: User, ...errorResponses(400, 401, 403, 409) },
      'x-response-headers': { 201: ['Location', 'ETag'] },
    },
    handler: async (request, reply) => {
      const ctx = authedContext(request);
      const user = await users.create(ctx, request.body);
      reply.code(201).header('location', `${API_PREFIX}/users/${user.id}`).header('etag', userEtag(user, ctx.actor));
      return presentUser(user, ctx.actor);
    },
  });

  app.get('/users/:id', {
    schema: {
      operationId: 'getUser', tags: ['users'], summary: 'Get a user',
      description: 'Any authenticated user. Email is shown only to ADMINs and to the user themself; the two views carry different ETags.',
      security, params: IdParams, response: { 200: User, ...errorResponses(400, 401, 404) },
    },
    handler: async (request, reply) => {
      const { actor } = authedContext(request);
      const user = await users.get(request.params.id);
      reply.header('etag', userEtag(user, actor));
      return presentUser(user, actor);
    },
  });

  app.put('/users/:id', {
    schema: {
      operationId: 'updateUser',
      tags: ['users'],
      summary: 'Update a user (ADMIN or self)',
      description:
        'An ADMIN, or the user themself. Changing your own email needs current_password (a wrong one is 403 and counts toward the ' +
        'login throttle). A change of email writes UPDATE_USER_EMAIL; setting the values the user already has changes nothing.',
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
      operationId: 'setUserRole', tags: ['users'], summary: "Set a user's role (ADMIN)",
      description: 'ADMIN only. The last active ADMIN cannot be demoted (409 LAST_ADMIN). Writes CHANGE_USER_ROLE when the role changes; a demoted user is downgraded at once.',
      security, params: IdParams, headers: ifMatchHeader, body: RoleBody,
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
      operationId: 'setUserActive', tags: ['users'], summary: 'Activate or deactivate a user (ADMIN)',
      description:
        "ADMIN only. Deactivation revokes the user's sessions and disconnects their sockets at once; the last active ADMIN cannot be " +
        'deactivated (409 LAST_ADMIN). Writes DEACTIVATE_USER or ACTIVATE_USER when the flag changes.',
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
    schema: {
      operationId: 'deleteUser', tags: ['users'], summary: 'Delete a user (ADMIN)',
      description:
        'ADMIN only. Deletes their posts, likes, messages, notifications and sessions, unassigns their tasks and removes their ' +
        'memberships; audit records naming them stay. 409 LAST_ADMIN for the last active ADMIN, 409 LAST_OWNER (naming the ' +
        'projects) for the only OWNER of a project. Writes DELETE_USER.',
      security, params: IdParams, response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 409) },
    },
    handler: async (request, reply) => {
      await users.remove(authedContext(request), request.params.id);
      return reply.code(204).send(null);
    },
  });
};
