// What the real-time layer keeps per socket, and the two namespaces it serves.
import type { DefaultEventsMap, Namespace, Server, Socket } from 'socket.io';
import type { Actor } from '../context.js';

export interface BufferedEvent {
  name: string;
  packet: Record<string, unknown>;
  eventId: number;
}

export interface SocketData {
  actor: Actor;
  /** When the access token the socket authenticated with expires (ms since the epoch). */
  expiresAt: number;
  /** Set while the socket catches up (replay): live events wait here, in order. */
  buffer: BufferedEvent[] | undefined;
  /**
   * After its catch-up, while live delivery has not yet passed them: the event_ids its replay
   * sent that live delivery had not sent yet, and the last of them (delivery.ts skips those).
   */
  replayed?: { ids: Set<number>; upTo: number };
  expiry: NodeJS.Timeout | undefined;
  /** The last event_id delivered on this instance when the socket's project rooms were read. */
  roomsAsOf: number;
}

// Events are named by the contract (docs/api.md section 6) and checked where they are handled.
export type RealtimeServer = Server<DefaultEventsMap, DefaultEventsMap, DefaultEventsMap, SocketData>;
export type RealtimeNamespace = Namespace<DefaultEventsMap, DefaultEventsMap, DefaultEventsMap, SocketData>;
export type RealtimeSocket = Socket<DefaultEventsMap, DefaultEventsMap, DefaultEventsMap, SocketData>;

/** The events a reconnecting client is replayed, per namespace (docs/api.md section 6). */
export const REPLAYABLE: Record<'/' | '/admin', readonly string[]> = {
  '/': ['new-message', 'new-notification', 'post-liked', 'task-created', 'task-updated', 'task-deleted'],
  '/admin': ['audit-record'],
};

export const userRoom = (id: number) => `user:${id}`;
export const sessionRoom = (id: number) => `session:${id}`;
export const projectRoom = (id: number) => `project:${id}`;

/** The rooms whose events a socket receives (its own id and its session room are not event rooms). */
export function eventRooms(socket: RealtimeSocket): string[] {
  return [...socket.rooms].filter((r) => r !== socket.id && !r.startsWith('session:'));
}
