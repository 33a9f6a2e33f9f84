// The API's resources, one object each (docs/api.md section 4), typed by the generated document:
// lists answer Paginated (async iterators over keyset pages), creations send an Idempotency-Key,
// changes send If-Match with the version last seen (opt out with `{ ifMatch: false }`).
import type { CallOptions, Http } from './http.js';
import { Paginated } from './pages.js';
import type { AuditListPage, AuditRecord, BodyOf, ListQuery, OperationId, Page, QueryOf, ResultOf } from './types.js';

/** Options of one call: an AbortSignal, headers, and for creations and changes the keys that make them safe. */
export type RequestOptions = Pick<CallOptions, 'signal' | 'headers'>;
export type CreateOptions = RequestOptions & Pick<CallOptions, 'idempotencyKey'>;
export type ChangeOptions = RequestOptions & Pick<CallOptions, 'ifMatch'>;

type Item<Op extends OperationId> = ResultOf<Op> extends Page<infer T> ? T : never;

function lister<Op extends OperationId>(http: Http, path: string) {
  return (query?: ListQuery<Op>, opts?: RequestOptions): Paginated<Item<Op>> => {
    const { cursor, ...filters } = (query ?? {}) as { cursor?: string | null };
    return new Paginated(async (next) => (await http.call<Page<Item<Op>>>('GET', path, { ...opts, query: { ...filters, cursor: next } })).data, cursor ?? null);
  };
}

const get = async <Op extends OperationId>(http: Http, path: string, opts?: CallOptions) => (await http.call<ResultOf<Op>>('GET', path, opts)).data;
const post = async <Op extends OperationId>(http: Http, path: string, body: BodyOf<Op>, opts?: CallOptions) =>
  (await http.call<ResultOf<Op>>('POST', path, { ...opts, body })).data;
const put = async <Op extends OperationId>(http: Http, path: string, body: BodyOf<Op> | undefined, opts?: CallOptions) =>
  (await http.call<ResultOf<Op>>('PUT', path, { ...opts, body })).data;
const del = async (http: Http, path: string, opts?: CallOptions) => void (await http.call<undefined>('DELETE', path, opts));

export function users(http: Http) {
  return {
    /** GET /users: `role`, `active`, `q` (names; for ADMINs emails too). */
    list: lister<'listUsers'>(http, '/users'),
    get: (id: number, opts?: RequestOptions) => get<'getUser'>(http, `/users/${id}`, opts),
    /** POST /users (ADMIN). */
    create: (body: BodyOf<'createUser'>, opts?: CreateOptions) => post<'createUser'>(http, '/users', body, opts),
    update: (id: number, body: BodyOf<'updateUser'>, opts?: ChangeOptions) => put<'updateUser'>(http, `/users/${id}`, body, opts),
    setRole: (id: number, role: BodyOf<'setUserRole'>['role'], opts?: ChangeOptions) => put<'setUserRole'>(http, `/users/${id}/role`, { role }, opts),
    setActive: (id: number, active: boolean, opts?: ChangeOptions) => put<'setUserActive'>(http, `/users/${id}/active`, { active }, opts),
    delete: (id: number, opts?: RequestOptions) => del(http, `/users/${id}`, opts),
  };
}

export function profile(http: Http) {
  return {
    get: (opts?: RequestOptions) => get<'getProfile'>(http, '/profile', opts),
    update: (body: BodyOf<'updateProfile'>, opts?: RequestOptions) => put<'updateProfile'>(http, '/profile', body, { ...opts, ifMatch: false }),
    /** The caller's own login, logout, password and session records. */
    securityLog: lister<'listSecurityLog'>(http, '/profile/security-log'),
  };
}

export function projects(http: Http) {
  return {
    list: lister<'listProjects'>(http, '/projects'),
    get: (id: number, opts?: RequestOptions) => get<'getProject'>(http, `/projects/${id}`, opts),
    create: (body: BodyOf<'createProject'>, opts?: CreateOptions) => post<'createProject'>(http, '/projects', body, opts),
    update: (id: number, body: BodyOf<'updateProject'>, opts?: ChangeOptions) => put<'updateProject'>(http, `/projects/${id}`, body, opts),
    delete: (id: number, opts?: RequestOptions) => del(http, `/projects/${id}`, opts),
    members: {
      list: (projectId: number, query?: ListQuery<'listProjectMembers'>, opts?: RequestOptions) => lister<'listProjectMembers'>(http, `/projects/${projectId}/members`)(query, opts),
      get: (projectId: number, userId: number, opts?: RequestOptions) => get<'getProjectMember'>(http, `/projects/${projectId}/members/${userId}`, opts),
      /** Adds the user with `role`, or changes their role. */
      set: (projectId: number, userId: number, role: BodyOf<'setProjectMember'>['role'], opts?: ChangeOptions) =>
        put<'setProjectMember'>(http, `/projects/${projectId}/members/${userId}`, { role }, opts),
      remove: (projectId: number, userId: number, opts?: RequestOptions) => del(http, `/projects/${projectId}/members/${userId}`, opts),
    },
  };
}

export function tasks(http: Http) {
  return {
    /** GET /tasks: `project_id`, `assignee_id`, `status`, `q`. */
    list: lister<'listTasks'>(http, '/tasks'),
    get: (id: number, opts?: RequestOptions) => get<'getTask'>(http, `/tasks/${id}`, opts),
    create: (body: BodyOf<'createTask'>, opts?: CreateOptions) => post<'createTask'>(http, '/tasks', body, opts),
    update: (id: number, body: BodyOf<'updateTask'>, opts?: ChangeOptions) => put<'updateTask'>(http, `/tasks/${id}`, body, opts),
    assign: (id: number, assigneeId: number | null, opts?: ChangeOptions) => put<'assignTask'>(http, `/tasks/${id}/assignee`, { assignee_id: assigneeId }, opts),
    /** Moves the task; a move the status machine refuses is 409 INVALID_TRANSITION, with `allowedTransitions`. */
    setStatus: (id: number, status: BodyOf<'setTaskStatus'>['status'], opts?: ChangeOptions) => put<'setTaskStatus'>(http, `/tasks/${id}/status`, { status }, opts),
    delete: (id: number, opts?: RequestOptions) => del(http, `/tasks/${id}`, opts),
  };
}

export function posts(http: Http) {
  return {
    list: lister<'listPosts'>(http, '/posts'),
    get: (id: number, opts?: RequestOptions) => get<'getPost'>(http, `/posts/${id}`, opts),
    create: (body: BodyOf<'createPost'>, opts?: CreateOptions) => post<'createPost'>(http, '/posts', body, opts),
    delete: (id: number, opts?: RequestOptions) => del(http, `/posts/${id}`, opts),
    // Liking is idempotent and others' likes change the post: no If-Match unless asked.
    like: (id: number, opts?: ChangeOptions) => put<'likePost'>(http, `/posts/${id}/like`, undefined, { ifMatch: false, ...opts }),
    unlike: async (id: number, opts?: RequestOptions) => (await http.call<ResultOf<'unlikePost'>>('DELETE', `/posts/${id}/like`, opts)).data,
  };
}

export function messages(http: Http) {
  return {
    /** GET /messages: `room` (default general), newest first. */
    list: lister<'listMessages'>(http, '/messages'),
    create: (body: BodyOf<'createMessage'>, opts?: CreateOptions) => post<'createMessage'>(http, '/messages', body, opts),
  };
}

export function notifications(http: Http) {
  return {
    /** GET /notifications: `unread`. */
    list: lister<'listNotifications'>(http, '/notifications'),
    markRead: (id: number, opts?: RequestOptions) => put<'markNotificationRead'>(http, `/notifications/${id}/read`, undefined, { ...opts, ifMatch: false }),
    markAllRead: (opts?: RequestOptions) => put<'markAllNotificationsRead'>(http, '/notifications/read', undefined, { ...opts, ifMatch: false }),
  };
}

/**
 * The audit log's filters. `q` is the search syntax (docs/api.md section 4), passed through as it is
 * (an invalid one is 400 INVALID_QUERY), also to a service whose document does not declare it yet.
 */
export type AuditQuery = ListQuery<'listAuditLogs'> & { q?: string };
/** `ocsf`: NDJSON of OCSF 1.x events, for a SIEM (docs/api.md section 4). */
export type AuditExportQuery = Omit<AuditQuery, 'cursor' | 'limit'> & { format?: 'ndjson' | 'csv' | 'ocsf' };
/** GET /audit-logs/stats's filters: the list's (and `q`), and the width of a bucket (default: by the window). */
export type AuditStatsQuery = QueryOf<'getAuditStats'> & { q?: string };
/** GET /audit-logs/stats's answer (docs/api.md section 4): the window, its buckets, the top actions and actors, the total. */
export type AuditStats = ResultOf<'getAuditStats'>;

export function auditLogs(http: Http) {
  const list = lister<'listAuditLogs'>(http, '/audit-logs');
  return {
    /**
     * GET /audit-logs (ADMIN): newest first, keyset pages. With `include: 'actors'` each page
     * carries `actors`, the page's actors by id ({email, name}); the records are the same.
     */
    list: (query?: AuditQuery, opts?: RequestOptions) => list(query as ListQuery<'listAuditLogs'>, opts) as Paginated<AuditRecord, AuditListPage>,
    get: (id: number, opts?: RequestOptions) => get<'getAuditLog'>(http, `/audit-logs/${id}`, opts),
    verify: (opts?: RequestOptions) => get<'verifyAuditLog'>(http, '/audit-logs/verify', opts),
    latestCheckpoint: (opts?: RequestOptions) => get<'getLatestCheckpoint'>(http, '/audit-logs/checkpoints/latest', opts),
    publicKeys: (opts?: RequestOptions) => get<'listAuditPublicKeys'>(http, '/audit-logs/public-keys', opts),
    /** The record's RFC 6962 inclusion proof (404 until it is sealed). */
    inclusionProof: (id: number, query?: QueryOf<'getInclusionProof'>, opts?: RequestOptions) => get<'getInclusionProof'>(http, `/audit-logs/${id}/proof`, { ...opts, query }),
    consistencyProof: (query: QueryOf<'getConsistencyProof'>, opts?: RequestOptions) => get<'getConsistencyProof'>(http, '/audit-logs/proofs/consistency', { ...opts, query }),
    /** The latest checkpoint's signed note (C2SP tlog-checkpoint), as text. */
    checkpointNote: async (opts?: RequestOptions) => (await http.call<string>('GET', '/audit-logs/tlog/checkpoint', { ...opts, as: 'text', headers: { accept: 'text/plain', ...opts?.headers } })).data,
    /** A tlog-tiles tile (`0/x001/234`, `entries/000.p/7`), as bytes. */
    tile: async (tilePath: string, opts?: RequestOptions) =>
      (await http.call<Uint8Array>('GET', `/audit-logs/tlog/tile/${tilePath}`, { ...opts, as: 'bytes', headers: { accept: 'application/octet-stream', ...opts?.headers } })).data,
    /** GET /audit-logs/stats (ADMIN): the query's records counted by hour or day, and its top actions and actors. */
    stats: (query?: AuditStatsQuery, opts?: RequestOptions) => get<'getAuditStats'>(http, '/audit-logs/stats', { ...opts, query }),
    /** GET /audit-logs/witnesses (ADMIN): the witness policy and each witness's state; 404 without a policy. */
    witnesses: (opts?: RequestOptions) => get<'getAuditWitnesses'>(http, '/audit-logs/witnesses', opts),
    /** The export's URL for these filters (it needs the Authorization header: see export()). */
    exportUrl: (query?: AuditExportQuery) => http.url('/audit-logs/export', query),
    /** Streams the export (the Response, its body unread): `format` ndjson (default) or csv. */
    export: async (query?: AuditExportQuery, opts?: RequestOptions) =>
      (await http.call<Response>('GET', '/audit-logs/export', { ...opts, query, as: 'response', headers: { accept: query?.format === 'csv' ? 'text/csv' : 'application/x-ndjson', ...opts?.headers } })).data,
  };
}
