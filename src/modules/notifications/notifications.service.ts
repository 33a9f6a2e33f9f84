// A user's own notifications: listed, and marked read one by one or all at once.
import type { Actor, ActorContext } from '../../context.js';
import type { Deps } from '../../deps.js';
import { notFound } from '../../domain/errors.js';
import { pageOf, type PageRequest } from '../../domain/page.js';
import { checkVersion, type ExpectedVersion } from '../../domain/versions.js';
import { useCase } from '../../use-cases/runner.js';
import * as repo from './notifications.repository.js';
import type { NotificationRow } from './notifications.repository.js';

const MARK_READ = useCase('notifications.markRead');
const MARK_ALL_READ = useCase('notifications.markAllRead');

/** A notification changes once: from unread (version 1) to read (version 2). */
export const notificationVersion = (n: NotificationRow) => (n.read_at === null ? 1 : 2);

export function createNotificationsService(deps: Deps) {
  const { db, run } = deps;
  return {
    async list(actor: Actor, filter: { unread?: boolean }, page: PageRequest) {
      return pageOf(await repo.listNotifications(db, actor.id, filter.unread === true, page.after, page.limit), page);
    },

    /** Idempotent: a notification already read keeps its first read_at. Someone else's is 404. */
    markRead(ctx: ActorContext, id: number, expected: ExpectedVersion): Promise<NotificationRow> {
      return run(ctx, MARK_READ, async (uow) => {
        const current = await repo.lockOwnNotification(uow.tx, id, ctx.actor.id);
        if (!current) throw notFound('Notification');
        checkVersion(expected, notificationVersion(current));
        return current.read_at !== null ? current : repo.markNotificationRead(uow.tx, id);
      });
    },

    async markAllRead(ctx: ActorContext): Promise<void> {
      await run(ctx, MARK_ALL_READ, async (uow) => void (await repo.markAllNotificationsRead(uow.tx, ctx.actor.id)));
    },
  };
}

export type NotificationsService = ReturnType<typeof createNotificationsService>;
