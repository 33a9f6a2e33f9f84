// Delivers numbered events to this instance's own sockets (every instance does the same for
// its own: see dispatcher.ts). Client events go to their room in one broadcast, except to
// sockets still catching up (replay.ts), which get them in their buffer, in order. Control
// events (modules/outbox/outbox.control-events.ts) move sockets between rooms or disconnect them.
// Each send is timed from the read of its event's batch (teamlog_realtime_emit_lag_seconds).
import type { Queryable } from '../db/database.js';
import { isoTimestamp } from '../db/timestamps.js';
import type { AuditRow } from '../modules/audit/audit.repository.js';
import { resolvePersonalData } from '../modules/audit/audit.service.js';
import { RECORD_EVENT, type NumberedEvent } from '../modules/outbox/outbox.events.js';
import { emitLagOf } from '../ops/metrics.js';
import { batchAges } from './delivery.repository.js';
import { recordsByIds } from '../modules/outbox/outbox.repository.js';
import type { RelayedEvent } from './relay.js';
import { REPLAYABLE, projectRoom, sessionRoom, userRoom, type RealtimeNamespace, type RealtimeSocket } from './sockets.js';

export interface Namespaces {
  main: RealtimeNamespace;
  admin: RealtimeNamespace;
}

/**
 * Sockets of each namespace that are catching up (their live events wait in socket.data.buffer),
 * or that caught up to beyond live delivery (socket.data.replayed: the events its replay sent are
 * not sent again).
 */
export class CatchingUp {
  private readonly sockets = new Map<RealtimeNamespace, Set<RealtimeSocket>>();

  of(ns: RealtimeNamespace): Set<RealtimeSocket> {
    let set = this.sockets.get(ns);
    if (!set) this.sockets.set(ns, (set = new Set()));
    return set;
  }
}

/**
 * A socket whose catch-up sent nothing beyond `eventId` is an ordinary socket again: live
 * delivery is past what its replay sent.
 */
function caughtUpBefore(socket: RealtimeSocket, catchingUp: Set<RealtimeSocket>, eventId: number): boolean {
  const { replayed } = socket.data;
  if (!replayed || eventId <= replayed.upTo) return false;
  socket.data.replayed = undefined;
  catchingUp.delete(socket);
  return true;
}

/** Whether a socket of this instance is in the room. */
const hasLocalSocket = (ns: RealtimeNamespace, room: string): boolean => (ns.adapter.rooms.get(room)?.size ?? 0) > 0;

/** Sends one live event to a room of this instance: buffered for sockets catching up, broadcast to the rest. */
export function sendLive(ns: RealtimeNamespace, catchingUp: Set<RealtimeSocket>, room: string, name: string, packet: Record<string, unknown>, eventId: number): void {
  // No socket of this instance in the room: nothing to send, so nothing to encode (Socket.IO
  // encodes a packet before it looks at the room, and most events of a busy API go to rooms
  // nobody here has joined: 5% of a POST /tasks's CPU in the benchmark). Only sockets in the
  // room are ever sent to, catching up or not.
  if (!hasLocalSocket(ns, room)) {
    for (const socket of catchingUp) caughtUpBefore(socket, catchingUp, eventId);
    return;
  }
  const held: string[] = [];
  for (const socket of catchingUp) {
    if (caughtUpBefore(socket, catchingUp, eventId)) continue;
    if (!socket.rooms.has(room)) continue;
    const { replayed } = socket.data;
    if (!replayed) socket.data.buffer?.push({ name, packet, eventId });
    // Caught up to beyond this event: sent already if its replay sent it, else it goes live.
    else if (!replayed.ids.has(eventId)) continue;
    held.push(socket.id);
  }
  ns.local.to(room).except(held).emit(name, packet);
}

/** This instance's sockets in a room. */
function localSockets(ns: RealtimeNamespace, room: string): RealtimeSocket[] {
  return [...(ns.adapter.rooms.get(room) ?? [])].flatMap((id) => ns.sockets.get(id) ?? []);
}

const num = (v: unknown) => (typeof v === 'number' ? v : Number(v));

/** What each control event does to this instance's sockets. */
function controlHandlers({ main, admin }: Namespaces): Record<string, (payload: Record<string, unknown>) => void> {
  const both = [main, admin];
  return {
    'session-revoked': (p) => both.forEach((ns) => ns.local.in(sessionRoom(num(p.session_id))).disconnectSockets(true)),
    'user-sessions-revoked': (p) => {
      for (const ns of both) {
        for (const socket of localSockets(ns, userRoom(num(p.user_id)))) {
          if (socket.data.actor.sessionId !== p.except_session_id) socket.disconnect(true);
        }
      }
    },
    'role-changed': (p) => {
      const userId = num(p.user_id);
      for (const socket of localSockets(main, userRoom(userId))) socket.data.actor = { ...socket.data.actor, role: p.role === 'ADMIN' ? 'ADMIN' : 'USER' };
      if (p.role !== 'ADMIN') admin.local.in(userRoom(userId)).disconnectSockets(true);
    },
    'membership-changed': (p) => {
      const sockets = main.local.in(userRoom(num(p.user_id)));
      if (p.role === null) sockets.socketsLeave(projectRoom(num(p.project_id)));
      else sockets.socketsJoin(projectRoom(num(p.project_id)));
    },
    'project-deleted': (p) => main.local.in(projectRoom(num(p.project_id))).socketsLeave(projectRoom(num(p.project_id))),
  };
}

/**
 * The events as clients receive them: the payload with its event_id, by event_id. An /admin
 * record event names its record (outbox.events.ts), which is read here, for the events `needed`
 * says a socket waits for, in one statement: its timestamp as the database wrote it, its
 * personal values as refs, which are put back (read only for the few records that name one, so
 * that a value erased since is shown "[redacted]"). A record gone behind the service's back
 * shows nothing (null). A record event not needed has no entry.
 */
export async function packetsFor(
  events: NumberedEvent[],
  db: Queryable,
  needed: (event: NumberedEvent) => boolean = () => true,
): Promise<Map<number, Record<string, unknown> | null>> {
  const recordEvents = events.filter((e) => e.name === RECORD_EVENT && needed(e));
  const ids = recordEvents.map((e) => Number(e.payload.id)).filter(Number.isSafeInteger);
  const stored = ids.length > 0 ? await recordsByIds(db, ids) : new Map<number, Record<string, unknown>>();
  const found = recordEvents.flatMap((e) => {
    const record = stored.get(Number(e.payload.id));
    return record ? [{ eventId: e.event_id, record: { ...record, timestamp: isoTimestamp(String(record.timestamp)) } as unknown as AuditRow }] : [];
  });
  const resolved = found.length > 0 ? await resolvePersonalData(db, found.map((f) => f.record)) : [];
  const byEvent = new Map(found.map((f, i) => [f.eventId, resolved[i]!]));
  const packets = new Map<number, Record<string, unknown> | null>();
  for (const e of recordEvents) {
    const record = byEvent.get(e.event_id);
    packets.set(e.event_id, record ? { ...record, event_id: e.event_id } : null);
  }
  for (const e of events) if (e.name !== RECORD_EVENT) packets.set(e.event_id, { ...e.payload, event_id: e.event_id });
  return packets;
}

export interface DeliveryOptions {
  /**
   * For tests only (Deps.testHooks), none in production: awaited between packing a batch and
   * sending it, the window in which a reconnecting socket's catch-up can overtake live delivery
   * (test/realtime.test.ts holds a batch there to show that the socket still gets it once).
   */
  beforeSend?: (events: NumberedEvent[]) => Promise<void>;
}

interface Sent {
  event: RelayedEvent;
  namespace: string;
}

/**
 * Observes the emit lag of events sent at `sentAt` (performance.now()). Those this instance's
 * relay numbered carry when their batch was read; for the others (numbered by another instance,
 * or read back after a gap) the database says how old their batches are, after the send, so
 * that delivery never waits for it; one such read at a time (a batch sent meanwhile goes
 * unmeasured), and a failed one measures nothing.
 */
function emitLagObserver(db: Queryable, namespaces: Namespaces) {
  let asking = false;
  return function observe(sent: Sent[], sentAt: number): void {
    const lag = emitLagOf(namespaces.main.server);
    if (!lag) return;
    const unread: Sent[] = [];
    for (const s of sent) {
      if (s.event.readAt !== undefined) lag.observe({ namespace: s.namespace }, Math.max(0, sentAt - s.event.readAt) / 1000);
      else unread.push(s);
    }
    if (unread.length === 0 || asking) return;
    asking = true;
    const asked = performance.now();
    batchAges(db, unread[0]!.event.event_id, unread.length)
      .then((batches) => {
        // The age was read about halfway between asking and the answer: the send was that long before.
        const sinceSent = ((asked + performance.now()) / 2 - sentAt) / 1000;
        for (const s of unread) {
          const b = batches.find((x) => x.first_event_id <= s.event.event_id && s.event.event_id <= x.last_event_id);
          if (b) lag.observe({ namespace: s.namespace }, Math.max(0, b.age_seconds - sinceSent));
        }
      })
      .catch(() => {})
      .finally(() => {
        asking = false;
      });
  };
}

export function createDelivery(namespaces: Namespaces, catchingUp: CatchingUp, db: Queryable, opts: DeliveryOptions = {}) {
  const control = controlHandlers(namespaces);
  const nsFor = (name: string): RealtimeNamespace | undefined =>
    REPLAYABLE['/'].includes(name) ? namespaces.main : REPLAYABLE['/admin'].includes(name) ? namespaces.admin : undefined;
  const observeLag = emitLagObserver(db, namespaces);

  // A record is read for a record event only while a socket of this instance is in its room:
  // most instances, most of the time, have none in /admin's.
  const awaited = (e: NumberedEvent): boolean => {
    const ns = nsFor(e.name);
    return ns !== undefined && hasLocalSocket(ns, e.room);
  };

  return async function deliver(events: NumberedEvent[]): Promise<void> {
    const packets = await packetsFor(events, db, awaited);
    await opts.beforeSend?.(events);
    // A socket that joined a room while the batch was read gets its records too: read until none
    // is missing, then send without awaiting anything, so that no socket joins in between.
    for (;;) {
      const late = events.filter((e) => !packets.has(e.event_id) && awaited(e));
      if (late.length === 0) break;
      for (const [id, packet] of await packetsFor(late, db)) packets.set(id, packet);
    }
    const sent: Sent[] = [];
    for (const e of events) {
      const apply = control[e.name];
      if (apply) {
        apply(e.payload);
        continue;
      }
      const ns = nsFor(e.name);
      const packet = packets.get(e.event_id);
      if (ns && packet) {
        sendLive(ns, catchingUp.of(ns), e.room, e.name, packet, e.event_id);
        sent.push({ event: e, namespace: ns.name });
      }
    }
    if (sent.length > 0) observeLag(sent, performance.now());
  };
}
