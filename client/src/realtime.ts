// Real-time subscriptions that never miss (docs/api.md section 6): one Socket.IO connection per
// client for both namespaces, on websocket (any instance may answer); every (re)connect sends
// the last event_id received, so the service replays what was missed, from the database, on
// whichever instance answers; handlers run one event at a time, in event_id order, once each
// (what a replay sends again is dropped by its id); resync-required reaches the application
// with the advice to reload; the access token is sent again (reauth) each time it is renewed,
// before the old one expires.
import { Manager, type Socket } from 'socket.io-client';
import type { Auth } from './auth.js';
import { Emitter, reportLater } from './emitter.js';
import { TeamlogError, clientProblem } from './errors.js';
import type { AuditRecord, Message, Notification, ProblemCode, Task } from './types.js';

export type Namespace = '/' | '/admin';
type Numbered = { event_id: number };

/** What the service pushes, by event name: each payload carries its event_id. */
export interface ServerEvents {
  'new-message': Message & Numbered;
  'new-notification': Notification & Numbered;
  'post-liked': { post_id: number; user_id: number; like_count: number } & Numbered;
  'task-created': Task & Numbered;
  'task-updated': Task & Numbered;
  'task-deleted': { id: number; project_id: number } & Numbered;
  'user-online': { user_id: number } & Numbered;
  'user-offline': { user_id: number } & Numbered;
  'presence-snapshot': { online: number[] } & Numbered;
  /** On /admin (ADMINs): each audit record after its commit. */
  'audit-record': AuditRecord & Numbered;
}

/**
 * What was missed is no longer kept (EVENT_RETENTION_HOURS, 24 h by default) or the id resumed
 * from is unknown: the handlers of this namespace did not get everything, so reload the state
 * from the REST lists. Events after `event_id` follow as usual.
 */
export interface ResyncRequired {
  namespace: Namespace;
  event_id: number;
  oldest_event_id: number;
  reason: 'retention' | 'unknown_event_id' | 'invalid_last_event_id';
  advice: 'reload';
}

export interface RealtimeEvents extends ServerEvents {
  'resync-required': ResyncRequired;
  /** Connected; `resumedFrom` is the event_id the service replays after (undefined: live only). */
  connected: { namespace: Namespace; resumedFrom: number | undefined };
  disconnected: { namespace: Namespace; reason: string };
  /** A connection refused for good (forbidden: /admin for a non-ADMIN), or a handler that threw. */
  error: { namespace: Namespace; error: unknown };
}

/** Events the service replays after a reconnect, so that an id seen twice is a repeat (presence is not replayed). */
const REPLAYED: Record<Namespace, ReadonlySet<string>> = {
  '/': new Set(['new-message', 'new-notification', 'post-liked', 'task-created', 'task-updated', 'task-deleted']),
  '/admin': new Set(['audit-record']),
};
/** Events whose event_id is the instance's position: everything for this socket up to it was sent before them. */
const MARKERS = new Set(['presence-snapshot', 'user-online', 'user-offline']);

const namespaceOf = (event: keyof RealtimeEvents): Namespace | undefined =>
  event === 'audit-record' ? '/admin' : REPLAYED['/'].has(event) || MARKERS.has(event) ? '/' : undefined;

export interface RealtimeOptions {
  /** Resume from these event_ids on the first connect (a position the application kept, e.g. across reloads). */
  lastEventId?: Partial<Record<Namespace, number>>;
  /** Longest wait between reconnection attempts (default 5000 ms). */
  reconnectDelayMaxMs?: number;
}

export class Realtime {
  private readonly events = new Emitter<RealtimeEvents>();
  private readonly channels = new Map<Namespace, Channel>();
  private manager: Manager | undefined;

  constructor(
    private readonly baseUrl: string,
    private readonly auth: Auth,
    private readonly options: RealtimeOptions = {},
  ) {
    auth.on('token', ({ accessToken }) => this.channels.forEach((c) => c.reauth(accessToken)));
    auth.on('signed-out', () => this.close());
  }

  /**
   * Calls `handler` with each `event`, in event_id order, once each, across reconnects (an
   * async handler is awaited before the next event). Subscribing to a service event connects
   * its namespace. Answers the function that unsubscribes.
   */
  on<K extends keyof RealtimeEvents>(event: K, handler: (payload: RealtimeEvents[K]) => unknown): () => void {
    const off = this.events.on(event, handler);
    const ns = namespaceOf(event);
    if (ns) this.connect(ns);
    return off;
  }

  off<K extends keyof RealtimeEvents>(event: K, handler: (payload: RealtimeEvents[K]) => unknown): void {
    this.events.off(event, handler);
  }

  /** Connects a namespace (done by on() for its events): `/` for every user, `/admin` for ADMINs. */
  connect(namespace: Namespace = '/'): void {
    const existing = this.channels.get(namespace);
    if (existing) return existing.open();
    this.manager ??= new Manager(this.baseUrl, {
      path: '/socket.io',
      // Several instances without sticky sessions: no long-polling handshake to lose.
      transports: ['websocket'],
      autoConnect: false,
      reconnectionDelay: 250,
      reconnectionDelayMax: this.options.reconnectDelayMaxMs ?? 5000,
    });
    const channel = new Channel(namespace, this.manager, this.auth, this.events, this.options.lastEventId?.[namespace], this.options.reconnectDelayMaxMs ?? 5000);
    this.channels.set(namespace, channel);
    channel.open();
  }

  /** Resolves once the namespace is connected (connecting it if need be); what was committed from then on reaches its handlers. */
  ready(namespace: Namespace = '/'): Promise<void> {
    this.connect(namespace);
    const socket = this.channels.get(namespace)!.socket;
    if (socket.connected) return Promise.resolve();
    return new Promise((resolve) => socket.once('connect', () => resolve()));
  }

  /** The last event_id whose handlers have run, per namespace: keep it to resume after a reload (options.lastEventId). */
  lastEventId(namespace: Namespace = '/'): number | undefined {
    return this.channels.get(namespace)?.processed ?? this.options.lastEventId?.[namespace];
  }

  /** Whether the namespace's socket is connected now. */
  connected(namespace: Namespace = '/'): boolean {
    return this.channels.get(namespace)?.socket.connected ?? false;
  }

  /** Sends a chat message over the socket (`room` default general); answers the stored message. */
  async sendMessage(message: { text: string; room?: string }, timeoutMs = 10_000): Promise<Message> {
    this.connect('/');
    const socket = this.channels.get('/')!.socket;
    const answer = (await socket.timeout(timeoutMs).emitWithAck('new-message', message)) as
      | { ok: true; message: Message }
      | { ok: false; error: { code: ProblemCode; message: string } };
    if (answer.ok) return answer.message;
    const status = answer.error.code === 'RATE_LIMITED' ? 429 : answer.error.code === 'PAYLOAD_TOO_LARGE' ? 413 : answer.error.code === 'FORBIDDEN' ? 403 : 400;
    throw new TeamlogError(clientProblem(status, answer.error.code, answer.error.message));
  }

  /**
   * Disconnects one namespace and leaves the other connected (close() disconnects both). Its
   * handlers stay registered (remove them with the functions on() answered), and on() or
   * connect() opens it again: resuming after the last event received, so that what was committed
   * meanwhile is replayed; or, with `{ resume: false }`, live only, from the reconnection on.
   */
  disconnect(namespace: Namespace, { resume = true }: { resume?: boolean } = {}): void {
    this.channels.get(namespace)?.close(resume);
    if (!resume && this.options.lastEventId) delete this.options.lastEventId[namespace];
  }

  /** Closes every socket (subscriptions are kept: on() or connect() opens them again, resuming). */
  close(): void {
    for (const [ns, channel] of this.channels) {
      channel.close();
      this.options.lastEventId = { ...this.options.lastEventId, [ns]: channel.received };
    }
    this.channels.clear();
    this.manager = undefined;
  }
}

class Channel {
  readonly socket: Socket;
  /** The newest event_id received (queued or handled): what a reconnect resumes after. */
  received: number | undefined;
  /** The newest event_id whose handlers have run. */
  processed: number | undefined;
  private readonly queue: Array<[string, Record<string, unknown>]> = [];
  private draining = false;
  /** Until open(), and after close(). */
  private closed = true;
  private attempts = 0;
  private retry: ReturnType<typeof setTimeout> | undefined;
  private resumedFrom: number | undefined;

  constructor(
    private readonly namespace: Namespace,
    manager: Manager,
    private readonly auth: Auth,
    private readonly events: Emitter<RealtimeEvents>,
    start: number | undefined,
    private readonly maxDelayMs: number,
  ) {
    this.received = this.processed = start;
    this.socket = manager.socket(namespace, {
      // Called on every (re)connect: a valid token, and where to resume from.
      auth: (cb) => {
        this.resumedFrom = this.received;
        this.auth.accessToken().then(
          (token) => cb(this.received === undefined ? { token } : { token, last_event_id: this.received }),
          () => cb({}),
        );
      },
    });
    this.socket.onAny((name: string, payload: unknown) => this.receive(name, payload));
    this.socket.on('connect', () => {
      this.attempts = 0;
      this.events.emit('connected', { namespace, resumedFrom: this.resumedFrom });
    });
    this.socket.on('disconnect', (reason) => {
      this.events.emit('disconnected', { namespace, reason });
      // Sent away by the service (an expired or revoked token, an instance stopping): not
      // retried by Socket.IO itself.
      if (reason === 'io server disconnect') this.reconnectLater(false);
    });
    this.socket.on('connect_error', (err: Error) => {
      if (this.socket.active) return; // a transport failure: Socket.IO retries by itself
      if (err.message === 'forbidden') {
        this.events.emit('error', { namespace, error: new TeamlogError(clientProblem(403, 'FORBIDDEN', `${namespace}: only ADMINs may connect`)) });
        return this.close();
      }
      // Over the service's rate limit: not before the window it names ends (retry_after, in seconds).
      const retryAfter = err.message === 'rate_limited' ? Number((err as Error & { data?: { retry_after?: unknown } }).data?.retry_after) : NaN;
      this.reconnectLater(err.message === 'unauthorized', Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : 0);
    });
  }

  /** Connects, or connects again after close() (the same socket: its Manager keeps one per namespace). */
  open(): void {
    if (!this.closed) return;
    this.closed = false;
    this.attempts = 0;
    this.socket.connect();
  }

  /** Disconnects; `resume` false forgets the position, so that the next open() is live only. */
  close(resume = true): void {
    this.closed = true;
    clearTimeout(this.retry);
    this.socket.disconnect();
    if (!resume) this.received = this.processed = undefined;
  }

  reauth(token: string): void {
    if (!this.socket.connected) return;
    this.socket
      .timeout(10_000)
      .emitWithAck('reauth', { token })
      .catch(() => {
        // No answer: at expiry the service disconnects the socket, and it reconnects with a fresh token.
      });
  }

  /** `atLeastMs`: a wait the service asked for (a rate limit's retry_after), which the backoff never shortens. */
  private reconnectLater(refresh: boolean, atLeastMs = 0): void {
    if (this.closed) return;
    clearTimeout(this.retry);
    const backoff = Math.min(this.maxDelayMs, 250 * 2 ** this.attempts++) * (0.5 + Math.random() / 2);
    const delay = atLeastMs > 0 ? atLeastMs + Math.random() * 1000 : backoff;
    this.retry = setTimeout(() => {
      if (this.closed) return;
      (refresh ? this.auth.refresh() : this.auth.accessToken()).then(
        () => !this.closed && this.socket.connect(),
        (err: unknown) => {
          // Signed out (the auth says so, and closes realtime); else the service is away: try again.
          if (!(err instanceof TeamlogError && err.status === 401)) this.reconnectLater(false);
        },
      );
    }, delay);
  }

  private receive(name: string, payload: unknown): void {
    if (typeof payload !== 'object' || payload === null) return;
    const p = payload as Record<string, unknown>;
    const id = typeof p.event_id === 'number' ? p.event_id : undefined;
    if (name === 'resync-required') {
      // The service goes on from its newest event: resuming from there is right from now on.
      if (id !== undefined) this.received = this.processed = id;
      this.enqueue(name, { ...p, namespace: this.namespace, advice: 'reload' });
      return;
    }
    if (REPLAYED[this.namespace].has(name) && id !== undefined) {
      if (this.received !== undefined && id <= this.received) return; // sent again by a replay: handled already
      this.received = id;
      this.enqueue(name, p);
      return;
    }
    if (MARKERS.has(name) && id !== undefined) this.received = Math.max(this.received ?? 0, id);
    this.enqueue(name, p);
  }

  private enqueue(name: string, payload: Record<string, unknown>): void {
    this.queue.push([name, payload]);
    if (!this.draining) void this.drain();
  }

  /** One event at a time: an async handler finishes before the next event's handlers start. */
  private async drain(): Promise<void> {
    this.draining = true;
    while (this.queue.length > 0) {
      const [name, payload] = this.queue.shift()!;
      for (const handler of this.events.listeners(name as keyof RealtimeEvents)) {
        try {
          await handler(payload as never);
        } catch (error) {
          if (this.events.listeners('error').length > 0) this.events.emit('error', { namespace: this.namespace, error });
          else reportLater(error);
        }
      }
      const id = payload.event_id;
      if (typeof id === 'number' && REPLAYED[this.namespace].has(name)) this.processed = Math.max(this.processed ?? 0, id);
    }
    this.draining = false;
  }
}
