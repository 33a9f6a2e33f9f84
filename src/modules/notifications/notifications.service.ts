import type { Actor } from '../../context.js';
import type { Deps } from '../../deps.js';
import { notFound } from '../../http/errors.js';
import { pageRequest } from '../../http/pagination.js';
import { checkIfMatch, versionEtag, type IfMatch } from '../../http/preconditions.js';
import type { NotificationRow } from './notifications.writer.js';

const COLUMNS = 'id, user_id, kind, payload, read_at, created_at';

/** A notification changes once: from unread (version 1) to read (version 2). */
const notificationVersion = (n: NotificationRow) => (n.read_at === null ? 1 : 2);
export const notificationEtag = (n: NotificationRow) => versionEtag('notification', n.id, notificationVersion(n));

export function createNotificationsService(deps: Deps) {
  const { db } = deps;
  return {
    async list(actor: Actor, query: { unread?: boolean; limit?: number; cursor?: string }) {
      const page = pageRequest(query);
      const rows = await db.query<NotificationRow>(
        `SELECT ${COLUMNS} FROM notifications
          WHERE user_id = $1 AND (NOT $2 OR read_at IS NULL) AND ($3::bigint IS NULL OR id < $3)
          ORDER BY id DESC LIMIT $4`,
        [actor.id, query.unread === true, page.beforeId ?? null, page.limit + 1],
      );
      return { rows, page };
    },

    /** Idempotent: a notification already read keeps its first read_at. Someone else's is 404. */
    async markRead(actor: Actor, id: number, ifMatch: IfMatch): Promise<NotificationRow> {
      return db.transaction(async (tx) => {
        const current = await tx.query<NotificationRow>(`SELECT ${COLUMNS} FROM notifications WHERE id = $1 AND user_id = $2 FOR UPDATE`, [id, actor.id]);
        if (!current[0]) throw notFound('Notification');
        checkIfMatch(ifMatch, 'notification', id, notificationVersion(current[0]));
        if (current[0].read_at !== null) return current[0];
        const rows = await tx.query<NotificationRow>(`UPDATE notifications SET read_at = now() WHERE id = $1 RETURNING ${COLUMNS}`, [id]);
        return rows[0]!;
      });
    },

    async markAllRead(actor: Actor): Promise<void> {
      await db.query('UPDATE notifications SET read_at = now() WHERE user_id = $1 AND read_at IS NULL', [actor.id]);
    },
  };
}

export type NotificationsService = ReturnType<typeof createNotificationsService>;
