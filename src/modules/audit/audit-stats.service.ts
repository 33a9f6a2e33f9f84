// The audit console's activity chart and top lists (GET /audit-logs/stats; docs/audit-search.md,
// "Activity counts", says these choices to users):
// - The window is the query's time range: `from`/`to` and the search's created: terms (the span
//   of its alternatives), intersected. It ends now at the latest; with no start it begins 30 days
//   before its end (at the start of that hour or day), so that a query without a time range
//   still answers in bounded time.
// - Buckets are whole UTC hours or days, from the one holding the window's start to the one
//   holding its end, every one present (0 when empty): a chart has no gaps.
// - The interval, unless asked: hours for a window of up to 2 days, days beyond. An hourly
//   chart covers at most 31 days, a daily one 1,000 days: wider is 400 WINDOW_TOO_WIDE.
// Pure but for queryAuditStats: the filters arrive resolved (audit.service.ts, resolveSearch).
import { DomainError, invalid } from '../../domain/errors.js';
import type { Database } from '../../db/database.js';
import type { AuditFilters } from './audit.repository.js';
import { queryAuditStats, type StatsBounds, type StatsInterval } from './audit-stats.repository.js';
import type { TimeBound } from './audit.search.js';

export type { StatsInterval } from './audit-stats.repository.js';
export const STATS_INTERVALS: readonly StatsInterval[] = ['hour', 'day'];

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const SIZE: Record<StatsInterval, number> = { hour: HOUR, day: DAY };
/** The most buckets of each interval: 31 days of hours, 1,000 days. */
export const MAX_BUCKETS: Record<StatsInterval, number> = { hour: 31 * 24, day: 1000 };
/** A window with no start begins this long before its end. */
export const DEFAULT_WINDOW_MS = 30 * DAY;
/** Up to this width, hours unless asked otherwise; days beyond. */
export const HOURLY_UP_TO_MS = 2 * DAY;
/**
 * The first instant a window may hold: 0001-01-01T00:00:00Z. Before it, an ISO 8601 year is 0000
 * or negative, which PostgreSQL does not read: a window whose default start (30 days before its
 * end) would fall there begins here instead, and one that ends before it holds nothing.
 */
export const EARLIEST_MS = Date.parse('0001-01-01T00:00:00Z');
/** The last instant a window's start is shown as (a start after it, `created:>9999-12-31`, holds nothing before now either). */
const LATEST_MS = Date.parse('9999-12-31T23:59:59.999Z');
/** The length of the top lists. */
export const TOP = 10;

/** An edge of the window, in ms, rounded outwards (a bound in microseconds keeps its millisecond). */
interface Edge {
  ms: number;
  inclusive: boolean;
}

/** The window's buckets: `count` of `interval`, the first starting at `first` (ms); `from`/`to` the window as applied. */
export interface StatsWindow {
  interval: StatsInterval;
  from: number;
  to: number;
  first: number;
  count: number;
}

export interface AuditStats {
  interval: StatsInterval;
  from: string;
  to: string;
  buckets: Array<{ start: string; count: number }>;
  top_actions: Array<{ action: string; count: number }>;
  top_actors: Array<{ actor_id: number | null; email: string | null; name: string | null; count: number }>;
  total: number;
}

export type ActorLookup = (ids: number[]) => Promise<Map<number, { email: string | null; name: string | null }>>;

export const windowTooWide = (detail: string) => new DomainError('invalid', 'WINDOW_TOO_WIDE', detail, { fields: [{ field: 'interval', message: detail, in: 'query' }] });

/** Digits past the millisecond that are not all 0: the instant lies after the millisecond Date.parse gives. */
const pastTheMillisecond = (text: string) => /\.\d{3}0*[1-9]/.test(text);

/**
 * An instant's text as Date.parse reads it. The search writes the day after 9999-12-31 (the end
 * of `created:<=9999-12-31` or `..9999-12-31`) with a five-digit year, as PostgreSQL reads it;
 * Date.parse takes such a year only in ISO 8601's expanded form (+010000-01-01…).
 */
const parseInstant = (text: string) => Date.parse(text.replace(/^(\d{5,6})-/, (_, year: string) => `+${year.padStart(6, '0')}-`));

function edge(text: string, inclusive: boolean, rounding: 'down' | 'up'): Edge {
  const ms = parseInstant(text);
  return { ms: rounding === 'up' && pastTheMillisecond(text) ? ms + 1 : ms, inclusive };
}

/**
 * `from` or `to` as an edge. Their schema takes any RFC 3339 date-time, a leap second too
 * (23:59:60), which Date.parse refuses, and the year 0000, which PostgreSQL refuses: refused
 * here rather than counted wrong, or failed in the database.
 */
function filterEdge(name: 'from' | 'to', text: string | undefined, inclusive: boolean, rounding: 'down' | 'up'): Edge | undefined {
  if (text === undefined) return undefined;
  const e = edge(text, inclusive, rounding);
  if (Number.isNaN(e.ms)) throw invalid(name, 'must be a date-time without a leap second (ISO 8601, e.g. 2026-11-21T09:30:00Z)', 'query');
  if (e.ms < EARLIEST_MS) throw invalid(name, 'must be a date-time from 0001-01-01T00:00:00Z on', 'query');
  return e;
}

/** The span of a search's created: alternatives (a record matches one of them): open on a side where one is. */
function createdSpan(f: AuditFilters): { start?: Edge; end?: Edge } {
  const ranges = f.search?.created?.any ?? [];
  if (ranges.length === 0) return {};
  const starts = ranges.map((r) => r.from);
  const ends = ranges.map((r) => r.to);
  const all = (bounds: Array<TimeBound | undefined>): bounds is TimeBound[] => bounds.every((b) => b !== undefined);
  return {
    start: all(starts) ? starts.map((b) => edge(b.at, true, 'down')).reduce((a, b) => (b.ms < a.ms ? b : a)) : undefined,
    end: all(ends) ? ends.map((b) => edge(b.at, b.inclusive, 'up')).reduce((a, b) => (b.ms > a.ms || (b.ms === a.ms && b.inclusive) ? b : a)) : undefined,
  };
}

const later = (a: Edge | undefined, b: Edge | undefined) => (!a ? b : !b ? a : b.ms > a.ms ? b : a);
const earlier = (a: Edge | undefined, b: Edge | undefined) => (!a ? b : !b ? a : b.ms < a.ms || (b.ms === a.ms && !b.inclusive) ? b : a);

const days = (ms: number) => `${Math.round((ms / DAY) * 10) / 10} days`;

/**
 * The window and buckets of a query, at `now` (ms). Throws WINDOW_TOO_WIDE when the interval
 * would need more buckets than it may have; an empty window (its start after its end) has none.
 */
export function statsWindow(f: AuditFilters, interval: StatsInterval | undefined, now: number): StatsWindow {
  const created = createdSpan(f);
  const start = later(filterEdge('from', f.from, true, 'down'), created.start);
  let end = earlier(filterEdge('to', f.to, false, 'up'), created.end);
  if (!end || end.ms > now) end = { ms: now, inclusive: true };
  const chosen = interval ?? (end.ms - (start?.ms ?? end.ms - DEFAULT_WINDOW_MS) <= HOURLY_UP_TO_MS ? 'hour' : 'day');
  const size = SIZE[chosen];
  // A default start is the start of its bucket: the first bar counts a whole hour or day.
  const from = Math.min(LATEST_MS, Math.max(EARLIEST_MS, start?.ms ?? Math.floor((end.ms - DEFAULT_WINDOW_MS) / size) * size));
  const first = Math.floor(from / size) * size;
  let last = Math.floor(end.ms / size) * size;
  if (!end.inclusive && last === end.ms) last -= size;
  const count = from > end.ms || (from === end.ms && !end.inclusive) ? 0 : (last - first) / size + 1;
  if (count > MAX_BUCKETS[chosen]) {
    const widest = days(MAX_BUCKETS[chosen] * size);
    throw windowTooWide(
      `The window from ${new Date(from).toISOString()} to ${new Date(end.ms).toISOString()} (${days(end.ms - from)}) needs ${count} buckets of a ${chosen}; ` +
        `interval=${chosen} covers at most ${widest}: narrow the time range (created: in q, or from/to)${chosen === 'hour' ? ', or ask for interval=day' : ''}`,
    );
  }
  return { interval: chosen, from, to: end.ms, first, count };
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The counts of the records matching `f` in `w`, every bucket present, the top actors named by `describe`. */
export async function readAuditStats(db: Database, f: AuditFilters, w: StatsWindow, describe: ActorLookup): Promise<AuditStats> {
  const size = SIZE[w.interval];
  const head = { interval: w.interval, from: iso(w.from), to: iso(w.to) };
  if (w.count === 0) return { ...head, buckets: [], top_actions: [], top_actors: [], total: 0 };
  const bounds: StatsBounds = { from: iso(w.first), to: iso(w.first + w.count * size) };
  const rows = await queryAuditStats(db, f, bounds, w.interval, TOP);
  const perBucket = new Map<number, number>();
  const actions: AuditStats['top_actions'] = [];
  const actors: Array<{ id: number | null; count: number }> = [];
  for (const r of rows) {
    if (r.kind === 'bucket') perBucket.set(r.key, r.n);
    else if (r.kind === 'action') actions.push({ action: r.key, count: r.n });
    else actors.push({ id: r.key, count: r.n });
  }
  const buckets = Array.from({ length: w.count }, (_, i) => {
    const start = w.first + i * size;
    return { start: iso(start), count: perBucket.get(start) ?? 0 };
  });
  const named = await describe(actors.flatMap((a) => (a.id === null ? [] : [a.id])));
  return {
    ...head,
    buckets,
    // The union's branches come back in any order: each list is ordered again here.
    top_actions: actions.sort((a, b) => b.count - a.count || (a.action < b.action ? -1 : 1)),
    top_actors: actors
      .sort((a, b) => b.count - a.count || (a.id === null ? 1 : b.id === null ? -1 : a.id - b.id))
      .map((a) => ({ actor_id: a.id, email: a.id === null ? null : (named.get(a.id)?.email ?? null), name: a.id === null ? null : (named.get(a.id)?.name ?? null), count: a.count })),
    total: buckets.reduce((sum, b) => sum + b.count, 0),
  };
}
