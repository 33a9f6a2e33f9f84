import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { NoContent, errorResponses } from '../../http/schemas.js';
import { authedContext, contextOf } from '../../http/request-context.js';
import { DomainError } from '../../domain/errors.js';
import type { AuthService } from './auth.service.js';
import { presentUser } from '../users/users.presenter.js';
import { LoginBody, LoginResponse, PasswordBody, RefreshBody, TokenPairSchema } from './auth.schemas.js';

export const authRoutes: FastifyPluginAsyncTypebox<{ auth: AuthService }> = async (app, { auth }) => {
  // The login throttle's refusals (a DomainError, unlike the general limit's) are counted as
  // limit="login" in teamlog_requests_limited_total.
  app.addHook('onError', async (_request, _reply, error) => {
    if (error instanceof DomainError && error.code === 'RATE_LIMITED') app.metrics.limited.inc({ limit: 'login' });
  });
  app.post('/auth/login', {
    config: { public: true },
    schema: {
      operationId: 'login',
      tags: ['auth'],
      summary: 'Log in with email and password',
      description:
        'Anyone. Answers an access token (a short-lived JWT, `expires_in` seconds) and a refresh token. A wrong email or ' +
        'password is the same 401 INVALID_CREDENTIALS; a deactivated account is 403 ACCOUNT_DEACTIVATED, told only after the ' +
        'password verified. Throttled: 5 failures per email or 20 per address within 15 minutes lock further attempts (429 ' +
        'with Retry-After). Writes LOGIN_SUCCESS or LOGIN_FAILURE. Idempotency-Key is ignored here.',
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
      operationId: 'refreshTokens',
      tags: ['auth'],
      summary: 'Exchange a refresh token for a new pair',
      description:
        'Anyone holding a refresh token. The presented token is spent. Presenting a spent token again revokes the whole ' +
        'session (theft detection; writes SESSION_REVOKED) and is 401 TOKEN_REVOKED.',
      body: RefreshBody,
      response: { 200: TokenPairSchema, ...errorResponses(400, 401, 403) },
    },
    handler: (request) => auth.refresh(contextOf(request), request.body.refresh_token),
  });

  app.post('/auth/logout', {
    schema: {
      operationId: 'logout',
      tags: ['auth'],
      summary: 'End this session',
      description: "This session's access and refresh tokens stop working at once, on every instance. Writes LOGOUT.",
      security: [{ bearer: [] }],
      response: { 204: NoContent, ...errorResponses(401) },
    },
    handler: async (request, reply) => {
      await auth.logout(authedContext(request));
      return reply.code(204).send(null);
    },
  });

  app.put('/auth/password', {
    schema: {
      operationId: 'changePassword',
      tags: ['auth'],
      summary: 'Change your password',
      description: 'Every other session of the user is revoked. A wrong current_password is 403 INVALID_CREDENTIALS and counts toward the login throttle. Writes PASSWORD_CHANGED.',
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
