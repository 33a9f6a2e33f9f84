// Notifications are written in the transaction of the change that causes them, each with a
// `new-notification` event beside it for the real-time relay. Nobody is notified of their
// own action, nobody twice for one change, and nobody about a project they may no longer see.
import type { UnitOfWork } from '../../use-cases/runner.js';
import { presentNotification } from './notifications.presenter.js';
import { insertNotifications, type NotificationKind } from './notifications.repository.js';

export async function notify(
  uow: UnitOfWork,
  recipients: Array<number | null | undefined>,
  kind: NotificationKind,
  payload: Record<string, unknown>,
  opts: { aboutProject?: number } = {},
): Promise<void> {
  const actorId = uow.ctx.actor?.id;
  const to = [...new Set(recipients.filter((id): id is number => typeof id === 'number' && id !== actorId))];
  if (to.length === 0) return;
  const rows = await insertNotifications(uow.tx, to, kind, payload, opts.aboutProject ?? null);
  uow.emit(...rows.map((n) => ({ name: 'new-notification', room: `user:${n.user_id}`, payload: presentNotification(n) as unknown as Record<string, unknown> })));
}
