// What a notification looks like from the outside (the API and the `new-notification` event).
import type { NotificationRow } from './notifications.repository.js';

export function presentNotification(n: NotificationRow) {
  return { id: n.id, kind: n.kind, payload: n.payload, read_at: n.read_at, created_at: n.created_at };
}
