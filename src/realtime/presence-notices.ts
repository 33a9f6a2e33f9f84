// The `user-online` and `user-offline` notices (docs/api.md section 6): presence changes reach
// every socket of every instance, each with its instance's position. Sockets still catching up
// (replay.ts) are left out: their presence snapshot comes after their replay.
import type { CatchingUp, Namespaces } from './delivery.js';
import type { Dispatcher } from './dispatcher.js';

export type AnnouncePresence = (userIds: number[], online: boolean) => void;

export interface PresenceNoticeParts {
  catchingUp: CatchingUp;
  dispatcher: Dispatcher;
  /** With Redis: the other instances are told too, and this one hears theirs. */
  acrossInstances: boolean;
}

/** Listens for the other instances' presence changes, and answers how to announce this one's. */
export function presenceNotices(namespaces: Namespaces, { catchingUp, dispatcher, acrossInstances }: PresenceNoticeParts): AnnouncePresence {
  function announcePresence(userIds: number[], online: boolean, fromElsewhere = false): void {
    const held = [...catchingUp.of(namespaces.main)].filter((s) => s.data.buffer !== undefined).map((s) => s.id);
    for (const userId of userIds) namespaces.main.local.except(held).emit(online ? 'user-online' : 'user-offline', { user_id: userId, event_id: dispatcher.position });
    if (!fromElsewhere && acrossInstances) namespaces.main.serverSideEmit('presence', { user_ids: userIds, online });
  }
  namespaces.main.on('presence', (p: { user_ids: number[]; online: boolean }) => announcePresence(p.user_ids, p.online, true));
  return (userIds, online) => announcePresence(userIds, online);
}
