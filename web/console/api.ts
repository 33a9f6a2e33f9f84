// Everything the console reads from the service, behind one small interface (ConsoleApi), so that
// the views know nothing of URLs, tokens or sockets. Built on @teamlog/client (client/, resolved
// to its source by tsconfig.web.json): its sessions renew the access token before it expires
// (and once on a 401 TOKEN_EXPIRED), its lists walk keyset pages, and its real-time side resumes
// /admin from the last event_id after a dropped connection and sends reauth with each new token.
//
// Tokens live in memory only (the client's default store, one client per sign-in): a reload or
// a new tab signs in again. Never sessionStorage: it is copied into a duplicated tab, and two
// tabs spending one refresh token is what the service treats as theft (SESSION_REVOKED, every
// session token revoked).
import {
  TeamlogError,
  createClient,
  type AuditCheckpoint,
  type AuditInclusionProof,
  type AuditPublicKey,
  type AuditQuery,
  type AuditRecord,
  type AuditStats,
  type Page,
  type TeamlogClient,
  type User,
  type operations,
} from '@teamlog/client';
import type { Actors } from './sentence.js';

export type { AuditRecord, AuditStats, Page, User };
/** A page of records with the people it names (`include=actors`). */
export type AuditPage = Page<AuditRecord> & { actors: Actors };
export type Witnesses = operations['getAuditWitnesses']['responses'][200]['content']['application/json'];
export type InclusionProof = AuditInclusionProof;
export type CheckpointJson = AuditCheckpoint;
export type PublicKey = AuditPublicKey;

/** `ocsf`: NDJSON of OCSF events, for a SIEM. */
export type ExportFormat = 'csv' | 'ndjson' | 'ocsf';

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
  /** A page of the query's records, with the people it names. */
  listAuditLogs(params: { q?: string; cursor?: string | null; limit?: number }): Promise<AuditPage>;
  /** The query's records counted over time, its top actions and actors; undefined from a service that has no /audit-logs/stats. */
  stats(q: string): Promise<AuditStats | undefined>;
  /** The witness policy and the witnesses' keys; undefined when the log asks no witness (404). */
  witnesses(): Promise<Witnesses | undefined>;
  /** The inclusion proof of a record; undefined while the record is not sealed (404). */
  proof(id: number, treeSize?: number): Promise<InclusionProof | undefined>;
  /** The newest signed checkpoint; undefined before the first one (404). */
  latestCheckpoint(): Promise<CheckpointJson | undefined>;
  publicKeys(): Promise<PublicKey[]>;
  /** The whole export of a query, as a file to hand to the browser's download. */
  exportFile(format: ExportFormat, q: string): Promise<Blob>;
  subscribeAuditRecords(handlers: LiveHandlers): LiveSubscription;
}

const SESSION_ENDED = 'Your session ended: sign in again.';

/** The client's errors in the console's terms: its problems as ApiError, a fetch that never got an answer as status 0. */
async function guard<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof TeamlogError) throw new ApiError(err.status, err.code, err.detail);
    // fetch's own failure (no network, connection refused), after the client's retries.
    if (err instanceof TypeError) throw new ApiError(0, 'NETWORK', `The service did not answer (${err.message})`);
    throw err;
  }
}

/** A GET that answers undefined on 404. */
async function maybe<T>(work: () => Promise<T>): Promise<T | undefined> {
  try {
    return await guard(work);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return undefined;
    throw err;
  }
}

export function createConsoleApi(): ConsoleApi {
  /** The signed-in session's client; a new one per sign-in, so that nothing of a session outlives it. */
  let client: TeamlogClient | undefined;
  const endListeners: Array<(why: string) => void> = [];
  /** Whether the service takes include=actors (until one refuses it). */
  let withActors = true;

  function session(): TeamlogClient {
    if (!client) throw new ApiError(401, 'UNAUTHENTICATED', SESSION_ENDED);
    return client;
  }

  function newClient(): TeamlogClient {
    const c = createClient({
      baseUrl: location.origin,
      // Every answer fresh from the service: the status line and Verify compare what it says now.
      fetch: (input, init) => fetch(input, { ...init, cache: 'no-store' }),
    });
    c.on('signed-out', ({ reason }) => {
      if (client !== c) return;
      client = undefined;
      c.close();
      // Refused by the service (revoked, a refresh refused, the account deactivated), not signOut().
      if (reason !== 'logout') for (const l of endListeners) l(SESSION_ENDED);
    });
    return c;
  }

  function drop(): void {
    client?.close();
    client = undefined;
  }

  return {
    get user() {
      return client?.user;
    },

    async signIn(email, password) {
      drop();
      const c = newClient();
      try {
        const user = await guard(() => c.login(email, password));
        client = c;
        return user;
      } catch (err) {
        c.close();
        throw err;
      }
    },

    async signOut() {
      const c = client;
      // The client ends its session (and its sockets) even when the service does not answer.
      if (c) await c.logout().catch(() => undefined);
      if (client === c) drop();
    },

    onSessionEnd(listener) {
      endListeners.push(listener);
    },

    async listAuditLogs({ q, cursor, limit }) {
      const query: AuditQuery & { include?: 'actors' } = { q: q?.trim() || undefined, limit };
      if (withActors) query.include = 'actors';
      try {
        const page = (await guard(() => session().auditLogs.list(query).page(cursor ?? null))) as Page<AuditRecord> & { actors?: Actors };
        return { ...page, actors: page.actors ?? {} };
      } catch (err) {
        // A service older than include=actors refuses the parameter (400 VALIDATION_FAILED, not
        // the INVALID_QUERY of a bad q): the page then names people by id, as it used to.
        if (!(withActors && err instanceof ApiError && err.status === 400 && err.code === 'VALIDATION_FAILED')) throw err;
        withActors = false;
        return this.listAuditLogs({ q, cursor, limit });
      }
    },

    stats: (q) => maybe(() => session().auditLogs.stats({ q: q.trim() || undefined })),

    witnesses: () => maybe(() => session().auditLogs.witnesses()),

    proof: (id, treeSize) => maybe(() => session().auditLogs.inclusionProof(id, treeSize === undefined ? undefined : { tree_size: treeSize })),

    latestCheckpoint: () => maybe(() => session().auditLogs.latestCheckpoint()),

    publicKeys: () => guard(() => session().auditLogs.publicKeys()),

    exportFile: (format, q) => guard(async () => (await session().auditLogs.export({ format, q: q.trim() || undefined })).blob()),

    subscribeAuditRecords(handlers) {
      const realtime = session().realtime;
      let connectedBefore = false;
      handlers.state('connecting');
      const offs = [
        realtime.on('audit-record', ({ event_id: _eventId, ...record }) => handlers.record(record)),
        realtime.on('connected', ({ namespace, resumedFrom }) => {
          if (namespace !== '/admin') return;
          handlers.state('live');
          if (connectedBefore && resumedFrom === undefined) handlers.reconnectedWithoutPosition();
          connectedBefore = true;
        }),
        // Dropped: the client reconnects by itself and resumes from the last event_id. Closed by
        // the client (the session ended): off.
        realtime.on('disconnected', ({ namespace, reason }) => namespace === '/admin' && handlers.state(reason === 'io client disconnect' ? 'off' : 'reconnecting', reason)),
        realtime.on('resync-required', ({ namespace }) => namespace === '/admin' && handlers.resync()),
        realtime.on('error', ({ namespace, error }) => {
          // Refused for good (not an ADMIN any more); else one of these handlers threw: reported as the page's error.
          if (namespace === '/admin' && error instanceof TeamlogError && error.status === 403) handlers.state('off', error.detail);
          else setTimeout(() => {
            throw error;
          });
        }),
      ];
      return {
        close() {
          for (const off of offs) off();
          // Live only from the next subscription on: what was committed while Live was off is not replayed.
          realtime.disconnect('/admin', { resume: false });
          handlers.state('off');
        },
      };
    },
  };
}
