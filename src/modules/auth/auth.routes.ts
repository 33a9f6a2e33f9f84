import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { NoContent, errorResponses } from '../../http/schemas.js';
import { authedContext, contextOf } from '../../http/request-context.js';
import type { AuthService } from './auth.service.js';
import { presentUser } from '../users/users.presenter.js';
import { LoginBody, LoginResponse, PasswordBody, RefreshBody, TokenPairSchema } from './auth.schemas.js';

export const authRoutes: FastifyPluginAsyncTypebox<{ auth: AuthService }> = async (app, { auth }) => {
  app.post('/auth/login', {
    config: { public: true },
    schema: {
      tags: ['auth'],
      summary: 'Log in with email and password',
      description: 'Throttled: 5 failures per email or 20 per address within 15 minutes lock further attempts (429).',
      body: LoginBody,
      response: { 200: LoginResponse, ...errorResponses(400, 401, 403, 429) },
    },
    handler: async (request) => {
      const result = await auth.login(contextOf(request), request.body.email, request.body.password);
      const { user, ...tokens } = result;
      return { ...tokens, user: presentUser(user, user) };
    },
  });

  app.post('/auth/refresh', {
    config: { public: true },
    schema: {
      tags: ['auth'],
      summary: 'Exchange a refresh token for a new pair',
      description: 'The presented token is spent. Presenting a spent token again revokes the whole session (SESSION_REVOKED).',
      body: RefreshBody,
      response: { 200: TokenPairSchema, ...errorResponses(400, 401, 403) },
    },
    handler: (request) => auth.refresh(contextOf(request), request.body.refresh_token),
  });

  app.post('/auth/logout', {
    schema: { tags: ['auth'], summary: 'End this session', security: [{ bearer: [] }], response: { 204: NoContent, ...errorResponses(401) } },
    handler: async (request, reply) => {
      await auth.logout(authedContext(request));
      return reply.code(204).send(null);
    },
  });

  app.put('/auth/password', {
    schema: {
      tags: ['auth'],
      summary: 'Change your password',
      description: 'Every other session of the user is revoked. A wrong current_password is 403 and counts toward the login throttle.',
      security: [{ bearer: [] }],
      body: PasswordBody,
      response: { 204: NoContent, ...errorResponses(400, 401, 403, 429) },
    },
    handler: async (request, reply) => {
      await auth.changePassword(authedContext(request), request.body.current_password, request.body.new_password);
      return reply.code(204).send(null);
    },
  });
};
