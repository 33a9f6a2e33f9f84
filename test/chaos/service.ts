// What the chaos tests share besides their PostgreSQL and Redis (cluster.ts): the real service
// as production runs it (`node dist/server.js`, a process a test can kill -9), a team to write
// with, a burst of concurrent writers that keeps every answer, and the checks that nothing was
// lost: every acknowledged write is there with exactly one audit record, every record gets sealed,
// the checkpoints chain, and GET /audit-logs/verify says ok.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Database } from '../../src/db/database.js';
import { createPostgresDatabase } from '../../src/db/postgres.js';
import { noteHash } from '../../src/tlog/checkpoint-check.js';
import { assertOk, settled, verifyRoute, type CheckpointJson } from '../helpers/audit-log.js';
import { createUser, loginAdmin, type Session } from '../helpers/client.js';
import { addMember, createProject, uniqueWord, type ProjectBody } from '../helpers/factories.js';
import { ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/process.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, TEST_SIGNING_KEY, type TestServer } from '../helpers/server.js';
import { onExit, PgCluster, shellQuote, startPostgresAndRedis, watchdog, type RedisServer } from './cluster.js';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
export const DIST_SERVER = path.join(ROOT, 'dist/server.js');

/** Fails with what to do when dist/ was not built (npm run test:chaos builds it first). */
export function assertBuilt(): void {
  if (!existsSync(DIST_SERVER)) throw new Error(`${DIST_SERVER} is missing: run \`npm run build\` first (\`npm run test:chaos\` does).`);
}

/** The owner's connection to a test database, for inspection; it reconnects by itself after an outage. */
export function ownerDatabase(ownerUrl: string): Database {
  return createPostgresDatabase({ url: ownerUrl, poolSize: 3, onError: () => {} });
}

/**
 * The shape the shared helpers take (test/helpers/client.ts reads only `url`, audit-log.ts's
 * settled() only `owner`) for a service that runs in a process of its own.
 */
export function asServer(url: string, owner?: Database): TestServer {
  return { url, owner } as unknown as TestServer;
}

// ── the service process ────────────────────────────────────────────────────────────────────

/** What a chaos file runs on: a PostgreSQL cluster of its own with one database, an owner connection to it, and (when asked) a Redis of its own. */
export interface Stage {
  cluster: PgCluster;
  redis: RedisServer | undefined;
  urls: { ownerUrl: string; serviceUrl: string };
  owner: Database;
}

/** Builds a file's stage (in its before hook): the server built, the cluster (and Redis) started, the database made. */
export async function openStage(opts: { redis?: boolean } = {}): Promise<Stage> {
  assertBuilt();
  const { cluster, redis } = opts.redis ? await startPostgresAndRedis() : { cluster: await PgCluster.create(), redis: undefined };
  try {
    const urls = await cluster.createDatabase('teamlog');
    return { cluster, redis, urls, owner: ownerDatabase(urls.ownerUrl) };
  } catch (err) {
    await redis?.destroy();
    await cluster.destroy();
    throw err;
  }
}

/** Tears a stage down, once the file's own services and sockets are gone: the owner's connection, Redis, the cluster. */
export async function closeStage(stage: Stage | undefined): Promise<void> {
  await stage?.owner.close();
  await stage?.redis?.destroy();
  await stage?.cluster.destroy();
}

export interface Service {
  url: string;
  port: number;
  child: ChildProcess;
  exited: Promise<void>;
  alive(): boolean;
  /** The last 200 kB of what it wrote to stdout and stderr. */
  output(): string;
  /** Until GET /health/ready answers 200; fails if the process exits first. */
  waitReady(ms?: number): Promise<void>;
  /** kill -9, and waits for the exit. */
  kill(): Promise<void>;
  /** SIGTERM (a graceful stop), and waits for the exit. */
  stop(): Promise<void>;
}

/** What every chaos service gets: the same secrets and key on every instance, the test's addresses trusted. */
export function serviceEnv(urls: { ownerUrl: string; serviceUrl: string }, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: urls.serviceUrl,
    MIGRATION_DATABASE_URL: urls.ownerUrl,
    JWT_SECRET: 'chaos-test-secret-'.padEnd(48, 'x'),
    AUDIT_SIGNING_KEY: TEST_SIGNING_KEY,
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    // The test's clients each pose as their own address (X-Forwarded-For), as in test/helpers/client.ts.
    TRUST_PROXY: '127.0.0.1/32,::1/128',
    AUDIT_CHECKPOINT_INTERVAL_MS: '300',
    RATE_LIMIT_PER_MINUTE: '0',
    LOG_LEVEL: 'warn',
    ...extra,
  };
}

/**
 * `node dist/server.js` with exactly this environment (nothing inherited but PATH and HOME), on
 * `port` (or a free one), in a DATA_DIR of its own unless env names one. Killed at exit if a
 * test leaves it running.
 */
export async function startService(env: Record<string, string>, opts: { port?: number } = {}): Promise<Service> {
  assertBuilt();
  const port = opts.port ?? (await freePort());
  const ownDataDir = env.DATA_DIR === undefined ? mkdtempSync(path.join(tmpdir(), 'teamlog-chaos-data-')) : undefined;
  const dataDir = env.DATA_DIR ?? ownDataDir!;
  const child = spawn(process.execPath, [DIST_SERVER], {
    cwd: dataDir,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', HOST: '127.0.0.1', PORT: String(port), DATA_DIR: dataDir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const collect = (chunk: Buffer) => void (output = (output + chunk.toString()).slice(-200_000));
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const alive = () => child.exitCode === null && child.signalCode === null;
  const cancelExit = onExit(() => {
    if (alive()) child.kill('SIGKILL');
    if (ownDataDir) rmSync(ownDataDir, { recursive: true, force: true });
  });
  // If this process is killed with -9, no handler runs: the watchdog ends the service (by its pid).
  const guard = watchdog(`kill -9 ${child.pid} 2>/dev/null${ownDataDir ? `; rm -rf ${shellQuote(ownDataDir)}` : ''}`);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      cancelExit();
      guard.cancel();
      if (ownDataDir) rmSync(ownDataDir, { recursive: true, force: true });
      resolve();
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  const signal = async (sig: NodeJS.Signals) => {
    if (alive()) child.kill(sig);
    await exited;
  };
  return {
    url,
    port,
    child,
    exited,
    alive,
    output: () => output,
    async waitReady(ms = 30_000) {
      const deadline = Date.now() + ms;
      while (Date.now() < deadline) {
        if (!alive()) throw new Error(`the service exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${output.slice(-5000)}`);
        try {
          if ((await fetch(`${url}/health/ready`, { signal: AbortSignal.timeout(3000) })).status === 200) return;
        } catch {
          // Not listening yet.
        }
        await sleep(100);
      }
      throw new Error(`the service was not ready within ${ms} ms:\n${output.slice(-5000)}`);
    },
    kill: () => signal('SIGKILL'),
    stop: () => signal('SIGTERM'),
  };
}

// ── a team to write with ───────────────────────────────────────────────────────────────────

export interface Team {
  admin: Session;
  project: ProjectBody;
  /** USERs, each a MEMBER of the project, each with a client of its own (its own address). */
  members: Session[];
}

/** The first ADMIN (logged in), a project of theirs, and `size` members of it, made through the API at `url`. */
export async function makeTeam(url: string, size: number): Promise<Team> {
  const server = asServer(url);
  const admin = await loginAdmin(server);
  const project = await createProject(admin);
  const members: Session[] = [];
  for (let i = 0; i < size; i++) {
    const user = await createUser(server, admin);
    await addMember(admin, project.id, user.id);
    members.push(user);
  }
  return { admin, project, members };
}

// ── a burst of writes ──────────────────────────────────────────────────────────────────────

/** Who writes: a session's token and address, and where (asked before every request: a writer may alternate, or follow a restart). */
export interface Writer {
  name: string;
  token: string;
  ip: string;
  url(): string;
}

export function writer(session: Session, urls: string[] | (() => string)): Writer {
  let n = 0;
  const url = typeof urls === 'function' ? urls : () => urls[n++ % urls.length]!;
  return { name: session.email, token: session.token, ip: session.client.ip, url };
}

/** One POST /tasks and what came of it. */
export interface Outcome {
  writer: string;
  url: string;
  /** Sent as X-Request-Id, which the service takes for the request's and its audit record's id. */
  requestId: string;
  title: string;
  /** The HTTP status; 0 when no answer came (connection refused or cut, or a timeout). */
  status: number;
  contentType?: string;
  /** The problem's code for an error answer. */
  code?: string;
  /** The task's id for a 201. */
  id?: number;
  error?: string;
  startedAt: number;
  endedAt: number;
}

export const isAcked = (o: Outcome) => o.status >= 200 && o.status < 300;

/** POST /api/v1/tasks with a title nothing else has, within `timeoutMs`. */
export async function postTask(w: Writer, projectId: number, timeoutMs = 15_000): Promise<Outcome> {
  const url = w.url();
  const requestId = `chaos-${randomBytes(8).toString('hex')}`;
  const title = `Chaos ${uniqueWord()}`;
  const startedAt = Date.now();
  const base = { writer: w.name, url, requestId, title, startedAt };
  try {
    const res = await fetch(`${url}/api/v1/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.token}`, 'content-type': 'application/json', 'x-forwarded-for': w.ip, 'x-request-id': requestId },
      body: JSON.stringify({ project_id: projectId, title }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    const contentType = res.headers.get('content-type') ?? '';
    let body: Record<string, unknown> = {};
    try {
      body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      // Not JSON: kept as the error below.
    }
    const ok = res.status >= 200 && res.status < 300;
    return {
      ...base,
      status: res.status,
      contentType,
      ...(ok ? { id: body.id as number } : { code: body.code as string | undefined, error: text.slice(0, 300) }),
      endedAt: Date.now(),
    };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    return { ...base, status: 0, error: `${e.name}: ${e.message}${e.cause ? ` (${e.cause.code ?? e.cause.message})` : ''}`, endedAt: Date.now() };
  }
}

/**
 * Writers POSTing tasks to one project as fast as they are answered, each its own loop, until
 * stop(). Every request's outcome is kept. After an answer that is not a 2xx a writer pauses a
 * little, as a client would, so that an outage is not a busy loop.
 */
export class WriteBurst {
  readonly outcomes: Outcome[] = [];
  private stopping = false;
  private loops: Array<Promise<void>> = [];

  constructor(
    private readonly writers: Writer[],
    private readonly projectId: number,
    private readonly opts: { pauseMs?: number; pauseAfterFailureMs?: number; timeoutMs?: number } = {},
  ) {}

  start(): this {
    this.loops = this.writers.map((w) => this.loop(w));
    return this;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.loops);
  }

  get acked(): Outcome[] {
    return this.outcomes.filter(isAcked);
  }

  /** Waits until `done()` holds, checking every 20 ms, for at most `ms`. */
  async until(done: () => boolean, ms: number, what: string): Promise<void> {
    const deadline = Date.now() + ms;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms (${this.summary()})`);
      await sleep(20);
    }
  }

  /** Waits for `n` more acknowledged writes than there are now. */
  moreAcked(n: number, ms: number): Promise<void> {
    const target = this.acked.length + n;
    return this.until(() => this.acked.length >= target, ms, `${n} more acknowledged writes`);
  }

  /** Counts by status (0: no answer), e.g. "201: 340, 503: 12". */
  summary(outcomes = this.outcomes): string {
    const counts = new Map<string, number>();
    for (const o of outcomes) {
      const key = o.status === 0 ? 'no answer' : `${o.status}${o.code ? ` ${o.code}` : ''}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return [...counts].map(([k, n]) => `${k}: ${n}`).join(', ') || 'no requests';
  }

  private async loop(w: Writer): Promise<void> {
    while (!this.stopping) {
      const o = await postTask(w, this.projectId, this.opts.timeoutMs);
      this.outcomes.push(o);
      const pause = isAcked(o) ? (this.opts.pauseMs ?? 0) : (this.opts.pauseAfterFailureMs ?? 50);
      if (pause > 0) await sleep(pause);
    }
  }
}

// ── nothing lost ───────────────────────────────────────────────────────────────────────────

interface RecordRow {
  id: number;
  request_id: string;
  action: string;
  result: string;
  resource_id: number | null;
}

/**
 * Against the database (the owner's connection): every acknowledged write is there, with its
 * title, and has exactly one audit record, written by its own request (the record's request_id is
 * the X-Request-Id sent); a request that got no answer, or an error, wrote its task and its record
 * together or neither; every task has exactly one CREATE_TASK record and every such record its task.
 * Answers the number of tasks.
 */
export async function assertNothingLost(owner: Database, outcomes: Outcome[]): Promise<number> {
  const tasks = await owner.query<{ id: number; title: string }>('SELECT id, title FROM tasks');
  const records = await owner.query<RecordRow>(
    "SELECT id, request_id, action, result, resource_id FROM audit_log WHERE action = 'CREATE_TASK' OR request_id LIKE 'chaos-%' ORDER BY id",
  );
  const taskById = new Map(tasks.map((t) => [t.id, t]));
  const taskByTitle = new Map(tasks.map((t) => [t.title, t]));
  const byRequest = new Map<string, RecordRow[]>();
  for (const r of records) byRequest.set(r.request_id, [...(byRequest.get(r.request_id) ?? []), r]);

  const problems: string[] = [];
  const note = (p: string) => problems.length < 20 && problems.push(p);
  for (const o of outcomes) {
    const own = byRequest.get(o.requestId) ?? [];
    const task = taskByTitle.get(o.title);
    if (isAcked(o)) {
      if (!task) note(`acknowledged task ${o.id} ("${o.title}", request ${o.requestId}) is missing`);
      else if (task.id !== o.id) note(`acknowledged task ${o.id} ("${o.title}") is stored as task ${task.id}`);
      if (own.length !== 1) note(`acknowledged task ${o.id} (request ${o.requestId}) has ${own.length} audit records, not 1`);
      else if (own[0]!.action !== 'CREATE_TASK' || own[0]!.result !== 'SUCCESS' || own[0]!.resource_id !== o.id) {
        note(`the record of acknowledged task ${o.id} is ${JSON.stringify(own[0])}`);
      }
    } else {
      // No answer or an error: both or neither.
      if (own.length > 1) note(`unanswered request ${o.requestId} (${o.status}) has ${own.length} audit records`);
      if (task && (own.length !== 1 || own[0]!.resource_id !== task.id)) note(`task ${task.id} of unanswered request ${o.requestId} (${o.status}) has no audit record of its own`);
      if (!task && own.length > 0) note(`request ${o.requestId} (${o.status}) has an audit record ${JSON.stringify(own[0])} but no task`);
    }
  }
  const created = new Map<number, number>();
  for (const r of records) {
    if (r.action !== 'CREATE_TASK' || r.result !== 'SUCCESS') continue;
    created.set(r.resource_id!, (created.get(r.resource_id!) ?? 0) + 1);
    if (!taskById.has(r.resource_id!)) note(`CREATE_TASK record ${r.id} names task ${r.resource_id}, which does not exist`);
  }
  for (const t of tasks) if (created.get(t.id) !== 1) note(`task ${t.id} has ${created.get(t.id) ?? 0} CREATE_TASK records, not 1`);
  assert.deepEqual(problems, [], `writes were lost or recorded wrongly (${problems.length}${problems.length === 20 ? '+' : ''} problems)`);
  return tasks.length;
}

/**
 * Every record gets sealed and covered by a checkpoint (settled(), test/helpers/audit-log.ts),
 * every checkpoint's `prev` names the one before it (its column and its note's `prev` line), the
 * tree only grows, and GET /audit-logs/verify says ok. Answers the newest checkpoint.
 */
export async function assertSealedAndVerified(url: string, owner: Database, admin: Session): Promise<CheckpointJson> {
  const head = await settled(asServer(url, owner), admin);
  const checkpoints = await owner.query<{ id: number; tree_size: number; prev_checkpoint_hash: Buffer | null; note: string }>(
    'SELECT id, tree_size, prev_checkpoint_hash, note FROM audit_checkpoints ORDER BY id',
  );
  assert.ok(checkpoints.length > 0, 'no checkpoint was signed');
  let previous: (typeof checkpoints)[number] | undefined;
  for (const c of checkpoints) {
    const expected = previous ? noteHash(previous.note) : null;
    assert.deepEqual(c.prev_checkpoint_hash === null ? null : Buffer.from(c.prev_checkpoint_hash), expected, `checkpoint ${c.id}'s prev_checkpoint_hash does not name checkpoint ${previous?.id}`);
    const prevLine = c.note.split('\n').find((l) => l.startsWith('prev '))?.slice(5);
    assert.equal(prevLine, expected?.toString('base64'), `checkpoint ${c.id}'s note does not name checkpoint ${previous?.id} in its prev line`);
    if (previous) assert.ok(c.tree_size >= previous.tree_size, `checkpoint ${c.id} shrinks the tree (${previous.tree_size} -> ${c.tree_size})`);
    previous = c;
  }
  assert.equal(previous!.tree_size, head.tree_size, 'the newest checkpoint is the one the API shows');
  const report = await verifyRoute(admin);
  assertOk(report);
  assert.ok((report.head?.tree_size ?? 0) >= head.tree_size, `verification checked the whole log (${report.head?.tree_size} of ${head.tree_size} records)`);
  return head;
}

/** The service's output, for an assertion message. */
export function tail(output: string, chars = 3000): string {
  return output.length > chars ? `…${output.slice(-chars)}` : output;
}
