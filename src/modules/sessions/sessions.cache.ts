// The live sessions this instance has just authenticated, kept in memory so that an HTTP request
// costs no session lookup (auth.service.ts authenticate). Revocation stays immediate because
// every change that could alter a cached answer empties the entry: the instance that makes the
// change drops it right after its commit, and every instance drops it when PostgreSQL tells it
// (NOTIFY on SESSION_CHANNEL, sent at commit by the triggers of migrations/0015). On PostgreSQL
// the cache serves only while that notice channel is up: a notice lost while it was down would
// leave a revoked session cached. Writes, socket handshakes and refresh read the database anyway.
import type { Database } from '../../db/database.js';
import type { SessionRow } from '../../domain/session-verdict.js';

/** The channel of migrations/0015's triggers; payloads `s:<session id>`, `u:<user id>`, or `*` (everything). */
export const SESSION_CHANNEL = 'teamlog_sessions';

export interface SessionCacheOptions {
  /**
   * Whether other processes change sessions and users, so that the cache may serve only while
   * it hears their notices (PostgreSQL). False on PGlite: one process, every change is local.
   */
  needsNotices: boolean;
  /** Bound on memory: past it, the oldest entry goes. */
  maxEntries?: number;
  /** An entry older than this is read again: a safety net for a notice that never came. */
  ttlMs?: number;
  now?: () => number;
}

interface Entry {
  row: SessionRow;
  /** When the session expires (ms, this clock): from then on it is a miss, and the database says TOKEN_EXPIRED. */
  expiresAt: number;
  storedAt: number;
}

export class SessionCache {
  hits = 0;
  misses = 0;
  private readonly entries = new Map<number, Entry>();
  /** user id → their cached session ids, for dropUser. */
  private readonly byUser = new Map<number, Set<number>>();
  /**
   * Bumped by every drop. A lookup takes a ticket before it reads the database, and its answer
   * is stored only if no drop came since: otherwise a row read just before a revocation's
   * commit, stored just after its notice, would bring the revoked session back.
   */
  private generation = 0;
  private listening = false;
  private readonly maxEntries: number;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(private readonly opts: SessionCacheOptions) {
    this.maxEntries = opts.maxEntries ?? 50_000;
    this.ttlMs = opts.ttlMs ?? 60_000;
    this.now = opts.now ?? Date.now;
  }

  /** Whether entries are served and stored now (PostgreSQL: only while the notice channel is up). */
  get serving(): boolean {
    return !this.opts.needsNotices || this.listening;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The session's row (live, its user active) if cached, fresh and not expired. */
  get(sessionId: number): SessionRow | undefined {
    const entry = this.serving ? this.entries.get(sessionId) : undefined;
    const now = this.now();
    if (entry && now < entry.expiresAt && now - entry.storedAt < this.ttlMs) {
      this.hits++;
      return entry.row;
    }
    if (entry) this.remove(sessionId);
    this.misses++;
    return undefined;
  }

  /** Taken before the database is read; see `generation`. */
  ticket(): number {
    return this.generation;
  }

  /** Stores a live session (never a refusal) read from the database after `ticket` was taken. */
  put(sessionId: number, row: SessionRow, expiresAt: number, ticket: number): void {
    if (!this.serving || ticket !== this.generation || row.revoked || row.expired || !row.active) return;
    this.remove(sessionId);
    if (this.entries.size >= this.maxEntries) this.remove(this.entries.keys().next().value!);
    const { id, email, name, role } = row;
    this.entries.set(sessionId, { row: { id, email, name, role, active: true, revoked: false, expired: false }, expiresAt, storedAt: this.now() });
    let ids = this.byUser.get(row.id);
    if (!ids) this.byUser.set(row.id, (ids = new Set()));
    ids.add(sessionId);
  }

  dropSession(sessionId: number): void {
    this.generation++;
    this.remove(sessionId);
  }

  /** Every session of the user: their role, active flag, email or name changed, or they are gone. */
  dropUser(userId: number): void {
    this.generation++;
    for (const id of this.byUser.get(userId) ?? []) this.entries.delete(id);
    this.byUser.delete(userId);
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
    this.byUser.clear();
  }

  /** A NOTIFY on SESSION_CHANNEL. Anything not understood empties the cache: safe, if slower. */
  notice(payload: string): void {
    const m = /^([su]):([1-9][0-9]{0,15})$/.exec(payload);
    if (!m) this.clear();
    else if (m[1] === 's') this.dropSession(Number(m[2]));
    else this.dropUser(Number(m[2]));
  }

  /**
   * The notice channel went up or down. Either way what is cached may have missed a notice
   * (sent while it was down), so it all goes; while down, every request reads the database.
   */
  setListening(listening: boolean): void {
    this.clear();
    this.listening = listening;
  }

  private remove(sessionId: number): void {
    const entry = this.entries.get(sessionId);
    if (!entry) return;
    this.entries.delete(sessionId);
    const ids = this.byUser.get(entry.row.id);
    ids?.delete(sessionId);
    if (ids?.size === 0) this.byUser.delete(entry.row.id);
  }
}

/**
 * Starts hearing SESSION_CHANNEL for `cache` (PostgreSQL; nothing to hear on PGlite). Answers a
 * function that stops, after which the cache no longer serves.
 */
export async function listenForSessionChanges(db: Database, cache: SessionCache): Promise<() => Promise<void>> {
  if (!db.listen) return async () => {};
  const unlisten = await db.listen(SESSION_CHANNEL, (payload) => cache.notice(payload), (up) => cache.setListening(up));
  return async () => {
    await unlisten();
    cache.setListening(false);
  };
}
