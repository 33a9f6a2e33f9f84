// Everything the console reads from the service, behind one small interface (ConsoleApi), so that
// the views know nothing of URLs, tokens or sockets. Self-contained (fetch and socket.io-client):
// the @teamlog/client library (client/) can take its place behind the same interface.
//
// Tokens live in this module's memory only: a reload or a new tab signs in again. The refresh
// token is used to renew the access token before it expires (and once more on a 401
// TOKEN_EXPIRED) but is never stored: sessionStorage is copied into a duplicated tab, and two tabs
// spending one refresh token is what the service treats as theft (SESSION_REVOKED, every session
// token revoked).
import { io, type Socket } from 'socket.io-client';

const API = '/api/v1';

export interface User {
  id: number;
  email: string;
  name: string;
  role: 'ADMIN' | 'USER' | string;
}

export interface AuditRecord {
  id: number;
  actor_id: number | null;
  action: string;
  resource_type: string;
  resource_id: number | null;
  timestamp: string;
  result: string;
  metadata: Record<string, unknown>;
  ip: string | null;
  user_agent: string | null;
  request_id: string;
}

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

export interface InclusionProof {
  id: number;
  seq: number;
  tree_size: number;
  leaf_hash: string;
  audit_path: string[];
  sealed: Record<string, unknown>;
}

export interface CheckpointJson {
  origin: string;
  tree_size: number;
  root_hash: string;
  prev_checkpoint_hash: string | null;
  key_id: string;
  signature: string;
  created_at: string;
  note: string;
}

export interface PublicKey {
  key_id: string;
  algorithm: string;
  public_key: string;
  note_verifier_key: string;
  created_at: string;
}

export type ExportFormat = 'csv' | 'ndjson';

/** A refusal as the service words it (application/problem+json), or a network failure (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
  ) {
    super(detail);
    this.name = 'ApiError';
  }
}

export type LiveState = 'connecting' | 'live' | 'reconnecting' | 'off';

export interface LiveHandlers {
  /** A record committed after the subscription began (or replayed after a reconnect). */
  record(record: AuditRecord): void;
  /** What was missed while disconnected is no longer kept: reload the list. */
  resync(): void;
  /**
   * Reconnected before any event told where numbering stood (/admin sends nothing on connect
   * that carries an event_id), so there was nothing to resume from: read what is new instead.
   */
  reconnectedWithoutPosition(): void;
  state(state: LiveState, detail?: string): void;
}

export interface LiveSubscription {
  close(): void;
}

export interface ConsoleApi {
  readonly user: User | undefined;
  signIn(email: string, password: string): Promise<User>;
  signOut(): Promise<void>;
  /** Called once when the session ends without signOut (refresh refused, token revoked). */
  onSessionEnd(listener: (why: string) => void): void;
  listAuditLogs(params: { q?: string; cursor?: string | null; limit?: number }): Promise<Page<AuditRecord>>;
  /** The inclusion proof of a record; undefined while the record is not sealed (404). */
  proof(id: number, treeSize?: number): Promise<InclusionProof | undefined>;
  /** The newest signed checkpoint; undefined before the first one (404). */
  latestCheckpoint(): Promise<CheckpointJson | undefined>;
  publicKeys(): Promise<PublicKey[]>;
  /** The whole export of a query, as a file to hand to the browser's download. */
  exportFile(format: ExportFormat, q: string): Promise<Blob>;
  subscribeAuditRecords(handlers: LiveHandlers): LiveSubscription;
}

interface Tokens {
  access: string;
  refresh: string;
  expiresIn: number;
}

async function problemOf(res: Response): Promise<ApiError> {
  const body = (await res.json().catch(() => null)) as { code?: string; detail?: string; title?: string } | null;
  return new ApiError(res.status, body?.code ?? `HTTP_${res.status}`, body?.detail ?? body?.title ?? `HTTP ${res.status}`);
}

export function createConsoleApi(): ConsoleApi {
  let tokens: Tokens | undefined;
  let user: User | undefined;
  let refreshTimer: ReturnType<typeof setTimeout> | undefined;
  let refreshing: Promise<boolean> | undefined;
  const sockets = new Set<Socket>();
  const endListeners: Array<(why: string) => void> = [];

  function end(why: string): void {
    const had = tokens !== undefined;
    clear();
    if (had) for (const l of endListeners) l(why);
  }

  function clear(): void {
    clearTimeout(refreshTimer);
    tokens = undefined;
    user = undefined;
    for (const s of sockets) s.disconnect();
    sockets.clear();
  }

  function keep(t: { access_token: string; refresh_token: string; expires_in: number }): void {
    tokens = { access: t.access_token, refresh: t.refresh_token, expiresIn: t.expires_in };
    clearTimeout(refreshTimer);
    // At four fifths of its life, so that a socket gets its reauth before the old token expires.
    refreshTimer = setTimeout(() => void refresh(), Math.max(1, t.expires_in * 0.8) * 1000);
  }

  async function send(method: string, path: string, body?: unknown, accept = 'application/json'): Promise<Response> {
    const headers: Record<string, string> = { accept };
    if (tokens) headers.authorization = `Bearer ${tokens.access}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      return await fetch(API + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
    } catch (err) {
      throw new ApiError(0, 'NETWORK', `The service did not answer (${err instanceof Error ? err.message : String(err)})`);
    }
  }

  /** Renews the pair once at a time; false (and the session ended) when the service refuses. */
  function refresh(): Promise<boolean> {
    refreshing ??= (async () => {
      const current = tokens;
      if (!current) return false;
      const res = await send('POST', '/auth/refresh', { refresh_token: current.refresh });
      if (!res.ok) {
        end('Your session ended: sign in again.');
        return false;
      }
      keep(await res.json());
      for (const s of sockets) if (s.connected) s.emit('reauth', { token: tokens!.access });
      return true;
    })().finally(() => (refreshing = undefined));
    return refreshing;
  }

  /** A request with the session's token; one renewal and retry on an expired token. */
  async function call(method: string, path: string, body?: unknown, accept?: string): Promise<Response> {
    let res = await send(method, path, body, accept);
    if (res.status === 401 && tokens) {
      const problem = await problemOf(res.clone());
      if (problem.code === 'TOKEN_EXPIRED' && (await refresh())) res = await send(method, path, body, accept);
      else if (problem.code === 'TOKEN_REVOKED' || problem.code === 'UNAUTHENTICATED') end('Your session ended: sign in again.');
    }
    return res;
  }

  async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await call(method, path, body);
    if (!res.ok) throw await problemOf(res);
    return (await res.json()) as T;
  }

  /** GET that answers undefined on 404. */
  async function maybe<T>(path: string): Promise<T | undefined> {
    const res = await call('GET', path);
    if (res.status === 404) return undefined;
    if (!res.ok) throw await problemOf(res);
    return (await res.json()) as T;
  }

  const query = (params: Record<string, string | number | null | undefined>) => {
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') search.set(k, String(v));
    const text = search.toString();
    return text ? `?${text}` : '';
  };

  return {
    get user() {
      return user;
    },

    async signIn(email, password) {
      clear();
      const res = await send('POST', '/auth/login', { email, password });
      if (!res.ok) throw await problemOf(res);
      const body = (await res.json()) as { access_token: string; refresh_token: string; expires_in: number; user: User };
      keep(body);
      user = body.user;
      return body.user;
    },

    async signOut() {
      if (tokens) await send('POST', '/auth/logout').catch(() => undefined);
      clear();
    },

    onSessionEnd(listener) {
      endListeners.push(listener);
    },

    listAuditLogs: ({ q, cursor, limit }) => json<Page<AuditRecord>>('GET', `/audit-logs${query({ q: q?.trim(), cursor, limit })}`),

    proof: (id, treeSize) => maybe<InclusionProof>(`/audit-logs/${id}/proof${query({ tree_size: treeSize })}`),

    latestCheckpoint: () => maybe<CheckpointJson>('/audit-logs/checkpoints/latest'),

    publicKeys: () => json<PublicKey[]>('GET', '/audit-logs/public-keys'),

    async exportFile(format, q) {
      const res = await call('GET', `/audit-logs/export${query({ format, q: q.trim() })}`, undefined, format === 'csv' ? 'text/csv' : 'application/x-ndjson');
      if (!res.ok) throw await problemOf(res);
      return res.blob();
    },

    subscribeAuditRecords(handlers) {
      let lastEventId: number | undefined;
      // auth as a function: every reconnection sends the current token and where it stopped.
      const socket = io('/admin', {
        path: '/socket.io',
        transports: ['websocket'],
        auth: (cb) => cb(lastEventId === undefined ? { token: tokens?.access } : { token: tokens?.access, last_event_id: lastEventId }),
      });
      sockets.add(socket);
      const seen = (payload: { event_id?: unknown }) => {
        const id = payload.event_id;
        if (typeof id === 'number' && Number.isSafeInteger(id) && (lastEventId === undefined || id > lastEventId)) lastEventId = id;
      };
      handlers.state('connecting');
      let connectedBefore = false;
      socket.on('connect', () => {
        handlers.state('live');
        if (connectedBefore && lastEventId === undefined) handlers.reconnectedWithoutPosition();
        connectedBefore = true;
      });
      socket.on('disconnect', (reason) => handlers.state(socket.active ? 'reconnecting' : 'off', reason));
      socket.on('connect_error', (err: Error & { data?: { code?: string } }) => {
        // An expired token: renew it, and the next attempt's auth carries the new one.
        if (err.data?.code === 'TOKEN_EXPIRED') void refresh();
        handlers.state(socket.active ? 'reconnecting' : 'off', err.message);
      });
      socket.on('audit-record', (payload: AuditRecord & { event_id?: number }) => {
        seen(payload);
        const { event_id: _eventId, ...record } = payload;
        handlers.record(record);
      });
      socket.on('resync-required', (payload: { event_id?: number }) => {
        // Where numbering stands now: the next reconnect resumes from here, not from the gap.
        if (typeof payload.event_id === 'number') lastEventId = payload.event_id;
        handlers.resync();
      });
      return {
        close() {
          sockets.delete(socket);
          socket.off();
          socket.disconnect();
          handlers.state('off');
        },
      };
    },
  };
}
