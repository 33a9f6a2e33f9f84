// Real socket.io-client connections for tests: connect as a session (websocket only, as
// clients of several instances must), and record every event a socket receives, in order.
import { io as ioClient, type Socket } from 'socket.io-client';
import type { Session } from './client.js';

export type ClientSocket = Socket;

export interface ConnectOptions {
  namespace?: '/' | '/admin';
  lastEventId?: number | string;
  /** Replaces the handshake's auth object (for malformed handshakes). */
  auth?: Record<string, unknown>;
  /** Another server than the session's own (a second instance). */
  url?: string;
  /** Headers of the handshake's request, e.g. the X-Forwarded-For of a Client's address. */
  headers?: Record<string, string>;
}

/** Connects; resolves once connected, rejects with the connect_error (its message is the contract's). */
export async function connect(session: Session | undefined, opts: ConnectOptions = {}): Promise<ClientSocket> {
  return (await connectRecording(session, opts)).socket;
}

/**
 * Connects with a Recorder attached before the connection opens: what the server sends at once
 * (the presence snapshot, a replay) can arrive in the same read as the connection itself.
 */
export function connectRecording(session: Session | undefined, opts: ConnectOptions = {}): Promise<{ socket: ClientSocket; rec: Recorder }> {
  const url = (opts.url ?? session?.client.server.url ?? '') + (opts.namespace === '/admin' ? '/admin' : '');
  const auth = opts.auth ?? { token: session?.token, ...(opts.lastEventId !== undefined ? { last_event_id: opts.lastEventId } : {}) };
  const socket = ioClient(url, {
    path: '/socket.io', transports: ['websocket'], auth, reconnection: false, forceNew: true, timeout: 5000,
    ...(opts.headers ? { extraHeaders: opts.headers } : {}),
  });
  const rec = new Recorder(socket);
  return new Promise((resolve, reject) => {
    socket.once('connect', () => resolve({ socket, rec }));
    socket.once('connect_error', (err: Error & { data?: unknown }) => {
      socket.close();
      reject(err);
    });
  });
}

export interface Received {
  name: string;
  payload: Record<string, unknown>;
}

/** Every event a socket receives from now on, in order (connect/disconnect excluded). */
export class Recorder {
  readonly events: Received[] = [];
  private waiters: Array<() => void> = [];

  constructor(readonly socket: ClientSocket) {
    socket.onAny((name: string, payload: Record<string, unknown>) => {
      this.events.push({ name, payload });
      for (const w of this.waiters) w();
    });
  }

  named(name: string): Array<Record<string, unknown>> {
    return this.events.filter((e) => e.name === name).map((e) => e.payload);
  }

  /** Resolves with the first recorded event that matches, waiting up to `ms`. */
  async waitFor(match: (e: Received) => boolean, ms = 3000, what = 'an event'): Promise<Received> {
    const found = () => this.events.find(match);
    const deadline = Date.now() + ms;
    while (!found()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${what} within ${ms} ms; got ${JSON.stringify(this.events.map((e) => e.name))}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
      this.waiters = [];
    }
    return found()!;
  }

  /** Waits for `count` events named `name`. */
  async waitForCount(name: string, count: number, ms = 3000): Promise<Array<Record<string, unknown>>> {
    await this.waitFor(() => this.named(name).length >= count, ms, `${count} ${name} events`);
    return this.named(name);
  }
}

/** Resolves when the socket disconnects, with the reason; rejects after `ms`. */
export function disconnection(socket: ClientSocket, ms = 3000): Promise<string> {
  if (!socket.connected) return Promise.resolve('already disconnected');
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`still connected after ${ms} ms`)), ms);
    socket.once('disconnect', (reason) => {
      clearTimeout(t);
      resolve(reason);
    });
  });
}

/** Emits with an acknowledgement and resolves with the answer. */
export function emitWithAck(socket: ClientSocket, event: string, payload: unknown, ms = 5000): Promise<Record<string, unknown>> {
  return socket.timeout(ms).emitWithAck(event, payload) as Promise<Record<string, unknown>>;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Sends a new-message event as a raw Socket.IO EVENT packet ("2" + JSON; the engine adds its own
 * message prefix), as a hostile client would: the client library cannot even encode some
 * payloads (thousands of levels of nesting). `ackId` asks for an acknowledgement, which arrives
 * as a raw ACK packet and is read with rawAck().
 */
export function emitRaw(socket: ClientSocket, json: string, ackId?: number): void {
  (socket.io.engine as unknown as { write(data: string): void }).write(`2${ackId ?? ''}[${JSON.stringify('new-message')},${json}]`);
}

/** The payload of the raw ACK packet numbered `ackId` (see emitRaw). */
export function rawAck(socket: ClientSocket, ackId: number, ms = 3000): Promise<unknown> {
  const engine = socket.io.engine as unknown as { on(e: 'message', f: (data: unknown) => void): void; off(e: 'message', f: (data: unknown) => void): void };
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no acknowledgement ${ackId} within ${ms} ms`)), ms);
    const onMessage = (data: unknown) => {
      const prefix = `3${ackId}[`;
      if (typeof data === 'string' && data.startsWith(prefix)) {
        clearTimeout(t);
        engine.off('message', onMessage);
        resolve((JSON.parse(data.slice(prefix.length - 1)) as unknown[])[0]);
      }
    };
    engine.on('message', onMessage);
  });
}
