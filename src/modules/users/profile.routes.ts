import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Database } from '../../db/database.js';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { authedContext, ifMatchOf } from '../../http/request-context.js';
import { IfMatchHeader, Page, PageQuery, errorResponses } from '../../http/schemas.js';
import { querySecurityLog, resolvePersonalData, type AuditRow } from '../audit/audit.queries.js';
import { AuditRecord } from '../audit/audit.schemas.js';
import { presentUser, userEtag } from './users.presenter.js';
import { ProfileBody, User } from './users.schemas.js';
import type { UsersService } from './users.service.js';

const security = [{ bearer: [] }];

export const profileRoutes: FastifyPluginAsyncTypebox<{ users: UsersService; db: Database }> = async (app, { users, db }) => {
  app.get('/profile', {
    schema: { tags: ['profile'], summary: 'Your own user', security, response: { 200: User, ...errorResponses(401) } },
    handler: async (request, reply) => {
      const { actor } = authedContext(request);
      const user = await users.get(actor.id);
      reply.header('etag', userEtag(user, actor));
      return presentUser(user, actor);
    },
  });

  app.put('/profile', {
    schema: {
      tags: ['profile'], summary: 'Change your name', security, body: ProfileBody,
      headers: IfMatchHeader('user'),
      response: { 200: User, ...errorResponses(400, 401, 412) },
    },
    handler: async (request, reply) => {
      const ctx = authedContext(request);
      const user = await users.update(ctx, ctx.actor.id, { name: request.body.name }, ifMatchOf(request));
      reply.header('etag', userEtag(user, ctx.actor));
      return presentUser(user, ctx.actor);
    },
  });

  app.get('/profile/security-log', {
    schema: {
      tags: ['profile'],
      summary: 'Your own security events',
      description: 'LOGIN_SUCCESS, LOGIN_FAILURE, LOGOUT, PASSWORD_CHANGED, SESSION_REVOKED and UPDATE_USER_EMAIL records about your account, newest first. Actions by others on your account are shown without their ip and user_agent.',
      security,
      querystring: Type.Object({ ...PageQuery }, { additionalProperties: false }),
      response: { 200: Page(AuditRecord), ...errorResponses(400, 401) },
    },
    handler: async (request, reply) => {
      const { actor } = authedContext(request);
      const page = pageRequest(request.query);
      const rows = await querySecurityLog(db, actor.id, page.beforeId, page.limit);
      // Someone else's action on your account (an ADMIN changing your email, a refused
      // attempt) is shown, but their address and user agent are theirs, not yours.
      const withoutOthersAddresses = (records: AuditRow[]) =>
        records.map((r) => (r.actor_id === actor.id || r.actor_id === null ? r : { ...r, ip: null, user_agent: null }));
      return sendPage(request, reply, rows, page, (records) => resolvePersonalData(db, withoutOthersAddresses(records)));
    },
  });
};
