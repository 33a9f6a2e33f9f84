// Notifications are written in the transaction of the change that causes them, each with a
// `new-notification` event beside it for the real-time relay. Nobody is notified of their
// own action, and nobody twice for one change.
import type { Tx } from '../../db/database.js';
import { addEvents } from '../outbox/outbox.js';

export type NotificationKind = 'task_assigned' | 'task_status_changed' | 'project_member_added' | 'post_liked';

export interface NotificationRow {
  id: number;
  user_id: number;
  kind: NotificationKind;
  payload: Record<string, unknown>;
  read_at: string | null;
  created_at: string;
}

export async function notify(
  tx: Tx,
  actorId: number,
  recipients: Array<number | null | undefined>,
  kind: NotificationKind,
  payload: Record<string, unknown>,
): Promise<void> {
  const to = [...new Set(recipients.filter((id): id is number => typeof id === 'number' && id !== actorId))];
  if (to.length === 0) return;
  const rows = await tx.query<NotificationRow>(
    `INSERT INTO notifications (user_id, kind, payload)
     SELECT unnest($1::bigint[]), $2, $3::jsonb
     RETURNING id, user_id, kind, payload, read_at, created_at`,
    [to, kind, JSON.stringify(payload)],
  );
  addEvents(
    tx,
    rows.map((n) => ({ name: 'new-notification', room: `user:${n.user_id}`, payload: presentNotification(n) as unknown as Record<string, unknown> })),
  );
}

export function presentNotification(n: NotificationRow) {
  return { id: n.id, kind: n.kind, payload: n.payload, read_at: n.read_at, created_at: n.created_at };
}
