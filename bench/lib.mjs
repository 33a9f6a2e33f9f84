// What the benchmarks (bench/*.mjs) share: the servers they start as child processes and stop,
// the peak memory of those processes, a login through the API, and a database connection for
// one piece of work.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import pg from 'pg';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The malloc settings the README recommends on glibc, for every server a benchmark starts.
 * MALLOC_ARENA_MAX=2: without it each thread-pool thread that hashes a password keeps an arena
 * of its own (~50 MB more RSS at peak). MALLOC_MMAP_THRESHOLD_=131072: without it what an export
 * frees stays resident in the malloc heap (~20 MB more), and glibc raises its threshold to the
 * first large block freed, so the logins' 16 MB scrypt blocks stayed resident for a while after
 * them (the real-time run read a negative RSS per connection).
 */
export const MALLOC_ENV = { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '131072' };

/** Runs `fn` with a connection of its own to `url`, closed after. */
export async function withClient(url, fn) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** Every child started here, so that a run that ends (or is torn down) leaves none behind. */
export const children = new Set();
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

/**
 * Starts `node [flags] script` on 127.0.0.1:port and waits (up to a minute) until GET
 * readyPath answers 2xx. The child's stderr is kept (its last 50-100 kB) for the error should
 * it exit or never be ready, and is readable as child.stderrText().
 */
export async function startProcess(name, script, env, port, { readyPath, flags = [] }) {
  const child = spawn(process.execPath, [...flags, script], { env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' }, stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(child);
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
    if (stderr.length > 100_000) stderr = stderr.slice(-50_000);
  });
  child.stderrText = () => stderr;
  for (let i = 0; i < 240; i++) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}${readyPath}`);
      if (res.ok) return child;
    } catch {
      /* not yet */
    }
    if (child.exitCode !== null) throw new Error(`${name} exited: ${stderr}`);
    await sleep(250);
  }
  throw new Error(`${name} did not become ready: ${stderr}`);
}

/** SIGTERM, then SIGKILL if it has not exited within 15 s; nothing for a child already gone. */
export async function stop(child) {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  if ((await Promise.race([exited.then(() => true), sleep(15_000).then(() => false)])) === false) {
    child.kill('SIGKILL');
    await exited;
  }
}

/** A process's resident memory now, in kB (0 once it has exited). */
export function rssKb(pid) {
  try {
    const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/**
 * Peak resident memory of each process of `pids` ({ name: pid }), in kB, sampled every 200 ms
 * until stop(); peak() reads once more and answers the peaks so far, stop() the final ones.
 */
export function rssSampler(pids) {
  const peak = Object.fromEntries(Object.keys(pids).map((k) => [k, 0]));
  const read = () => {
    for (const [k, pid] of Object.entries(pids)) peak[k] = Math.max(peak[k], rssKb(pid));
  };
  read();
  const timer = setInterval(read, 200);
  return {
    peak: () => (read(), { ...peak }),
    stop: () => (clearInterval(timer), read(), { ...peak }),
  };
}

/**
 * Logs in through the API and answers the access token. With `n`, from an address of its own
 * behind the trusted proxy (X-Forwarded-For 10.x.y.z), as production sees many users: parallel
 * logins from one address are what the login throttle stops.
 */
export async function login(base, email, password, n) {
  const headers = { 'content-type': 'application/json' };
  if (n !== undefined) headers['x-forwarded-for'] = `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
  const res = await fetch(`${base}/api/v1/auth/login`, { method: 'POST', headers, body: JSON.stringify({ email, password }) });
  if (!res.ok) throw new Error(`login ${email}: ${res.status} ${await res.text()}`);
  return (await res.json()).access_token;
}
