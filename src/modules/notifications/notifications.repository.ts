// SQL for notifications.
import type { Queryable } from '../../db/database.js';
import { query, statements } from '../../db/statements.js';

export type NotificationKind = 'task_assigned' | 'task_status_changed' | 'project_member_added' | 'post_liked';

export interface NotificationRow {
  id: number;
  user_id: number;
  kind: NotificationKind;
  payload: Record<string, unknown>;
  read_at: string | null;
  created_at: string;
}

const COLUMNS = 'id, user_id, kind, payload, read_at, created_at';

const S = statements('notifications', {
  // One notification per recipient who still exists and, when $4 names a project, may still
  // see it (a member or an ADMIN): a member who left a project hears nothing more about it.
  insert: `INSERT INTO notifications (user_id, kind, payload)
  SELECT u.id, $2, $3::jsonb FROM users u
   WHERE u.id = ANY ($1::bigint[])
     AND ($4::bigint IS NULL OR u.role = 'ADMIN'
          OR EXISTS (SELECT 1 FROM project_members m WHERE m.project_id = $4 AND m.user_id = u.id))
  ORDER BY u.id
  RETURNING ${COLUMNS}`,
  list: `SELECT ${COLUMNS} FROM notifications
   WHERE user_id = $1 AND (NOT $2 OR read_at IS NULL) AND ($3::bigint IS NULL OR id < $3)
   ORDER BY id DESC LIMIT $4`,
  lockOwn: `SELECT ${COLUMNS} FROM notifications WHERE id = $1 AND user_id = $2 FOR UPDATE`,
  markRead: `UPDATE notifications SET read_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
  markAllRead: 'UPDATE notifications SET read_at = now() WHERE user_id = $1 AND read_at IS NULL',
});

export const insertNotifications = (q: Queryable, recipients: number[], kind: NotificationKind, payload: Record<string, unknown>, visibleIn: number | null) =>
  query<NotificationRow>(q, S.insert, [recipients, kind, JSON.stringify(payload), visibleIn]);

export const listNotifications = (q: Queryable, userId: number, unreadOnly: boolean, beforeId: number | undefined, limit: number) =>
  query<NotificationRow>(q, S.list, [userId, unreadOnly, beforeId ?? null, limit + 1]);

export const lockOwnNotification = async (q: Queryable, id: number, userId: number) => (await query<NotificationRow>(q, S.lockOwn, [id, userId]))[0];
export const markNotificationRead = async (q: Queryable, id: number) => (await query<NotificationRow>(q, S.markRead, [id]))[0]!;
export const markAllNotificationsRead = (q: Queryable, userId: number) => query(q, S.markAllRead, [userId]);
