// CPU readings from /proc for the benchmarks (bench/run.mjs, bench/realtime.mjs): what a server
// process and PostgreSQL spent on a measure: where the time goes. This VM's throughput drifts
// from minute to minute and the CPU a request takes less so within a run, but both move between
// days (twice as fast, same code): runs of different code compare only when alternated.
import { execSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

export const CLOCK_TICKS = Number(execSync('getconf CLK_TCK').toString().trim()) || 100;

/** CPU time (user + system) a process has used so far, in µs; 0 once it has gone. */
export function cpuMicros(pid, thread) {
  try {
    const stat = readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/**
 * CPU used so far by each PostgreSQL process of a benchmark, by pid: the backends of its
 * database and the server's own processes (WAL writer, checkpointer, autovacuum, …), not the
 * backends of other databases (tests may be running on the same server).
 */
export function postgresCpu(database) {
  const byPid = new Map();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== 'postgres') continue;
      // A backend's title is "postgres: <user> <database> <client address>(<port>) <state>".
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      const backend = /\(\d+\)|\[local\]/.test(cmd);
      if (!backend || cmd.includes(` ${database} `)) byPid.set(pid, cpuMicros(pid));
    } catch {
      /* gone */
    }
  }
  return byPid;
}

/** CPU the PostgreSQL processes alive at the end used since `before` (a process that ended meanwhile is not counted). */
export function postgresCpuSince(before, database) {
  let sum = 0;
  for (const [pid, micros] of postgresCpu(database)) sum += Math.max(0, micros - (before.get(pid) ?? 0));
  return sum;
}

/** CPU time used from now on by a server process and by its database's PostgreSQL processes: `since()` answers both, in µs. */
export function cpuMeter(pid, database) {
  // The main thread's share of the server's: its event loop is the one thread a request must pass.
  // Each thread's (tid, µs): the main thread's tid is the pid; the others are V8's helpers (the
  // parallel scavenges), the thread pool and worker threads (the sealer), all named "node".
  const threads = () => { try { return new Map(readdirSync(`/proc/${pid}/task`).map((t) => [t, cpuMicros(pid, t)])); } catch { return new Map(); } };
  const before = { server: cpuMicros(pid), main: cpuMicros(pid, pid), db: postgresCpu(database), threads: threads() };
  return { since: () => ({ server: cpuMicros(pid) - before.server, main: cpuMicros(pid, pid) - before.main, db: postgresCpuSince(before.db, database), threads: [...threads()].map(([t, c]) => [t, c - (before.threads.get(t) ?? 0)]).filter(([, c]) => c > 0) }) };
}

/** The whole machine's busy share (every core, every process) from now on: `busy()` answers 0–1. */
export function machineMeter() {
  const read = () => {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = fields[3] + (fields[4] ?? 0); // idle + iowait
    return { idle, total: fields.reduce((a, b) => a + b, 0) };
  };
  const before = read();
  return {
    busy: () => {
      const now = read();
      const total = now.total - before.total;
      return total > 0 ? Math.round((1 - (now.idle - before.idle) / total) * 1000) / 1000 : null;
    },
  };
}
