import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { expectedVersion } from '../../http/preconditions.js';
import { authedContext } from '../../http/request-context.js';
import { IfMatchHeader, Page, PageQuery, errorResponses } from '../../http/schemas.js';
import { AuditRecord } from '../audit/audit.schemas.js';
import type { AuditService } from '../audit/audit.service.js';
import { USER_VIEWS, presentUser, userEtag } from './users.presenter.js';
import { ProfileBody, User } from './users.schemas.js';
import type { UsersService } from './users.service.js';

const security = [{ bearer: [] }];

export const profileRoutes: FastifyPluginAsyncTypebox<{ users: UsersService; audit: AuditService }> = async (app, { users, audit }) => {
  app.get('/profile', {
    schema: {
      operationId: 'getProfile', tags: ['profile'], summary: 'Your own user',
      description: 'The caller, with their email. Its ETag is the one PUT /profile and PUT /users/{id} take in If-Match.',
      security, response: { 200: User, ...errorResponses(401) },
    },
    handler: async (request, reply) => {
      const { actor } = authedContext(request);
      const user = await users.get(actor.id);
      reply.header('etag', userEtag(user, actor));
      return presentUser(user, actor);
    },
  });

  app.put('/profile', {
    schema: {
      operationId: 'updateProfile', tags: ['profile'], summary: 'Change your name',
      description: 'Setting the name you already have changes nothing. To change your email, use PUT /users/{id} with current_password.',
      security, body: ProfileBody,
      headers: IfMatchHeader('user'),
      response: { 200: User, ...errorResponses(400, 401, 412) },
    },
    handler: async (request, reply) => {
      const ctx = authedContext(request);
      const user = await users.update(ctx, ctx.actor.id, { name: request.body.name }, expectedVersion(request, 'user', ctx.actor.id, USER_VIEWS));
      reply.header('etag', userEtag(user, ctx.actor));
      return presentUser(user, ctx.actor);
    },
  });

  app.get('/profile/security-log', {
    schema: {
      operationId: 'listSecurityLog',
      tags: ['profile'],
      summary: 'Your own security events',
      description: 'LOGIN_SUCCESS, LOGIN_FAILURE, LOGOUT, PASSWORD_CHANGED, SESSION_REVOKED and UPDATE_USER_EMAIL records about your account, newest first. Actions by others on your account are shown without their ip and user_agent.',
      security,
      querystring: Type.Object({ ...PageQuery }, { additionalProperties: false }),
      response: { 200: Page(AuditRecord), ...errorResponses(400, 401) },
    },
    handler: async (request, reply) => {
      const page = await audit.securityLog(authedContext(request).actor, pageRequest(request.query));
      return sendPage(request, reply, page, (records) => records);
    },
  });
};
