// buildApp(): plugins, then modules, in one visible order.
import Fastify, { type FastifyBaseLogger } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { trustedNetworks } from './config.js';
import type { Deps } from './deps.js';
import { API_PREFIX, registerConventions, requestId, rewriteUrl } from './http/conventions.js';
import { clientErrorHandler, frameworkErrors, registerErrorHandler } from './http/error-handler.js';
import { registerIdempotency } from './http/idempotency.js';
import { parseJsonBody } from './http/json-body.js';
import { registerRateLimit } from './http/rate-limit.js';
import { createValidatorCompiler } from './http/validation.js';
import { auditRoutes } from './modules/audit/audit.routes.js';
import { authRoutes } from './modules/auth/auth.routes.js';
import { messagesRoutes } from './modules/messages/messages.routes.js';
import { notificationsRoutes } from './modules/notifications/notifications.routes.js';
import { postsRoutes } from './modules/posts/posts.routes.js';
import { projectsRoutes } from './modules/projects/projects.routes.js';
import { tasksRoutes } from './modules/tasks/tasks.routes.js';
import { profileRoutes } from './modules/users/profile.routes.js';
import { usersRoutes } from './modules/users/users.routes.js';
import { registerHealth } from './ops/health.js';
import { registerMetrics } from './ops/metrics.js';
import { registerRealtimeDemo } from './realtime/demo-page.js';
import { attachRealtime } from './realtime/realtime.js';
import { createRedis } from './redis.js';
import type { Services } from './services.js';

export const BODY_LIMIT = 1024 * 1024;

export async function buildApp(deps: Deps, services: Services) {
  const { config, db } = deps;
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    genReqId: requestId,
    requestIdHeader: false,
    rewriteUrl: (req) => rewriteUrl(req.url ?? '/'),
    bodyLimit: BODY_LIMIT,
    trustProxy: trustedNetworks(config.trustProxy),
    return503OnClosing: true,
    frameworkErrors,
    clientErrorHandler,
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.setValidatorCompiler(createValidatorCompiler());
  registerErrorHandler(app);
  registerConventions(app);

  // JSON bodies: an empty body is "no body" (e.g. POST /auth/logout); malformed JSON, or JSON
  // nested deeper than any route takes, is 400 (json-body.ts).
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (_req, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Teamlog API',
        version: '1',
        description:
          'Users, projects, tasks, posts, messages and notifications, with an append-only audit log. ' +
          'Errors are RFC 9457 problem+json with a stable `code`. Lists are cursor-paginated (`limit` 1..100, default 20; ' +
          '`next_cursor` and a `Link: rel="next"` header). Authenticated GETs carry an ETag and answer 304 to a matching ' +
          'If-None-Match; PUTs accept If-Match (412 when stale); POSTs accept Idempotency-Key (24 h). `/api/<rest>` is an ' +
          'alias of `/api/v1/<rest>`; paths take no trailing slash. Unknown body or query fields are rejected with 400; bodies are ' +
          'JSON only, nested at most 32 levels deep (400), and uncompressed (a Content-Encoding other than identity is 415). ' +
          'Every /api request counts toward a general rate limit per user (per address before login), RATE_LIMIT_PER_MINUTE ' +
          '(default 3000): answers carry RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset, and past the limit 429 ' +
          'RATE_LIMITED with Retry-After. A change decides the caller\'s right inside its transaction: a caller who loses a right ' +
          'while the request is in flight (removed, demoted, deactivated, logged out) either acted before or is refused.',
      },
      servers: [{ url: '/' }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } } },
    },
  });

  registerMetrics(app, db);
  registerHealth(app, db);

  // Authentication: every /api route needs a valid, unrevoked session unless it says it is public.
  app.decorateRequest('actor', undefined);
  app.addHook('onRequest', async (request) => {
    if (request.is404 || !request.url.startsWith(`${API_PREFIX}/`) || request.routeOptions.config.public) return;
    request.actor = await services.auth.authenticate(request.headers.authorization);
  });
  registerIdempotency(app, db);

  const redis = config.redisUrl ? createRedis(config.redisUrl, deps.log) : undefined;
  if (redis) app.addHook('onClose', async () => void (await redis.quit().catch(() => redis.disconnect())));

  await app.register(
    async (api) => {
      await registerRateLimit(api, { perMinute: config.rateLimitPerMinute, redis, keyPrefix: config.redisKeyPrefix });
      await api.register(authRoutes, { auth: services.auth });
      await api.register(usersRoutes, { users: services.users });
      await api.register(profileRoutes, { users: services.users, audit: services.audit });
      await api.register(projectsRoutes, { projects: services.projects });
      await api.register(tasksRoutes, { tasks: services.tasks });
      await api.register(postsRoutes, { posts: services.posts });
      await api.register(messagesRoutes, { messages: services.messages });
      await api.register(notificationsRoutes, { notifications: services.notifications });
      await api.register(auditRoutes, { audit: services.audit });
      api.get('/openapi.json', { config: { public: true }, schema: { hide: true } }, async (_req, reply) => {
        reply.header('cache-control', 'public, max-age=300');
        return app.swagger();
      });
    },
    { prefix: API_PREFIX },
  );

  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { url: `${API_PREFIX}/openapi.json` } as never });
  registerRealtimeDemo(app);
  attachRealtime(app, deps, services, redis);
  return app;
}

export type App = Awaited<ReturnType<typeof buildApp>>;
