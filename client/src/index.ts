// @teamlog/client: the Teamlog API from TypeScript or JavaScript, in Node 20 and in browsers.
//
//   const teamlog = createClient({ baseUrl: 'https://teamlog.example.com' });
//   await teamlog.login(email, password);
//   for await (const task of teamlog.tasks.list({ project_id: 12 })) console.log(task.title);
//   teamlog.realtime.on('task-updated', (task) => render(task));
//
// See README.md for the guarantees (and their limits).
import { Auth, memoryStore, type AuthEvents, type TokenStore } from './auth.js';
import { Http, type HttpOptions } from './http.js';
import { Realtime, type RealtimeOptions } from './realtime.js';
import { auditLogs, messages, notifications, posts, profile, projects, tasks, users } from './resources.js';
import type { ResultOf } from './types.js';

export { TeamlogError, type FieldError } from './errors.js';
export { localStorageStore, memoryStore, type SignOutReason, type StoredSession, type TokenStore, type AuthEvents } from './auth.js';
export { Paginated } from './pages.js';
export { Realtime, type Namespace, type RealtimeEvents, type RealtimeOptions, type ResyncRequired, type ServerEvents } from './realtime.js';
export type { AuditExportQuery, AuditQuery, AuditStats, AuditStatsQuery, ChangeOptions, CreateOptions, RequestOptions } from './resources.js';
export type * from './types.js';

export interface ClientOptions {
  /** The service's origin, e.g. `https://teamlog.example.com` (the API is under /api/v1, sockets under /socket.io). */
  baseUrl: string;
  /** Where the session is kept: memoryStore() (default), localStorageStore() in a browser, or your own. */
  store?: TokenStore;
  /** Refresh the access token this long before it expires (default: 60 s, or half the life of a shorter-lived token). */
  refreshMarginMs?: number;
  /** Refresh tokens on a timer before they expire (default true). */
  autoRefresh?: boolean;
  /** Retries of a call that a retry can fix: network failure, 503, 429 or 409 with Retry-After (default 2). */
  retries?: number;
  /** The longest Retry-After waited for by the client itself, in seconds (default 5). */
  maxRetryAfter?: number;
  /** Send If-Match with the ETag last seen of the resource a change is for (default true). */
  ifMatch?: boolean;
  /** Headers sent with every request (e.g. X-Request-Id). */
  headers?: Record<string, string>;
  /** A fetch of your own (default: the global one). */
  fetch?: typeof fetch;
  realtime?: RealtimeOptions;
}

export type TeamlogClient = ReturnType<typeof createClient>;

export function createClient(options: ClientOptions) {
  const httpOptions: HttpOptions = {
    baseUrl: options.baseUrl,
    fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
    retries: options.retries ?? 2,
    maxRetryAfter: options.maxRetryAfter ?? 5,
    ifMatch: options.ifMatch ?? true,
    headers: options.headers ?? {},
  };
  const http = new Http(httpOptions);
  const auth = new Auth(
    async <T>(path: string, body: unknown, token?: string) =>
      (await http.call<T>('POST', path, { body, auth: false, headers: token ? { authorization: `Bearer ${token}` } : {} })).data,
    { store: options.store ?? memoryStore(), refreshMarginMs: options.refreshMarginMs, autoRefresh: options.autoRefresh },
  );
  http.auth = auth;
  const realtime = new Realtime(options.baseUrl, auth, options.realtime);

  return {
    /** Logs in; the session then refreshes itself. Answers the user. */
    login: (email: string, password: string) => auth.login(email, password),
    /** Logs out here and on the service (this session's tokens stop working at once); closes the sockets. */
    logout: () => auth.logout(),
    /** signed-in, signed-out (logout, revoked elsewhere, deactivated), token. */
    on: <K extends keyof AuthEvents>(event: K, handler: (payload: AuthEvents[K]) => unknown) => auth.on(event, handler),
    /** Whether a session is held (or kept in the store). */
    isSignedIn: () => auth.isSignedIn(),
    /** A valid access token (refreshed if it is about to expire), for a request of your own. */
    accessToken: () => auth.accessToken(),
    /** Changes the caller's password; every other session of theirs is revoked. */
    changePassword: async (currentPassword: string, newPassword: string) =>
      void (await http.call('PUT', '/auth/password', { body: { current_password: currentPassword, new_password: newPassword }, ifMatch: false })),
    /** The user last logged in (undefined after a reload until you fetch the profile). */
    get user() {
      return auth.user;
    },
    /** The ETag last seen of a resource path (`/tasks/5`), which changes send as If-Match. */
    versionOf: (resource: string) => http.versionOf(resource),
    version: async () => (await http.call<ResultOf<'getVersion'>>('GET', '/version', { auth: false })).data,
    users: users(http),
    profile: profile(http),
    projects: projects(http),
    tasks: tasks(http),
    posts: posts(http),
    messages: messages(http),
    notifications: notifications(http),
    auditLogs: auditLogs(http),
    realtime,
    /** Stops the refresh timer and closes the sockets (the session stays in the store). */
    close: () => {
      auth.close();
      realtime.close();
    },
  };
}
