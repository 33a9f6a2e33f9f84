// The chaos tests' own services: a PostgreSQL cluster made with initdb in a temporary directory on
// a free port, and a redis-server on a free port, each of which a test may stop and start again
// at will. Never the machine's cluster on 5432, nor its Redis on 6379: a test that stops a
// service stops only its own.
//
// Clean-up happens whatever the end: destroy() in the tests' after hooks; a process exit
// handler (an uncaught error, a signal) that stops what is still running; and, for the cluster
// and Redis, which live in processes of their own, a small watchdog shell that stops them and
// removes their directory if this process dies without running any handler (kill -9).
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, appendFileSync, chownSync, constants, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migratePostgres } from '../../src/db/migrate.js';
import { APP_ROLE } from '../../src/db/postgres.js';
import { freePort } from '../helpers/process.js';
import { SERVICE_LOGIN } from '../helpers/server.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const isRoot = process.getuid?.() === 0;

// ── clean-up at exit ────────────────────────────────────────────────────────────────────────

const exitCleanups = new Set<() => void>();
let exitHooked = false;

function runExitCleanups(): void {
  for (const fn of [...exitCleanups]) {
    exitCleanups.delete(fn);
    try {
      fn();
    } catch {
      // Best effort: the others still run.
    }
  }
}

/**
 * Runs `fn` (synchronous: it may run in an exit handler) when the process exits or is told to
 * stop by a signal, unless the answered function was called first (the normal clean-up did it).
 */
export function onExit(fn: () => void): () => void {
  if (!exitHooked) {
    exitHooked = true;
    process.on('exit', runExitCleanups);
    for (const [signal, number] of [['SIGINT', 2], ['SIGTERM', 15], ['SIGHUP', 1]] as const) {
      process.once(signal, () => {
        runExitCleanups();
        process.exit(128 + number);
      });
    }
  }
  exitCleanups.add(fn);
  return () => void exitCleanups.delete(fn);
}

/**
 * A detached shell that waits for this process to end and then runs `cleanup` (a shell command):
 * the last resort when this process is killed with -9 and no handler runs. `cancel()` ends it
 * (by its process group, which it leads) once the normal clean-up has run.
 */
export function watchdog(cleanup: string): { cancel(): void } {
  const child = spawn('/bin/sh', ['-c', `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; ${cleanup}`], { detached: true, stdio: 'ignore' });
  child.on('error', () => {}); // no shell: only this last resort is lost
  child.unref();
  return {
    cancel() {
      if (child.pid === undefined || child.exitCode !== null) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    },
  };
}

export const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

// ── finding the binaries ───────────────────────────────────────────────────────────────────

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first executable `name` on PATH, or undefined. */
export function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && executable(path.join(dir, name))) return path.join(dir, name);
  }
  return undefined;
}

/**
 * The directory of PostgreSQL's server binaries (initdb, pg_ctl): CHAOS_PG_BIN, else Debian's
 * /usr/lib/postgresql/15/bin, else the newest other version there. Throws a message saying what
 * to install when there are none.
 */
export function postgresBinDir(): string {
  const versions = existsSync('/usr/lib/postgresql')
    ? readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a))
    : [];
  const candidates = [process.env.CHAOS_PG_BIN, '/usr/lib/postgresql/15/bin', ...versions.map((v) => `/usr/lib/postgresql/${v}/bin`)];
  for (const dir of candidates) {
    if (dir && executable(path.join(dir, 'initdb')) && executable(path.join(dir, 'pg_ctl'))) return dir;
  }
  throw new Error(
    'The chaos tests need PostgreSQL\'s server binaries (initdb, pg_ctl) to run a cluster of their own, and none were found ' +
      `(looked in ${candidates.filter(Boolean).join(', ')}). Install them (Debian: apt-get install postgresql-15), ` +
      'or set CHAOS_PG_BIN to the directory that holds initdb and pg_ctl.',
  );
}

/** redis-server on PATH; throws a message saying what to install when there is none. */
export function redisServerBinary(): string {
  const found = onPath('redis-server');
  if (!found) throw new Error('The chaos tests need redis-server (to run a Redis of their own) and none is on PATH. Install it (Debian: apt-get install redis-server).');
  return found;
}

// ── running commands ───────────────────────────────────────────────────────────────────────

/** Runs a command (as the postgres OS user when we are root: initdb and pg_ctl refuse root) and resolves with its output. */
function run(cmd: string, args: string[], opts: { asPostgres?: boolean; cwd?: string; timeoutMs?: number } = {}): Promise<string> {
  const [file, argv]: [string, string[]] = opts.asPostgres && isRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
  return new Promise((resolve, reject) => {
    execFile(file, argv, { cwd: opts.cwd, timeout: opts.timeoutMs ?? 90_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${[file, ...argv].join(' ')} failed: ${err.message}\n${stdout}${stderr}`));
      else resolve(`${stdout}${stderr}`);
    });
  });
}

/** The postgres OS user's ids, from /etc/passwd (else from `id`, for users kept elsewhere). */
function postgresIds(): { uid: number; gid: number } {
  const passwd = existsSync('/etc/passwd') ? readFileSync('/etc/passwd', 'utf8') : '';
  const entry = /^postgres:[^:]*:(\d+):(\d+):/m.exec(passwd);
  if (entry) return { uid: Number(entry[1]), gid: Number(entry[2]) };
  const out = spawnSync('id', ['postgres'], { encoding: 'utf8' });
  const uid = /uid=(\d+)/.exec(out.stdout ?? '')?.[1];
  const gid = /gid=(\d+)/.exec(out.stdout ?? '')?.[1];
  if (out.status !== 0 || uid === undefined || gid === undefined) {
    throw new Error('Running as root, the chaos tests run initdb and pg_ctl as the OS user "postgres" (PostgreSQL refuses root), and there is no such user.');
  }
  return { uid: Number(uid), gid: Number(gid) };
}

/**
 * Both, side by side; when one fails, the other is destroyed again and the first error thrown
 * (so that a test's after hook has nothing left to clean).
 */
export async function startPostgresAndRedis(): Promise<{ cluster: PgCluster; redis: RedisServer }> {
  const [cluster, redis] = await Promise.allSettled([PgCluster.create(), RedisServer.create()]);
  if (cluster.status === 'fulfilled' && redis.status === 'fulfilled') return { cluster: cluster.value, redis: redis.value };
  if (cluster.status === 'fulfilled') await cluster.value.destroy();
  if (redis.status === 'fulfilled') await redis.value.destroy();
  throw cluster.status === 'rejected' ? cluster.reason : (redis as PromiseRejectedResult).reason;
}

// ── PostgreSQL ─────────────────────────────────────────────────────────────────────────────

/** A PostgreSQL cluster of the test's own: trust authentication on 127.0.0.1, a free port. */
export class PgCluster {
  running = false;
  private readonly dataDir: string;
  private readonly logFile: string;
  private readonly bin: string;
  private cancelExit: () => void = () => {};
  private guard: { cancel(): void } | undefined;

  private constructor(
    readonly dir: string,
    readonly port: number,
    bin: string,
  ) {
    this.bin = bin;
    this.dataDir = path.join(dir, 'data');
    this.logFile = path.join(dir, 'postgres.log');
  }

  /** initdb in a new temporary directory, then start. */
  static async create(): Promise<PgCluster> {
    const bin = postgresBinDir();
    const owner = isRoot ? postgresIds() : undefined;
    const dir = mkdtempSync(path.join(tmpdir(), 'teamlog-chaos-pg-'));
    if (owner) chownSync(dir, owner.uid, owner.gid);
    const cluster = new PgCluster(dir, await freePort(), bin);
    cluster.guard = watchdog(`${cluster.stopCommand('immediate')} >/dev/null 2>&1; rm -rf ${shellQuote(dir)}`);
    cluster.cancelExit = onExit(() => cluster.destroySync());
    try {
      await run(path.join(bin, 'initdb'), ['-D', cluster.dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-locale', '--no-sync'], { asPostgres: true, cwd: dir });
      appendFileSync(
        path.join(cluster.dataDir, 'postgresql.conf'),
        [
          '',
          '# teamlog chaos tests: this cluster only, on loopback',
          `port = ${cluster.port}`,
          "listen_addresses = '127.0.0.1'",
          `unix_socket_directories = '${dir}'`,
          'max_connections = 100',
          'shared_buffers = 32MB',
          '',
        ].join('\n'),
      );
      await cluster.start();
    } catch (err) {
      cluster.destroySync();
      throw err;
    }
    return cluster;
  }

  /** postgres://user@127.0.0.1:port/database (trust: no password). */
  url(database = 'postgres', user = 'postgres'): string {
    return `postgres://${user}@127.0.0.1:${this.port}/${database}`;
  }

  /** pg_ctl start, waiting until it accepts connections. */
  async start(): Promise<void> {
    await run(path.join(this.bin, 'pg_ctl'), ['-D', this.dataDir, '-l', this.logFile, '-w', '-t', '60', 'start'], { asPostgres: true, cwd: this.dir });
    this.running = true;
  }

  /** pg_ctl stop: `fast` ends every session (57P01) and checkpoints; `immediate` is a crash (recovery at the next start). */
  async stop(mode: 'smart' | 'fast' | 'immediate' = 'fast'): Promise<void> {
    await run(path.join(this.bin, 'pg_ctl'), ['-D', this.dataDir, '-m', mode, '-w', '-t', '60', 'stop'], { asPostgres: true, cwd: this.dir });
    this.running = false;
  }

  /** The server's own log, for a failure's message. */
  log(): string {
    return existsSync(this.logFile) ? readFileSync(this.logFile, 'utf8') : '';
  }

  /**
   * A new database, migrated by this checkout (as the owner), and the login the service runs
   * as: only a member of teamlog_app, as the README tells production to. Answers both URLs.
   */
  async createDatabase(name: string): Promise<{ ownerUrl: string; serviceUrl: string }> {
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a database name: ${name}`);
    const admin = new pg.Client({ connectionString: this.url() });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end();
    }
    const ownerUrl = this.url(name);
    await migratePostgres(ownerUrl);
    const owner = new pg.Client({ connectionString: ownerUrl });
    await owner.connect();
    try {
      await owner.query(`DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${SERVICE_LOGIN}') THEN
          CREATE ROLE ${SERVICE_LOGIN} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
        END IF;
      END $$`);
      await owner.query(`GRANT ${APP_ROLE} TO ${SERVICE_LOGIN}`);
    } finally {
      await owner.end();
    }
    return { ownerUrl, serviceUrl: this.url(name, SERVICE_LOGIN) };
  }

  /** Stops the cluster (as a crash: nothing in it is kept) and removes its directory. */
  async destroy(): Promise<void> {
    if (this.running) await this.stop('immediate').catch(() => {});
    this.destroySync();
  }

  private stopCommand(mode: string): string {
    const pgCtl = `${shellQuote(path.join(this.bin, 'pg_ctl'))} -D ${shellQuote(this.dataDir)} -m ${mode} -w -t 30 stop`;
    return isRoot ? `runuser -u postgres -- ${pgCtl}` : pgCtl;
  }

  private destroySync(): void {
    this.cancelExit();
    if (existsSync(path.join(this.dataDir, 'postmaster.pid'))) spawnSync('/bin/sh', ['-c', `${this.stopCommand('immediate')} >/dev/null 2>&1`], { cwd: this.dir, timeout: 30_000 });
    this.running = false;
    rmSync(this.dir, { recursive: true, force: true });
    this.guard?.cancel();
  }
}

// ── Redis ──────────────────────────────────────────────────────────────────────────────────

/** Resolves once Redis at the port answers PING, trying for up to `ms`. */
async function redisAnswers(port: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port });
      const done = (answer: boolean) => {
        socket.destroy();
        resolve(answer);
      };
      socket.setTimeout(1000, () => done(false));
      socket.on('error', () => done(false));
      socket.on('connect', () => socket.write('PING\r\n'));
      socket.on('data', (d) => done(d.toString().startsWith('+PONG')));
    });
    if (ok) return true;
    await sleep(50);
  }
  return false;
}

/** A redis-server of the test's own on a free port, without persistence (--save "" --appendonly no). */
export class RedisServer {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private output = '';
  private cancelExit: () => void = () => {};
  private guard: { cancel(): void } | undefined;

  private constructor(
    readonly dir: string,
    readonly port: number,
    private readonly bin: string,
  ) {}

  static async create(): Promise<RedisServer> {
    const bin = redisServerBinary();
    const redis = new RedisServer(mkdtempSync(path.join(tmpdir(), 'teamlog-chaos-redis-')), await freePort(), bin);
    redis.cancelExit = onExit(() => redis.destroySync());
    try {
      await redis.start();
    } catch (err) {
      redis.destroySync();
      throw err;
    }
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  async start(): Promise<void> {
    if (this.running) return;
    const child = spawn(
      this.bin,
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, '--daemonize', 'no', '--loglevel', 'warning'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child = child;
    const collect = (d: Buffer) => void (this.output = (this.output + d.toString()).slice(-20_000));
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    // If this process dies by kill -9, the watchdog ends this redis-server (by its pid).
    this.guard?.cancel();
    this.guard = watchdog(`kill -9 ${child.pid} 2>/dev/null; rm -rf ${shellQuote(this.dir)}`);
    if (!(await redisAnswers(this.port, 10_000))) {
      child.kill('SIGKILL');
      throw new Error(`redis-server on port ${this.port} did not answer PING within 10 s:\n${this.output}`);
    }
  }

  /** Stops the server: SIGKILL by default (a crash; nothing is kept anyway), SIGTERM for a clean stop. */
  async stop(signal: 'SIGKILL' | 'SIGTERM' = 'SIGKILL'): Promise<void> {
    if (!this.running) return;
    this.child!.kill(signal);
    await this.exited;
  }

  async destroy(): Promise<void> {
    await this.stop();
    this.destroySync();
  }

  private destroySync(): void {
    this.cancelExit();
    if (this.running) this.child!.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
    this.guard?.cancel();
  }
}
