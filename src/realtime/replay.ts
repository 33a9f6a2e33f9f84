// A reconnecting client's catch-up (docs/api.md section 6): every replayable event of its rooms
// (as they are now) after its last_event_id, from the database, in order; then the live events
// that arrived meanwhile, which waited in its buffer; then it is live like any other socket.
// Nothing is skipped (replay reads up to the end of the outbox, the buffer holds all that came
// after the socket joined its rooms) and nothing is sent twice (only ids past what it was sent,
// from the buffer and from live delivery alike).
// If what it missed is no longer kept, it is told so (resync-required) and refetches.
import type { Database } from '../db/database.js';
import { eventBounds, replayEvents } from '../modules/outbox/outbox.repository.js';
import { packetsFor, type CatchingUp } from './delivery.js';
import { REPLAYABLE, eventRooms, type RealtimeNamespace, type RealtimeSocket } from './sockets.js';

const BATCH = 500;

/** Holds the socket's live events from now on: call it before the socket can receive any. */
export function holdLive(socket: RealtimeSocket, ns: RealtimeNamespace, catchingUp: CatchingUp): void {
  socket.data.buffer = [];
  catchingUp.of(ns).add(socket);
}

/**
 * Replays what the socket missed after `lastEventId` (or tells it to resync), sends what its
 * buffer holds, and releases it to live delivery. Answers the last event_id it was sent.
 */
export async function catchUp(
  socket: RealtimeSocket,
  ns: RealtimeNamespace,
  lastEventId: number | undefined,
  deps: { db: Database; catchingUp: CatchingUp; livePosition: () => number },
): Promise<number> {
  const names = REPLAYABLE[ns.name === '/admin' ? '/admin' : '/'];
  // If the database fails midway, the buffer is still sent: the client then has what it had.
  let sent = lastEventId ?? 0;
  /** What the replay sent, from the outbox. */
  const replayedIds: number[] = [];
  try {
    const { last, oldest } = await eventBounds(deps.db);
    const invalid = lastEventId === undefined || !Number.isSafeInteger(lastEventId) || lastEventId < 0;
    // Events after lastEventId were pruned when the oldest one kept is further on than the next.
    const pruned = !invalid && lastEventId < last && (oldest === null || oldest > lastEventId + 1);
    if (invalid || lastEventId > last || pruned) {
      const reason = invalid ? 'invalid_last_event_id' : pruned ? 'retention' : 'unknown_event_id';
      socket.emit('resync-required', { event_id: last, reason, oldest_event_id: oldest ?? last + 1 });
      sent = last;
    } else {
      sent = lastEventId;
      for (;;) {
        const rows = await replayEvents(deps.db, sent, eventRooms(socket), names, BATCH);
        const packets = await packetsFor(rows, deps.db);
        for (const e of rows) {
          const packet = packets.get(e.event_id);
          if (packet) {
            socket.emit(e.name, packet);
            replayedIds.push(e.event_id);
          }
          sent = e.event_id;
        }
        if (rows.length < BATCH || !socket.connected) break;
      }
    }
  } finally {
    // In one turn of the event loop: no live event can slip between the buffer and live delivery.
    for (const held of socket.data.buffer ?? []) {
      if (held.eventId > sent) {
        socket.emit(held.name, held.packet);
        sent = held.eventId;
      }
    }
    socket.data.buffer = undefined;
    // Live delivery reads and packs a batch before it sends it, so what the replay just read
    // from the outbox may still be on its way there: until it passes them, exactly those events
    // are skipped for this socket (delivery.ts), or a client that reconnected got them twice.
    // (Exactly those: an event of a room the socket joined after its replay read is not among
    // them, and is delivered live.)
    const position = deps.livePosition();
    const ahead = replayedIds.filter((id) => id > position);
    if (ahead.length > 0) socket.data.replayed = { ids: new Set(ahead), upTo: ahead[ahead.length - 1]! };
    else deps.catchingUp.of(ns).delete(socket);
  }
  return sent;
}
