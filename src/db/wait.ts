// At start, PostgreSQL may not answer yet (a container starting beside ours, a failover in
// progress): connecting is retried with backoff for a while, and a database that still does not
// answer ends the start with a message naming the variable to look at, never its password.
import pg from 'pg';

/** Errors of a server that is not (yet) there, as opposed to one that refuses us. */
const NOT_ANSWERING = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE',
  // PostgreSQL's own "not now": starting up, shutting down, in recovery, too many connections.
  '57P03', '57P01', '53300',
]);

export class DatabaseUnavailableError extends Error {}

/** postgres://user@host:port/db: what to look at, without the password. */
export function describeDatabaseUrl(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.username ? `${decodeURIComponent(u.username)}@` : ''}${u.host}${u.pathname}`;
}

function notAnswering(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') return NOT_ANSWERING.has(code);
  // node-postgres's own connection timeout has no code.
  return /timeout|terminated/i.test((err as Error).message ?? '');
}

const reason = (err: unknown) => {
  const e = err as { code?: string; message?: string };
  return e.code && !(e.message ?? '').includes(e.code) ? `${e.code}: ${e.message}` : (e.message ?? String(err));
};

export interface WaitOptions {
  /** The variable the URL came from, named in every message. */
  name: string;
  /** How long to keep trying; 0: one attempt. */
  timeoutMs: number;
  onRetry?: (message: string) => void;
  /** Test seam: how to try once. */
  probe?: (url: string, timeoutMs: number) => Promise<void>;
}

async function probePostgres(url: string, timeoutMs: number): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  client.on('error', () => {}); // a connection dropped after the probe is not ours to report
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => {});
  }
}

/** 3000 (or the 2999 ms left of it a moment later) → "3 s", 1500 → "1.5 s". */
const seconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;

/**
 * Resolves once PostgreSQL at `url` accepts a connection and answers a query. Retries what looks
 * like a server that is not there yet, from 250 ms doubling to 5 s, until `timeoutMs` has passed
 * (the last wait cut short so that the last attempt is made at the deadline, not before it);
 * anything else (a wrong password, a missing database) fails at once.
 */
export async function waitForPostgres(url: string, opts: WaitOptions): Promise<void> {
  const probe = opts.probe ?? probePostgres;
  const where = `${opts.name} (${describeDatabaseUrl(url)})`;
  const deadline = Date.now() + opts.timeoutMs;
  let delay = 250;
  for (let attempt = 1; ; attempt++) {
    const left = deadline - Date.now();
    try {
      await probe(url, Math.max(1000, Math.min(5000, left)));
      return;
    } catch (err) {
      if (!notAnswering(err)) throw new DatabaseUnavailableError(`${where} refused the connection: ${reason(err)}`);
      const wait = Math.min(delay, deadline - Date.now());
      if (wait <= 0) {
        // The window it was given, which it has now waited in full: the one to lengthen.
        throw new DatabaseUnavailableError(
          `PostgreSQL at ${where} did not answer${opts.timeoutMs > 0 ? ` within ${seconds(opts.timeoutMs)} (${attempt} attempts)` : ''}: ${reason(err)}. ` +
            `Check that it runs and that ${opts.name} points at it.`,
        );
      }
      opts.onRetry?.(`PostgreSQL at ${where} does not answer yet (${reason(err)}); trying again in ${wait < 1000 ? `${wait} ms` : seconds(wait)}`);
      await new Promise((resolve) => setTimeout(resolve, wait));
      delay = Math.min(delay * 2, 5000);
    }
  }
}
