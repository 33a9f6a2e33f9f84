import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { pageRequest, sendPage } from '../../http/pagination.js';
import { expectedVersion, versionEtag } from '../../http/preconditions.js';
import { authedContext } from '../../http/request-context.js';
import { Id, IdParams, IfMatchHeader, NoContent, Page, PageQuery, StringEnum, Timestamp, errorResponses, named } from '../../http/schemas.js';
import { presentNotification } from './notifications.presenter.js';
import type { NotificationRow } from './notifications.repository.js';
import { notificationVersion, type NotificationsService } from './notifications.service.js';

const security = [{ bearer: [] }];
const notificationEtag = (n: NotificationRow) => versionEtag('notification', n.id, notificationVersion(n));
const Notification = named(
  'Notification',
  Type.Object({
    id: Id,
    kind: StringEnum(['task_assigned', 'task_status_changed', 'project_member_added', 'post_liked']),
    payload: Type.Object(
      {},
      {
        additionalProperties: true,
        description:
          'By kind: task_assigned {task_id, project_id, title, actor_id}; task_status_changed {task_id, project_id, title, ' +
          'old_status, new_status, actor_id}; project_member_added {project_id, project_name, role, actor_id}; post_liked {post_id, actor_id}',
      },
    ),
    read_at: Type.Union([Timestamp, Type.Null()], { description: 'When it was marked read; null while unread' }),
    created_at: Timestamp,
  }),
  {
    id: 87,
    kind: 'task_assigned',
    payload: { task_id: 58, project_id: 12, title: 'Write the launch announcement', actor_id: 7 },
    read_at: null,
    created_at: '2026-11-22T09:12:45.101Z',
  },
);

export const notificationsRoutes: FastifyPluginAsyncTypebox<{ notifications: NotificationsService }> = async (app, { notifications }) => {
  app.get('/notifications', {
    schema: {
      operationId: 'listNotifications', tags: ['notifications'], summary: 'Your notifications, newest first',
      description: "The caller's own; `unread=true` leaves out the ones already read.",
      security,
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
    schema: {
      operationId: 'markAllNotificationsRead', tags: ['notifications'], summary: 'Mark all your notifications read',
      description: 'Every unread notification of the caller.',
      security, response: { 204: NoContent, ...errorResponses(401) },
    },
    handler: async (request, reply) => {
      await notifications.markAllRead(authedContext(request));
      return reply.code(204).send(null);
    },
  });

  app.put('/notifications/:id/read', {
    schema: {
      operationId: 'markNotificationRead', tags: ['notifications'], summary: 'Mark one of your notifications read (idempotent)',
      description: "The caller's own (anyone else's is 404). Marking a read one again changes nothing.",
      security, params: IdParams,
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
