// A user's socket slots (docs/api.md section 6): a handshake takes one before its socket can
// connect (presence.ts counts them across instances), and the socket gives it back once, when it
// disconnects or when its connection closes before it connected. Taking a user's first slot and
// giving back their last announce them online and offline (presence-notices.ts).
import type { FastifyBaseLogger } from 'fastify';
import type { Presence } from './presence.js';
import type { AnnouncePresence } from './presence-notices.js';
import type { RealtimeSocket } from './sockets.js';

/** Sockets (of both namespaces) one user may hold at once, on all instances together (docs/api.md section 6). */
export const MAX_SOCKETS_PER_USER = 20;
/** How long a handshake waits for Redis to count its socket before letting it in anyway. */
const SLOT_WAIT_MS = 1000;

export class SocketSlots {
  // Disconnects whose presence change is still on its way: a graceful stop waits for them, so
  // that their user-offline notices reach the other instances before Redis is let go.
  private readonly leaving = new Set<Promise<void>>();
  /** Gives back a socket's slot, once: when it disconnects, or when its connection closes before it connected. */
  private readonly releases = new WeakMap<RealtimeSocket, () => void>();
  /** Until a socket connects, what frees its slot if its connection closes first (Socket.IO then drops it without a disconnect event). */
  private readonly beforeConnect = new WeakMap<RealtimeSocket, () => void>();

  constructor(
    private readonly presence: Presence,
    private readonly announcePresence: AnnouncePresence,
    private readonly log: FastifyBaseLogger,
  ) {}

  /**
   * Takes one of the user's MAX_SOCKETS_PER_USER slots for the socket: false when they hold all
   * of them. Redis failing, the socket is let in (counted here; presence.ts publishes the count
   * once Redis is back): the limit then holds per instance. Redis slow, it is let in after
   * SLOT_WAIT_MS, and counted when Redis answers (or not at all if it then says 'full').
   */
  async take(socket: RealtimeSocket, userId: number, admin: boolean): Promise<boolean> {
    const taking = this.presence.connected(userId, { admin, max: MAX_SOCKETS_PER_USER }).then(
      (first) => {
        if (first === true && !admin) this.announcePresence([userId], true);
        return first;
      },
      (err: unknown) => {
        this.log.warn({ err }, 'presence: connect not recorded');
        return false as const;
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), SLOT_WAIT_MS)));
    const first = await Promise.race([taking, late]);
    clearTimeout(timer);
    if (first === 'full') return false;
    if (first === 'late') this.log.warn({ userId }, 'presence: Redis is slow to answer; a socket is let in before it is counted');
    const release = this.releaseOnce(taking, userId, admin);
    this.releases.set(socket, release);
    this.beforeConnect.set(socket, release);
    socket.conn.once('close', release);
    return true;
  }

  /** The socket connected: from now on its disconnect gives its slot back (giveBack), not its connection's close. */
  connected(socket: RealtimeSocket): void {
    const early = this.beforeConnect.get(socket);
    if (early) socket.conn.off('close', early);
    this.beforeConnect.delete(socket);
  }

  /** Gives back the socket's slot, if it took one and has not given it back yet. */
  giveBack(socket: RealtimeSocket): void {
    this.releases.get(socket)?.();
  }

  /** The presence changes of the sockets that went so far, still on their way. */
  departures(): Promise<void[]> {
    return Promise.all(this.leaving);
  }

  private releaseOnce(taking: Promise<boolean | 'full'>, userId: number, admin: boolean): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // After its connect is recorded (or refused: then there is nothing to give back).
      const recorded = taking
        .then((taken) => (taken === 'full' ? false : this.presence.disconnected(userId, { admin })))
        .then((last) => void (last && !admin && this.announcePresence([userId], false)))
        .catch((err: unknown) => this.log.warn({ err }, 'presence: disconnect not recorded'));
      this.leaving.add(recorded);
      void recorded.finally(() => this.leaving.delete(recorded));
    };
  }
}
