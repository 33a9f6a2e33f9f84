// buildApp(): plugins, then modules, in one visible order.
import Fastify, { type FastifyBaseLogger } from 'fastify';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { trustedNetworks } from './config.js';
import type { Deps } from './deps.js';
import { requestLinesOf } from './logger.js';
import { requestLogger } from './http/request-logger.js';
import { API_PREFIX, isApiRequest, registerConventions, requestId, rewriteUrl } from './http/conventions.js';
import { clientErrorHandler, frameworkErrors, registerErrorHandler } from './http/error-handler.js';
import { registerIdempotency } from './http/idempotency.js';
import { registerDocs, swaggerOptions } from './http/openapi.js';
import { registerHttpPlugins } from './http/plugins.js';
import { parseJsonBody } from './http/json-body.js';
import { buildShapeSerializer } from './http/serialization.js';
import { registerRateLimit } from './http/rate-limit.js';
import { RequestLog } from './http/request-context.js';
import { createValidatorCompiler } from './http/validation.js';
import { auditRoutes } from './modules/audit/audit.routes.js';
import { registerAuditConsole } from './modules/audit/console.routes.js';
import { authRoutes } from './modules/auth/auth.routes.js';
import { createMessageLimit, limitMessages } from './modules/messages/messages.limit.js';
import { messagesRoutes } from './modules/messages/messages.routes.js';
import { notificationsRoutes } from './modules/notifications/notifications.routes.js';
import { postsRoutes } from './modules/posts/posts.routes.js';
import { projectsRoutes } from './modules/projects/projects.routes.js';
import { tasksRoutes } from './modules/tasks/tasks.routes.js';
import { profileRoutes } from './modules/users/profile.routes.js';
import { usersRoutes } from './modules/users/users.routes.js';
import { attachAuditWorkers } from './ops/audit-workers.js';
import { registerHealth } from './ops/health.js';
import { listenForSessionChanges } from './modules/sessions/sessions.cache.js';
import { pageCacheMetrics, realtimeMetrics, registerMetrics, sessionCacheMetrics } from './ops/metrics.js';
import { PAGE_CACHE_BYTES, PageCache } from './http/page-cache.js';
import { registerVersion, versionInfo } from './ops/version.js';
import { registerRealtimeDemo } from './realtime/demo-page.js';
import { attachRealtime } from './realtime/realtime.js';
import { createRedis, letGo } from './redis.js';
import type { Services } from './services.js';

export const BODY_LIMIT = 1024 * 1024;

export async function buildApp(deps: Deps, services: Services) {
  const { config, db } = deps;
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    logController: new RequestLog(requestLinesOf(deps.log)),
    genReqId: requestId,
    childLoggerFactory: requestLogger,
    requestIdHeader: false,
    rewriteUrl: (req) => rewriteUrl(req.url ?? '/'),
    bodyLimit: BODY_LIMIT,
    trustProxy: trustedNetworks(config.trustProxy),
    return503OnClosing: true,
    frameworkErrors,
    clientErrorHandler,
    schemaController: { compilersFactory: { buildSerializer: buildShapeSerializer } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.setValidatorCompiler(createValidatorCompiler());
  registerErrorHandler(app);
  // CORS, security headers and compression first: their headers go on every answer, the
  // conventions' own refusals included.
  await registerHttpPlugins(app, config);
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

  await app.register(swagger, swaggerOptions);

  registerMetrics(app, db, config);
  sessionCacheMetrics(app.metricsRegistry, deps.sessionCache);
  // The task list's pages as last answered, each kept until the database changes (http/page-cache.ts).
  const taskPages = new PageCache(PAGE_CACHE_BYTES);
  pageCacheMetrics(app.metricsRegistry, 'tasks', taskPages);
  registerHealth(app, db, config.auditSealStallMs, () => services.evidence.witnessing.health(config.auditWitnessMaxAgeMs));

  const redis = config.redisUrl ? createRedis(config.redisUrl, deps.log) : undefined;
  if (redis) app.addHook('onClose', () => letGo(redis));

  // The general rate limit, before authentication: an address over it is refused without a
  // session lookup, and every /api answer counts, a 401 or a 404 too (rate-limit.ts).
  const generalLimit = await registerRateLimit(app, {
    perMinute: config.rateLimitPerMinute,
    redis,
    keyPrefix: config.redisKeyPrefix,
    onLimited: () => app.metrics.limited.inc({ limit: 'general' }),
  });
  // Messages, 20 a second per user on every path that sends one: POST /messages and the
  // sockets' new-message (the real-time layer is given these services too).
  const messageLimit = createMessageLimit({ redis, keyPrefix: config.redisKeyPrefix });
  services = { ...services, messages: limitMessages(services.messages, messageLimit, () => app.metrics.limited.inc({ limit: 'messages' })) };

  // Authentication: every /api route needs a valid, unrevoked session unless it says it is public.
  // The session cache it reads serves (PostgreSQL) only while it hears every instance's changes.
  let unlistenSessions: (() => Promise<void>) | undefined;
  app.addHook('onReady', async () => void (unlistenSessions = await listenForSessionChanges(db, deps.sessionCache)));
  app.addHook('onClose', async () => unlistenSessions?.());
  app.decorateRequest('actor', undefined);
  // No route takes OPTIONS: a preflight carries no credentials, and one that CORS did not answer
  // is answered 204 with Allow (conventions.ts). Which routes are the API's is judged on the
  // route matched, never on the URL's spelling (conventions.ts, isApiRequest).
  app.addHook('onRequest', async (request) => {
    if (request.is404 || request.method === 'OPTIONS' || !isApiRequest(request) || request.routeOptions.config.public) return;
    request.actor = await services.auth.authenticate(request.headers.authorization);
  });
  registerIdempotency(app, db);

  await app.register(
    async (api) => {
      registerVersion(api, versionInfo(config.commit));
      await api.register(authRoutes, { auth: services.auth });
      await api.register(usersRoutes, { users: services.users });
      await api.register(profileRoutes, { users: services.users, audit: services.audit });
      await api.register(projectsRoutes, { projects: services.projects });
      await api.register(tasksRoutes, { tasks: services.tasks, pages: taskPages });
      await api.register(postsRoutes, { posts: services.posts });
      await api.register(messagesRoutes, { messages: services.messages });
      await api.register(notificationsRoutes, { notifications: services.notifications });
      await api.register(auditRoutes, { audit: services.audit, evidence: services.evidence, maxConcurrentScans: config.maxConcurrentAuditScans, scanPause: deps.testHooks?.whileScanHolds, scanCollector: deps.testHooks?.scanCollector });
      api.get('/openapi.json', { config: { public: true }, schema: { hide: true } }, async (_req, reply) => {
        reply.header('cache-control', 'public, max-age=300');
        return app.swagger();
      });
    },
    { prefix: API_PREFIX },
  );

  await registerDocs(app);
  registerRealtimeDemo(app);
  registerAuditConsole(app);
  realtimeMetrics(app.metricsRegistry, attachRealtime(app, deps, services, redis, generalLimit).io);
  attachAuditWorkers(app, deps, services.evidence);
  return app;
}

export type App = Awaited<ReturnType<typeof buildApp>>;
