import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { expectedVersion, versionEtag } from '../../http/preconditions.js';
import { authedContext } from '../../http/request-context.js';
import { IdParams, IfMatchHeader, NoContent, Page, PageQuery, Timestamp, errorResponses } from '../../http/schemas.js';
import { presentNotification } from './notifications.presenter.js';
import type { NotificationRow } from './notifications.repository.js';
import { notificationVersion, type NotificationsService } from './notifications.service.js';

const security = [{ bearer: [] }];
const notificationEtag = (n: NotificationRow) => versionEtag('notification', n.id, notificationVersion(n));
const Notification = Type.Object({
  id: Type.Integer(),
  kind: Type.String(),
  payload: Type.Object({}, { additionalProperties: true }),
  read_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
});

export const notificationsRoutes: FastifyPluginAsyncTypebox<{ notifications: NotificationsService }> = async (app, { notifications }) => {
  app.get('/notifications', {
    schema: {
      tags: ['notifications'], summary: 'Your notifications, newest first', security,
      querystring: Type.Object({ unread: Type.Optional(Type.Boolean({ description: 'true: only unread ones' })), ...PageQuery }, { additionalProperties: false }),
      response: { 200: Page(Notification), ...errorResponses(400, 401) },
    },
    handler: async (request, reply) => {
      const { limit, cursor, ...filter } = request.query;
      const page = await notifications.list(authedContext(request).actor, filter, pageRequest({ limit, cursor }));
      return sendPage(request, reply, page, (ns) => ns.map(presentNotification));
    },
  });

  // Registered before /notifications/:id/read so that "read" is never taken for an id.
  app.put('/notifications/read', {
    schema: { tags: ['notifications'], summary: 'Mark all your notifications read', security, response: { 204: NoContent, ...errorResponses(401) } },
    handler: async (request, reply) => {
      await notifications.markAllRead(authedContext(request));
      return reply.code(204).send(null);
    },
  });

  app.put('/notifications/:id/read', {
    schema: {
      tags: ['notifications'], summary: 'Mark one of your notifications read (idempotent)', security, params: IdParams,
      headers: IfMatchHeader('notification (from an earlier PUT)'),
      response: { 200: Notification, ...errorResponses(400, 401, 404, 412) },
    },
    handler: async (request, reply) => {
      const n = await notifications.markRead(authedContext(request), request.params.id, expectedVersion(request, 'notification', request.params.id));
      reply.header('etag', notificationEtag(n));
      return presentNotification(n);
    },
  });
};
