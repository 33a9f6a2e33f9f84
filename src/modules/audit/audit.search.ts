// The audit log's search syntax (docs/api.md 4, "Search syntax (`q=`)"): a query string in, the
// typed terms out, or what is wrong with it. Pure: no database, no SQL. The repository turns
// the terms into conditions (audit.repository.ts, searchConditions), with every value a
// parameter; the service resolves emails to ids first (a lookup this module cannot do).
//
// Choices the contract leaves open (docs/audit-search.md says them to users):
// - Terms of one key: those without `-` are alternatives (any may match), those with `-` are
//   exclusions (none may match): `action:A action:B -actor:3` is (A or B) and not by user 3.
//   A negated term keeps records that have no value for its key (`-ip:10.0.0.1` keeps the CLI's).
// - Repeated `created` terms are alternatives too, so `created:>=A created:<B` is every record;
//   a range is `created:A..B`.
// - A DATE is a whole UTC day: `>=D` and `<D` cut at its start, `>D` and `<=D` at its end, and
//   `A..B` holds both days whole. A date-time without an offset is UTC. A date-time bound is
//   taken as written (`<=T` keeps T itself).
// - Enumerated values (action names, resource types, results, `none`) are case-insensitive;
//   keys are not. A bare `created:DATE` is refused with the range that means that day.
import { isIP } from 'node:net';
import { AUDIT_ACTIONS, AUDIT_RESULTS, RESOURCE_TYPES } from '../../domain/audit-vocabulary.js';

export const MAX_QUERY_CHARACTERS = 500;
export const MAX_QUERY_TERMS = 20;
export const SEARCH_KEYS = ['action', 'actor', 'resource', 'result', 'ip', 'request', 'created'] as const;
export type SearchKey = (typeof SEARCH_KEYS)[number];

/** The terms of one key: a record matches if any of `any` matches (or `any` is empty) and none of `not`. */
export interface Terms<T> {
  any: T[];
  not: T[];
}

export type ActorRef = { id: number } | { email: string } | 'none';
export interface ResourceRef {
  type: string;
  id?: number;
}
/** An address (`bits` the family's full width) or a network; IPv4-mapped IPv6 is taken as IPv4. */
export interface IpRef {
  family: 4 | 6;
  address: string;
  bits: number;
}
/** A bound on the timestamp: an instant as PostgreSQL reads a timestamptz, and whether it is included. */
export interface TimeBound {
  at: string;
  inclusive: boolean;
}
export interface TimeRange {
  from?: TimeBound;
  to?: TimeBound;
}
/** A window with an upper bound: the only kind whose records have an id ceiling. */
export type BoundedRange = TimeRange & { to: TimeBound };

export interface AuditSearch {
  action?: Terms<string>;
  actor?: Terms<ActorRef>;
  resource?: Terms<ResourceRef>;
  result?: Terms<string>;
  ip?: Terms<IpRef>;
  request?: Terms<string>;
  created?: Terms<TimeRange>;
}

export type SearchParse = { ok: true; search: AuditSearch; terms: number } | { ok: false; detail: string };

/** A term as a detail quotes it: in double quotes, or single ones when it holds a double quote. */
export const quoteTerm = (term: string) => (term.includes('"') ? `'${term}'` : `"${term}"`);

class Refusal extends Error {}
const refuse = (detail: string): never => {
  throw new Refusal(detail);
};

const isSpace = (c: string) => c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v';

/** Splits on spaces outside double quotes; a quote left open is refused. */
function split(q: string): string[] {
  const terms: string[] = [];
  let i = 0;
  while (i < q.length) {
    while (i < q.length && isSpace(q[i]!)) i++;
    if (i >= q.length) break;
    const start = i;
    let quoted = false;
    for (; i < q.length && (quoted || !isSpace(q[i]!)); i++) if (q[i] === '"') quoted = !quoted;
    const term = q.slice(start, i);
    if (quoted) refuse(`${quoteTerm(term)} has an unbalanced quote: a quoted value ends with a closing "`);
    terms.push(term);
  }
  return terms;
}

const KEY_LIST = SEARCH_KEYS.join(', ');

function parseTerm(term: string): { key: SearchKey; negated: boolean; value: string } {
  const negated = term.startsWith('-');
  const body = negated ? term.slice(1) : term;
  const colon = body.indexOf(':');
  if (colon < 0) {
    if (negated && body === '') refuse(`"-" negates nothing: write -key:value`);
    refuse(`${quoteTerm(term)} is a bare word: every term is key:value, with a key among ${KEY_LIST} (a value with spaces goes in double quotes)`);
  }
  const key = body.slice(0, colon);
  if (key === '') refuse(`${quoteTerm(term)} has no key before ":" (keys: ${KEY_LIST})`);
  if (!(SEARCH_KEYS as readonly string[]).includes(key)) refuse(`${quoteTerm(term)} has an unknown key "${key}" (keys: ${KEY_LIST})`);
  let value = body.slice(colon + 1);
  if (value.startsWith('"')) {
    if (value.length < 2 || !value.endsWith('"')) refuse(`${quoteTerm(term)} has text after its closing quote`);
    value = value.slice(1, -1);
    if (value.includes('"')) refuse(`${quoteTerm(term)} has a quote inside its quoted value`);
  } else if (value.includes('"')) {
    refuse(`${quoteTerm(term)} has a quote inside its value: only a whole value can be quoted, right after "${key}:"`);
  }
  if (value.trim() === '') refuse(`${quoteTerm(term)} has an empty value`);
  return { key: key as SearchKey, negated, value };
}

const POSITIVE_ID = /^[1-9][0-9]{0,15}$/;
const positiveId = (text: string): number | undefined => (POSITIVE_ID.test(text) && Number.isSafeInteger(Number(text)) ? Number(text) : undefined);

function oneOf(what: string, names: readonly string[], value: string, term: string): string {
  const upper = value.toUpperCase();
  if (!names.includes(upper)) refuse(`${quoteTerm(term)}: unknown ${what} "${value}" (one of ${names.join(', ')})`);
  return upper;
}

const EMAIL = /^[^\s@"]+@[^\s@"]+$/;
/** A request id as the service writes it (http/conventions.ts): only such ones are on records. */
const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

function actorOf(value: string, term: string): ActorRef {
  if (value.toLowerCase() === 'none') return 'none';
  const id = positiveId(value);
  if (id !== undefined) return { id };
  if (EMAIL.test(value) && value.length <= 254) return { email: value.toLowerCase() };
  return refuse(`${quoteTerm(term)}: an actor is a user id (a positive integer), an email, or none`);
}

function resourceOf(value: string, term: string): ResourceRef {
  const parts = value.split('/');
  if (parts.length > 2) refuse(`${quoteTerm(term)}: a resource is TYPE or TYPE/<id>, like TASK/5`);
  const type = oneOf('resource type', RESOURCE_TYPES, parts[0]!, term);
  if (parts.length === 1) return { type };
  const id = positiveId(parts[1]!);
  if (id === undefined) refuse(`${quoteTerm(term)}: "${parts[1]}" is not a resource id (a positive integer)`);
  return { type, id: id! };
}

const MAPPED_V4 = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

function ipOf(value: string, term: string): IpRef {
  const slash = value.indexOf('/');
  let address = slash < 0 ? value : value.slice(0, slash);
  const bitsText = slash < 0 ? undefined : value.slice(slash + 1);
  // A zone (fe80::1%eth0) is a local detail PostgreSQL's inet does not take.
  let family = address.includes('%') ? 0 : isIP(address);
  if (family === 0) return refuse(`${quoteTerm(term)}: "${address}" is not an IPv4 or IPv6 address`);
  let bits = family === 4 ? 32 : 128;
  if (bitsText !== undefined) {
    if (!/^[0-9]{1,3}$/.test(bitsText) || Number(bitsText) > bits) refuse(`${quoteTerm(term)}: a prefix length is 0..${bits} for an IPv${family} network`);
    bits = Number(bitsText);
  }
  // The service may see an IPv4 client as ::ffff:a.b.c.d (a dual-stack socket): one address, one form.
  const mapped = MAPPED_V4.exec(address);
  if (mapped && bits >= 96) {
    address = mapped[1]!;
    family = 4;
    bits -= 96;
  }
  return { family: family as 4 | 6, address: address.toLowerCase(), bits };
}

// ── created ─────────────────────────────────────────────────────────────────────────────
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?([Zz]|[+-]\d{2}(?::?\d{2})?)?$/;

/** An instant: what PostgreSQL is given, and its position in microseconds (to order bounds). */
interface Instant {
  text: string;
  micros: bigint;
}
interface ParsedDate {
  kind: 'date' | 'date-time';
  start: Instant;
  /** A date: the start of the next day. */
  next?: Instant;
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');
const daysIn = (y: number, m: number) => utcDate(y, m + 1, 0).getUTCDate();

/** A UTC calendar date (years 1..99 too, which Date.UTC would take as 19xx). */
function utcDate(y: number, mo: number, d: number): Date {
  const t = new Date(0);
  t.setUTCFullYear(y, mo - 1, d);
  return t;
}

function utcInstant(y: number, mo: number, d: number, h = 0, mi = 0, s = 0, fraction = '', offsetMinutes = 0): Instant {
  const ms = utcDate(y, mo, d).getTime() + ((h * 60 + mi - offsetMinutes) * 60 + s) * 1000;
  const micros = BigInt(ms) * 1000n + BigInt(fraction.padEnd(6, '0') || '0');
  const sign = offsetMinutes < 0 ? '-' : '+';
  const off = Math.abs(offsetMinutes);
  const text = `${pad(y, 4)}-${pad(mo)}-${pad(d)}T${pad(h)}:${pad(mi)}:${pad(s)}${fraction ? `.${fraction}` : ''}${sign}${pad(Math.floor(off / 60))}:${pad(off % 60)}`;
  return { text, micros };
}

function dateOf(text: string, term: string): ParsedDate {
  const date = DATE.exec(text);
  const dt = date ? undefined : DATE_TIME.exec(text);
  const m = date ?? dt;
  if (!m) return refuse(`${quoteTerm(term)}: "${text}" is not a DATE (2026-11-26) or an ISO 8601 date-time (2026-11-26T09:30:00Z)`);
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const badDate = () => refuse(`${quoteTerm(term)}: "${text}" is not a date of the calendar`);
  if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo)) badDate();
  if (date) {
    const next = utcDate(y, mo, d + 1);
    return { kind: 'date', start: utcInstant(y, mo, d), next: utcInstant(next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate()) };
  }
  const [h, mi, s] = [Number(m[4]), Number(m[5]), Number(m[6] ?? 0)];
  if (h > 23 || mi > 59 || s > 59) refuse(`${quoteTerm(term)}: "${text}" is not a time of day`);
  let offset = 0;
  const zone = m[8];
  if (zone && zone.toUpperCase() !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    const [oh, om] = [Number(digits.slice(0, 2)), Number(digits.slice(2) || 0)];
    if (oh > 23 || om > 59) refuse(`${quoteTerm(term)}: "${zone}" is not a UTC offset`);
    offset = (zone[0] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  return { kind: 'date-time', start: utcInstant(y, mo, d, h, mi, s, m[7] ?? '', offset) };
}

const bound = (at: Instant, inclusive: boolean): TimeBound & { micros: bigint } => ({ at: at.text, inclusive, micros: at.micros });

function createdOf(value: string, term: string): TimeRange {
  const op = /^(>=|<=|>|<)/.exec(value)?.[1];
  if (op) {
    const rest = value.slice(op.length);
    if (rest === '') refuse(`${quoteTerm(term)}: "${op}" needs a DATE or date-time after it`);
    const when = dateOf(rest, term);
    // A DATE is its whole day: after it (>) starts at the next day, up to it (<=) ends there.
    const end = when.next ?? when.start;
    switch (op) {
      case '>=':
        return { from: strip(bound(when.start, true)) };
      case '>':
        return { from: strip(when.next ? bound(end, true) : bound(when.start, false)) };
      case '<':
        return { to: strip(bound(when.start, false)) };
      default:
        return { to: strip(when.next ? bound(end, false) : bound(when.start, true)) };
    }
  }
  const dots = value.indexOf('..');
  if (dots < 0) {
    return refuse(
      `${quoteTerm(term)}: created takes a comparison (>=, >, <, <= and a DATE) or a range DATE..DATE` +
        (DATE.test(value) ? `; for that whole day write created:${value}..${value}` : ''),
    );
  }
  const [a, b] = [value.slice(0, dots), value.slice(dots + 2)];
  if (a === '' || b === '') refuse(`${quoteTerm(term)}: a range has a DATE on each side of ".."`);
  const first = dateOf(a, term);
  const last = dateOf(b, term);
  const from = bound(first.start, true);
  const to = last.next ? bound(last.next, false) : bound(last.start, true);
  if (from.micros > to.micros || (from.micros === to.micros && !to.inclusive)) refuse(`${quoteTerm(term)}: the range ends before it starts`);
  return { from: strip(from), to: strip(to) };
}

const strip = ({ at, inclusive }: TimeBound): TimeBound => ({ at, inclusive });

const VALUE_OF: { [K in SearchKey]: (value: string, term: string) => NonNullable<AuditSearch[K]>['any'][number] } = {
  action: (v, t) => oneOf('action', AUDIT_ACTIONS, v, t),
  actor: actorOf,
  resource: resourceOf,
  result: (v, t) => oneOf('result', AUDIT_RESULTS, v, t),
  ip: ipOf,
  request: (v, t) => (REQUEST_ID.test(v) ? v : refuse(`${quoteTerm(t)}: a request id is 1 to 128 letters, digits and . _ : @ -`)),
  created: createdOf,
};

/** Parses `q`; an empty or blank query is no search (every record). */
export function parseAuditSearch(q: string): SearchParse {
  try {
    const characters = [...q].length;
    if (characters > MAX_QUERY_CHARACTERS) {
      refuse(`The query ${quoteTerm(`${[...q].slice(0, 40).join('')}…`)} has ${characters} characters; at most ${MAX_QUERY_CHARACTERS} are allowed`);
    }
    const terms = split(q);
    if (terms.length > MAX_QUERY_TERMS) refuse(`The query has ${terms.length} terms; at most ${MAX_QUERY_TERMS} are allowed (from ${quoteTerm(terms[MAX_QUERY_TERMS]!)} on)`);
    const search: Record<string, Terms<unknown>> = {};
    for (const term of terms) {
      const { key, negated, value } = parseTerm(term);
      const typed = VALUE_OF[key](value, term);
      const group = (search[key] ??= { any: [], not: [] });
      (negated ? group.not : group.any).push(typed);
    }
    return { ok: true, search: search as AuditSearch, terms: terms.length };
  } catch (err) {
    if (err instanceof Refusal) return { ok: false, detail: err.message };
    throw err;
  }
}

/**
 * The windows that hold every record a search can match, when each has an upper bound: the
 * created: alternatives (a record matches one of them, whatever else the search asks). Their
 * highest id is a ceiling the list can start its walk from (docs/audit-search.md, "Old created
 * windows"). None without a created: alternative, or when one is open above (`created:>=D`
 * reaches the newest records: nothing to skip). Negated terms only take records away, so they
 * neither give nor remove a ceiling.
 */
export function windowsBoundedAbove(created: Terms<TimeRange> | undefined): BoundedRange[] | undefined {
  if (!created || created.any.length === 0) return undefined;
  const bounded = created.any.filter((r): r is BoundedRange => r.to !== undefined);
  return bounded.length === created.any.length ? bounded : undefined;
}
