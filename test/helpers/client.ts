// A small HTTP client for tests: real requests over the loopback, JSON in and out. Each
// client poses as its own address through X-Forwarded-For (the test servers trust the
// loopback proxy), so the per-address login throttle of one test never leaks into another.
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { ADMIN_EMAIL, ADMIN_PASSWORD, type TestServer } from './server.js';

export interface Response<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  /** Sent as-is (no JSON encoding); set content-type yourself via headers. */
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
}

export function randomIp(): string {
  return `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;
}

export class Client {
  readonly ip = randomIp();
  constructor(readonly server: TestServer) {}

  async request<T = any>(method: string, path: string, opts: RequestOptions = {}): Promise<Response<T>> {
    const headers: Record<string, string> = { 'x-forwarded-for': this.ip, ...opts.headers };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | Buffer | undefined = opts.rawBody;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(this.server.url + path, { method, headers, body: body as BodyInit | undefined });
    const text = await res.text();
    let parsed: unknown = undefined;
    // JSON and problem+json, not NDJSON (the audit export), which is many documents.
    if (text && /\bjson\b/.test(res.headers.get('content-type') ?? '')) parsed = JSON.parse(text);
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }

  get = <T = any>(path: string, opts?: RequestOptions) => this.request<T>('GET', path, opts);
  post = <T = any>(path: string, body?: unknown, opts?: RequestOptions) => this.request<T>('POST', path, { ...opts, body });
  put = <T = any>(path: string, body?: unknown, opts?: RequestOptions) => this.request<T>('PUT', path, { ...opts, body });
  delete = <T = any>(path: string, opts?: RequestOptions) => this.request<T>('DELETE', path, opts);
}

export interface Session {
  id: number;
  email: string;
  password: string;
  role: 'USER' | 'ADMIN';
  token: string;
  refreshToken: string;
  client: Client;
}

export async function login(server: TestServer, email: string, password: string, client = new Client(server)): Promise<Session> {
  const res = await client.post('/api/v1/auth/login', { email, password });
  if (res.status !== 200) throw new Error(`login of ${email} failed: ${res.status} ${res.text}`);
  return {
    id: res.body.user.id,
    email,
    password,
    role: res.body.user.role,
    token: res.body.access_token,
    refreshToken: res.body.refresh_token,
    client,
  };
}

export const loginAdmin = (server: TestServer) => login(server, ADMIN_EMAIL, ADMIN_PASSWORD);

let seq = 0;
/** Creates a user through the API (as the first ADMIN) and logs them in. */
export async function createUser(
  server: TestServer,
  admin: Session,
  opts: { role?: 'USER' | 'ADMIN'; name?: string; email?: string; password?: string } = {},
): Promise<Session> {
  seq++;
  const email = opts.email ?? `user${seq}-${process.pid}-${randomInt(1e9)}@test.local`;
  const password = opts.password ?? `password-${seq}-long`;
  const res = await admin.client.post(
    '/api/v1/users',
    { email, name: opts.name ?? `User ${seq}`, password, role: opts.role ?? 'USER' },
    { token: admin.token },
  );
  if (res.status !== 201) throw new Error(`create user failed: ${res.status} ${res.text}`);
  return login(server, email, password);
}

/** Audit records read straight from the table (owner connection), oldest first. */
export async function auditRows(server: TestServer, where = 'TRUE', params: unknown[] = []) {
  return server.owner.query<{
    id: number; actor_id: number | null; action: string; resource_type: string; resource_id: number | null;
    result: string; metadata: Record<string, unknown>; ip: string | null; user_agent: string | null; request_id: string;
  }>(`SELECT * FROM audit_log WHERE ${where} ORDER BY id`, params);
}

export async function auditCount(server: TestServer): Promise<number> {
  const rows = await server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_log');
  return rows[0]!.n;
}

/** The newest audit record's id (0 when there is none). */
export async function maxAuditId(server: TestServer): Promise<number> {
  const rows = await server.owner.query<{ m: number | null }>('SELECT max(id) AS m FROM audit_log');
  return rows[0]!.m ?? 0;
}

/**
 * An RFC 9457 problem answer with this status and code (or one of these codes): the media
 * type, the status and code in the body, a detail, and the request id of the response.
 */
export function assertProblem(res: Response, status: number, code: string | string[]): void {
  assert.equal(res.status, status, `expected ${status} ${String(code)}, got ${res.status}: ${res.text}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(res.body.status, status);
  if (Array.isArray(code)) assert.ok(code.includes(res.body.code), `code ${res.body.code} is one of ${code.join(', ')}`);
  else assert.equal(res.body.code, code, res.text);
  assert.equal(typeof res.body.detail, 'string');
  assert.equal(res.body.request_id, res.headers.get('x-request-id'));
}
