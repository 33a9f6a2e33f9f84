// The canonical form of an audit record is computed three ways, and all three must give the
// same bytes (docs/audit-integrity.md §1; sealed-form.ts): in JavaScript by the sealer
// (rowLeaf, sealingLeaf; recordLeaf for a sealed form read from outside), in PostgreSQL for the
// database verification (CANONICAL_HEAD_SQL ‖ JCS(metadata) ‖ CANONICAL_TAIL_SQL), and in
// PostgreSQL as the export's JSON text (SEALED_FORM_JSON), which must parse to sealedForm(row).
// jcs.ts is the truth. A property test over generated records holds the SQL encoders to it:
// every control character, quotes and backslashes, Unicode of every kind, numbers at the edges
// and in every spelling jsonb accepts, nested metadata, personal-data markers, nulls, long user
// agents and timestamps at the edges, written as the owner (timestamps chosen, the stamp
// trigger skipped) or through the audit writer, and read back as the service reads them.
//
// The generator is seeded: every run prints its seed, and a failure names the seed and the
// record, shrinks the record to a minimal one, and shows both. Environment:
//   CANONICAL_SEED=<uint32, decimal or 0x…>  the seed (default: a random one)
//   CANONICAL_COUNT=<n>                      records per run (default 2400)
//   CANONICAL_ONLY=<i>[,<j>…]                only these records of the seed (to reproduce one)
//   CANONICAL_INCLUDE_KNOWN=1                generate the refused cases too (see INCLUDE_KNOWN)
// e.g. CANONICAL_SEED=0x1234abcd CANONICAL_ONLY=57 node scripts/test.mjs --no-checks --only pglite test/canonical-encoders.test.ts
//
// Outside the property, focused tests say what happens where the encoders' inputs end: NUL
// (PostgreSQL text holds none), lone surrogates, numbers beyond a double, jsonb's number
// spellings, the writer's 512-unit cut of a user agent; and the two values no JS encoder can
// read back exactly, which every encoder refuses instead (EXACT_SQL on the SQL side): bigint ids
// beyond 2^53 − 1, and, on PGlite, a text column whose value starts with U+FEFF.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import type { Queryable } from '../src/db/database.js';
import { findAuditRecords, type AuditRow } from '../src/modules/audit/audit.repository.js';
import {
  AUDIT_ACTIONS, AUDIT_RESULTS, PERSONAL_KEYS, PERSONAL_MARKER, RESOURCE_TYPES, createAuditWriter, type AuditAction, type AuditResult, type ResourceType,
} from '../src/modules/audit/audit.writer.js';
import { canonicalize } from '../src/modules/audit/integrity/jcs.js';
import { leafHash } from '../src/modules/audit/integrity/merkle.js';
import {
  CANONICAL_HEAD_SQL, CANONICAL_METADATA_SQL, CANONICAL_TAIL_SQL, EXACT_SQL, SEALED_FIELDS, SEALED_FORM_JSON, canonicalLeaf, recordLeaf, rowLeaf, sealedForm, sealingLeaf,
} from '../src/modules/audit/integrity/sealed-form.js';
import { useTestDatabase } from './helpers/harness.js';
import { DB_KIND } from './helpers/server.js';

const h = useTestDatabase();

// ── Run parameters ─────────────────────────────────────────────────────────────────────────

function envSeed(): number {
  const text = process.env.CANONICAL_SEED;
  if (text === undefined || text === '') return randomBytes(4).readUInt32BE(0);
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new Error(`CANONICAL_SEED must be a uint32 (decimal or 0x…), not ${JSON.stringify(text)}`);
  return n;
}
const SEED = envSeed();
const SEED_TEXT = `0x${SEED.toString(16).padStart(8, '0')}`;
const COUNT = Number(process.env.CANONICAL_COUNT ?? 2400);
const ONLY = process.env.CANONICAL_ONLY ? process.env.CANONICAL_ONLY.split(',').map(Number) : undefined;
/** Records per INSERT (and per read back). */
const BATCH = 100;
const MAX_SHRINK_ATTEMPTS = 400;
/**
 * The generator leaves out the values the focused tests below show every encoder refuses (the
 * property holds the encoders to agreeing texts); CANONICAL_INCLUDE_KNOWN=1 puts them back:
 * - ids beyond ±(2^53 − 1) (randomId makes them only then);
 * - ip, user_agent or request_id starting with U+FEFF (PGlite's reader drops it; refused everywhere).
 */
const INCLUDE_KNOWN = process.env.CANONICAL_INCLUDE_KNOWN === '1';
// A leading U+FEFF is refused by every encoder (a focused test below), on PostgreSQL too.
const LEADING_BOM_DROPPED = !INCLUDE_KNOWN;

// ── A small seeded PRNG (mulberry32), one stream per record ────────────────────────────────

/** murmur3's finalizer: a well-mixed 32-bit hash, to derive each record's seed from the run's. */
function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  /** Uniform in [0, 1), 32 bits. */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = Math.imul(this.state ^ (this.state >>> 15), 1 | this.state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  u32(): number {
    return Math.floor(this.next() * 4294967296);
  }
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.next() * xs.length)]!;
  }
  /** Any safe integer, either sign: 53 random bits. */
  safeInt(): number {
    const n = Math.floor(this.next() * 2 ** 21) * 2 ** 32 + this.u32();
    return this.chance(0.5) ? -n : n;
  }
}

const recordRng = (index: number) => new Rng(mix32(SEED ^ mix32(index + 0x9e3779b9)));

// ── Strings ────────────────────────────────────────────────────────────────────────────────

const range = (lo: number, hi: number) => Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);
/**
 * Every control character but U+0000: PostgreSQL text cannot hold NUL, so neither can any
 * column of audit_log nor any jsonb string (the NUL test below shows the refusals).
 */
const CONTROL_POINTS = [...range(0x01, 0x1f), 0x7f];
const SPECIAL_POINTS = [
  0x22, 0x5c, 0x2f, 0x27, 0x60, 0x3c, 0x3e, 0x26, 0x80, 0x85, 0x9f, 0xa0, 0xad, // quote, backslash, solidus, HTML, C1, NBSP, SHY
  0x2028, 0x2029, 0xfeff, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202e, 0x2066, 0x2069, // separators, BOM, ZW*, bidi
  0xfff9, 0xfffc, 0xfffd, 0xfffe, 0xffff, 0xfdd0, 0xfdef, 0x1fffe, 0x1ffff, 0x10fffe, 0x10ffff, // specials, noncharacters
  0xe000, 0xf8ff, 0xd7ff, 0x10000, 0x1f600, 0x1f468, 0x1f3fb, 0xe0001, 0xe007f, 0xf0000, // private use, edges of the surrogate range, astral
];
/** Text that looks like an escape but is not one, and runs of quotes and backslashes. */
const TRICKY_TEXTS = ['\\', '"', '\\"', '\\\\', '\\u0000', '\\u00', '\\ud83d', '"\\"', '\\n', '\\/', '</script>', '${x}', "'", '%s', '\\x00'];
const CATEGORIES = ['ascii', 'ascii', 'control', 'special', 'combining', 'rtl', 'bmp', 'astral', 'latin1', 'tricky'] as const;
type Category = (typeof CATEGORIES)[number];
const RTL_POINTS = [...range(0x5d0, 0x5ea), ...range(0x621, 0x64a), 0x200f, 0x202b, 0x202e, 0x061c, 0xfb1d, 0xfdfd, 0x10900];

function piece(rng: Rng, category: Category): string {
  switch (category) {
    case 'ascii':
      return String.fromCharCode(rng.int(0x20, 0x7e));
    case 'control':
      return String.fromCharCode(rng.pick(CONTROL_POINTS));
    case 'special':
      return String.fromCodePoint(rng.pick(SPECIAL_POINTS));
    case 'combining':
      return 'e' + String.fromCharCode(rng.int(0x300, 0x36f)) + (rng.chance(0.3) ? String.fromCharCode(rng.int(0x300, 0x36f)) : '');
    case 'rtl':
      return String.fromCodePoint(rng.pick(RTL_POINTS));
    case 'bmp': {
      const c = rng.int(0xa0, 0xfffd - 0x800);
      return String.fromCharCode(c >= 0xd800 ? c + 0x800 : c); // no lone surrogates: see the lone-surrogate test
    }
    case 'astral':
      return String.fromCodePoint(rng.int(0x10000, 0x10ffff));
    case 'latin1':
      return String.fromCharCode(rng.int(0x80, 0xff));
    case 'tricky':
      return rng.pick(TRICKY_TEXTS);
  }
}

/** Cuts a string to at most `units` UTF-16 code units, between code points. */
function cutToUnits(s: string, units: number): string {
  if (s.length <= units) return s;
  let out = '';
  for (const cp of s) {
    if (out.length + cp.length > units) break;
    out += cp;
  }
  return out;
}

function genString(rng: Rng, maxUnits: number): string {
  const r = rng.next();
  const pieces = r < 0.1 ? 0 : r < 0.5 ? rng.int(1, 8) : r < 0.85 ? rng.int(1, 40) : rng.int(1, maxUnits);
  const favorite = rng.chance(0.5) ? rng.pick(CATEGORIES) : undefined;
  let s = '';
  for (let i = 0; i < pieces && s.length < maxUnits; i++) s += piece(rng, favorite && rng.chance(0.7) ? favorite : rng.pick(CATEGORIES));
  return cutToUnits(s, maxUnits);
}

const hex64 = (rng: Rng) => Array.from({ length: 8 }, () => rng.u32().toString(16).padStart(8, '0')).join('');

/** What a string is once UTF-8 encoded and decoded (a lone surrogate becomes U+FFFD): what the drivers send. */
const wellFormed = (s: string) => Buffer.from(s, 'utf8').toString('utf8');

// ── Metadata: a JSON tree that keeps how each number and string is spelled ─────────────────

interface StrNode { t: 'str'; v: string; style: number }
interface ObjNode { t: 'obj'; entries: Array<[StrNode, JsonNode]> }
type JsonNode = { t: 'lit'; v: null | boolean } | { t: 'num'; raw: string } | StrNode | { t: 'arr'; items: JsonNode[] } | ObjNode;

const str = (v: string, style = 0): StrNode => ({ t: 'str', v, style });
const num = (raw: string): JsonNode => ({ t: 'num', raw });
const obj = (entries: Array<[string, JsonNode]>): ObjNode => ({ t: 'obj', entries: entries.map(([k, v]) => [str(k), v]) });
const arr = (items: JsonNode[]): JsonNode => ({ t: 'arr', items });
const personalRef = (ref: string): JsonNode => obj([[PERSONAL_MARKER, str(ref)]]);

/** Numbers at the edges, in several spellings each (jsonb prints its own; JSON.parse reads all to the same double). */
const NUMBER_EDGES = [
  '0', '-0', '0.0', '-0.0', '0e0', '0E+0', '-0e-0', '0.000',
  '1e-7', '-1e-7', '1E-7', '1.0e-7', '0.0000001', '10e-8', '9.999999999999997e-7', '0.000001',
  '1e21', '-1e21', '1E+21', '1e+21', '1000000000000000000000', '999999999999999999999', '999999999999999900000', '1e+23', '9.999999999999997e+22',
  '9007199254740991', '-9007199254740991', '9007199254740992', '9007199254740993', '-9007199254740993', '18446744073709551616', '123456789012345678901234567890',
  '5e-324', '-5e-324', '4.9406564584124654e-324', '2.5e-324', '2.4e-324', '2.2250738585072014e-308', '2.225073858507201e-308',
  '1.7976931348623157e308', '-1.7976931348623157e308', '1.7976931348623157E+308', '1.7976931348623158e308',
  '0.30000000000000004', '0.1', '0.2', '0.7', '0.1000000000000000055511151231257827', '1.0000000000000002', '333333333.33333329', '1424953923781206.25',
  '1E+2', '1e2', '100', '100.000', '1E1', '1.5', '-0.25', '4.50', '2e-3', '1e30', '1', '-1', '10', '1e-400', '-1e-400',
];
/** Beyond a double: JSON.parse gives ±Infinity, which has no canonical form (sealed-form.ts, sealingLeaf). */
const NON_FINITE = ['1e400', '-1e400', '1.7976931348623159e308', '-2e308', '1E+309'];

function randomDouble(rng: Rng): number {
  const view = new DataView(new ArrayBuffer(8));
  for (;;) {
    view.setUint32(0, rng.u32());
    view.setUint32(4, rng.u32());
    const x = view.getFloat64(0);
    if (Number.isFinite(x)) return x;
  }
}

function numberRaw(rng: Rng): string {
  const r = rng.next();
  if (r < 0.35) return rng.pick(NUMBER_EDGES);
  if (r < 0.5) return String(rng.chance(0.5) ? rng.int(-1000, 1000) : rng.safeInt());
  if (r < 0.8) {
    const x = rng.chance(0.5) ? randomDouble(rng) : (rng.next() - 0.5) * 10 ** rng.int(-30, 30);
    let text = rng.pick([String(x), x.toExponential(), x.toPrecision(17), x.toExponential(rng.int(0, 20)), x.toPrecision(rng.int(1, 21))]);
    if (rng.chance(0.3)) text = text.replace('e', 'E');
    if (rng.chance(0.3)) text = text.replace('+', '');
    return text;
  }
  // A long decimal, as jsonb keeps it (up to ~1e300, so that it stays a finite double).
  const digits = (n: number) => Array.from({ length: n }, () => String(rng.int(0, 9))).join('');
  const whole = rng.chance(0.3) ? '0' : String(rng.int(1, 9)) + digits(rng.int(0, 29));
  const fraction = rng.chance(0.6) ? '.' + digits(rng.int(1, 30)) : '';
  const exponent = rng.chance(0.4) ? `${rng.pick(['e', 'E'])}${rng.pick(['', '+', '-'])}${rng.int(0, 300 - whole.length)}` : '';
  return `${rng.chance(0.3) ? '-' : ''}${whole}${fraction}${exponent}`;
}

/** Keys whose orders by UTF-16 code units and by code points differ (U+E000 < U+1F600 by code point, > by code unit), and other odd ones. */
const KEY_POOL = [
  '', 'a', 'A', 'b', 'B', '1', '10', '2', 'é', 'e\u0301', '\u00e4', '\uE000', '\uD83D\uDE00', '\uFFFF', '\uFFFD', '\uFB33', '\u20AC', '\u0080', '\r', '\n',
  '\u001f', '\u007f', '"', '\\', ' ', PERSONAL_MARKER, '"$personal"', '__proto__', 'constructor', 'toString', 'hasOwnProperty', 'email', 'oldEmail', 'newEmail',
  'key with space', '\u2028', '\uFEFF', '\u05D0', '\u{10FFFF}', '\u{1F600}\u{1F3FB}', '\u{10000}', '\uD7FF',
];

const genKey = (rng: Rng): StrNode => str(rng.chance(0.45) ? rng.pick(KEY_POOL) : genString(rng, 24), rng.chance(0.5) ? 0 : rng.int(0, 31));

function genLeaf(rng: Rng): JsonNode {
  const r = rng.next();
  if (r < 0.35) return str(genString(rng, 80), rng.chance(0.5) ? 0 : rng.int(0, 31));
  if (r < 0.75) return num(numberRaw(rng));
  if (r < 0.85) return { t: 'lit', v: rng.pick([null, true, false]) };
  if (r < 0.9) return personalRef(hex64(rng));
  return rng.chance(0.5) ? arr([]) : obj([]);
}

function genNode(rng: Rng, depth: number): JsonNode {
  if (depth >= 7 || rng.chance(0.5 + depth * 0.07)) return genLeaf(rng);
  return rng.chance(0.45) ? arr(Array.from({ length: rng.int(0, 6) }, () => genNode(rng, depth + 1))) : genObject(rng, depth + 1);
}

function genObject(rng: Rng, depth: number): ObjNode {
  const n = rng.chance(0.15) ? 0 : rng.int(1, 7);
  return { t: 'obj', entries: Array.from({ length: n }, () => [genKey(rng), genNode(rng, depth)] as [StrNode, JsonNode]) };
}

/** A chain `depth` levels deep, arrays and objects by turns, with empty ones at the bottom. */
function chain(depth: number, leaf: JsonNode): JsonNode {
  let node = leaf;
  for (let i = 0; i < depth; i++) node = i % 2 === 0 ? arr([node, arr([]), obj([])]) : obj([[`k${i}`, node], ['', obj([])]]);
  return node;
}

const WHITESPACE = ['', '', '', ' ', '\n', '\t', '\r\n', '  '];

/**
 * The JSON text of a tree: numbers as spelled; strings escaped per their style (bit 0: non-ASCII
 * as \uXXXX, 1: solidus as \/, 2: upper-case hex, 3: short escapes \b \f \n \r \t, 4: every
 * code unit as \uXXXX); whitespace between tokens from `layout` (0: none).
 */
function jsonText(node: JsonNode, layout: number): string {
  const ws = new Rng(layout);
  const space = () => (layout === 0 ? '' : ws.pick(WHITESPACE));
  const u = (c: number, style: number) => {
    const hex = c.toString(16).padStart(4, '0');
    return `\\u${style & 4 ? hex.toUpperCase() : hex}`;
  };
  const SHORT: Record<number, string> = { 8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r' };
  const token = ({ v, style }: StrNode) => {
    let out = '"';
    for (let i = 0; i < v.length; i++) {
      const c = v.charCodeAt(i);
      if (style & 16) out += u(c, style);
      else if (c === 0x22) out += '\\"';
      else if (c === 0x5c) out += '\\\\';
      else if (c < 0x20) out += style & 8 && SHORT[c] ? SHORT[c] : u(c, style);
      else if (c === 0x2f && style & 2) out += '\\/';
      else if (c >= 0x7f && style & 1) out += u(c, style);
      else out += v[i];
    }
    return out + '"';
  };
  const write = (n: JsonNode): string => {
    switch (n.t) {
      case 'lit':
        return String(n.v);
      case 'num':
        return n.raw;
      case 'str':
        return token(n);
      case 'arr':
        return `[${space()}${n.items.map((item) => write(item) + space()).join(`,${space()}`)}]`;
      case 'obj':
        return `{${space()}${n.entries.map(([k, v]) => `${token(k)}${space()}:${space()}${write(v)}${space()}`).join(`,${space()}`)}}`;
    }
  };
  return space() + write(node) + space();
}

/** JSON.parse with -0 read as 0: jsonb's numeric has no negative zero (it prints "-0" as "0"), and canonical JSON writes both as 0. */
const parseNoNegativeZero = (text: string): unknown => JSON.parse(text, (_key, value: unknown) => (Object.is(value, -0) ? 0 : value));

// ── Records ────────────────────────────────────────────────────────────────────────────────

interface Stamp {
  /** As written to the "timestamp" column. */
  text: string;
  /** As the service reads it (timestamps.ts's isoTimestamp). */
  expected: string;
}

/** A bigint column's value: a number, or (only with CANONICAL_INCLUDE_KNOWN, and in the focused test) the exact digits of one beyond ±(2^53 − 1). */
type Bigint = number | string | null;
const asNumber = (v: Bigint) => (v === null ? null : Number(v));

interface GenRecord {
  /** 'owner': an INSERT by the owner, with a chosen timestamp; 'writer': the service's own audit writer (createAuditWriter). */
  via: 'owner' | 'writer';
  actor_id: Bigint;
  action: string;
  resource_type: string;
  resource_id: Bigint;
  /** Null: the clock's (the stamp trigger's, or the column's default). */
  timestamp: Stamp | null;
  result: string;
  metadata: ObjNode;
  /** Whitespace of the metadata's JSON text (jsonText). */
  layout: number;
  ip: string | null;
  user_agent: string | null;
  request_id: string;
}

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const PLAIN_STAMP: Stamp = { text: '2026-01-01 00:00:00+00', expected: '2026-01-01T00:00:00.000Z' };

/** Timestamps at the edges: the years the sealed form writes in ISO form (1 to 9999) and those it passes on as PostgreSQL prints them. */
const TIMESTAMP_EDGES: Stamp[] = [
  { text: '0001-01-01 00:00:00+00', expected: '0001-01-01T00:00:00.000Z' },
  { text: '0001-01-01 00:00:00.000999+00', expected: '0001-01-01T00:00:00.000Z' },
  { text: '0999-12-31 23:59:59.999999+00', expected: '0999-12-31T23:59:59.999Z' },
  { text: '1000-01-01 00:00:00+00', expected: '1000-01-01T00:00:00.000Z' },
  { text: '1969-12-31 23:59:59.9995+00', expected: '1969-12-31T23:59:59.999Z' },
  { text: '1970-01-01 00:00:00+00', expected: '1970-01-01T00:00:00.000Z' },
  { text: '2000-02-29 12:00:00.5+05:30', expected: '2000-02-29T06:30:00.500Z' },
  { text: '2026-01-02 03:04:05.0005+00', expected: '2026-01-02T03:04:05.000Z' },
  { text: '2026-01-02 03:04:05.999999+00', expected: '2026-01-02T03:04:05.999Z' },
  { text: '9999-12-31 23:59:59.999999+00', expected: '9999-12-31T23:59:59.999Z' },
  // Beyond year 9999 and before year 1 (an offset moves them there): as PostgreSQL prints them.
  { text: '9999-12-31 23:59:59.999999-01', expected: '10000-01-01 00:59:59.999999+00' },
  { text: '0001-01-01 00:30:00+01', expected: '0001-12-31 23:30:00+00 BC' },
  { text: '0001-12-31 23:59:59.999999+00 BC', expected: '0001-12-31 23:59:59.999999+00 BC' },
  { text: '0044-03-15 12:00:00+00 BC', expected: '0044-03-15 12:00:00+00 BC' },
  { text: '4714-11-24 00:00:00+00 BC', expected: '4714-11-24 00:00:00+00 BC' },
  { text: '10000-01-01 00:00:00+00', expected: '10000-01-01 00:00:00+00' },
  { text: '294276-12-31 23:59:59.999999+00', expected: '294276-12-31 23:59:59.999999+00' },
  { text: 'infinity', expected: 'infinity' },
  { text: '-infinity', expected: '-infinity' },
];

const OFFSETS: Array<[string, number]> = [['+00', 0], ['+00', 0], ['+00:00', 0], ['+05:30', 330], ['-08', -480], ['+14', 840], ['-12', -720], ['-03:30', -210], ['+13:45', 825]];

function yearStart(year: number): number {
  const d = new Date(0);
  d.setUTCFullYear(year, 0, 1);
  return d.getTime();
}
const RANDOM_FROM = yearStart(2);
const RANDOM_TO = yearStart(9999);
const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** A random instant of years 2 to 9998, to the microsecond, written with 0 to 6 fraction digits in some offset. */
function randomStamp(rng: Rng): Stamp {
  const ms = RANDOM_FROM + Math.floor((rng.next() + rng.next() / 4294967296) * (RANDOM_TO - RANDOM_FROM));
  const utc = new Date(ms);
  const digits = rng.int(0, 6);
  const six = pad(utc.getUTCMilliseconds() * 1000 + rng.int(0, 999), 6).slice(0, digits).padEnd(6, '0');
  const [offsetText, offsetMinutes] = rng.pick(OFFSETS);
  const local = new Date(ms + offsetMinutes * 60_000);
  const text =
    `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())} ` +
    `${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}${digits > 0 ? '.' + six.slice(0, digits) : ''}${offsetText}`;
  return { text, expected: `${utc.toISOString().slice(0, 20)}${six.slice(0, 3)}Z` };
}

/** Bigints a double cannot hold, as exact decimal text (a JS number beyond 2^53 is already rounded). */
const BEYOND_SAFE = ['9007199254740993', '-9007199254740993', '9223372036854775807', '-9223372036854775808'];
const ID_EDGES = [0, 1, -1, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 1e15, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER];
const IPS = ['127.0.0.1', '::1', '10.0.0.1', '2001:db8::1', '::ffff:192.0.2.1', 'fe80::1%eth0', '255.255.255.255', '0.0.0.0', ''];

/** A word of the form the CHECK constraints hold action and resource_type to: ^[A-Z][A-Z_]*$. */
function word(rng: Rng): string {
  let w = String.fromCharCode(rng.int(65, 90));
  for (let i = rng.int(0, 60); i > 0; i--) w += rng.chance(0.15) ? '_' : String.fromCharCode(rng.int(65, 90));
  return w;
}

/**
 * Ids stay within ±(2^53 − 1), the range in which a JS number holds a bigint exactly: beyond it
 * every encoder refuses the record (a focused test below), and only INCLUDE_KNOWN goes there.
 */
function randomId(rng: Rng): Bigint {
  const r = rng.next();
  if (r < 0.3) return null;
  if (r < 0.55) return rng.pick(ID_EDGES);
  if (INCLUDE_KNOWN && r < 0.6) return rng.pick(BEYOND_SAFE);
  return rng.chance(0.5) ? rng.int(1, 100_000) : rng.safeInt();
}

/** Leaves out what LEADING_BOM_DROPPED says: a text column's value starting with U+FEFF. */
function withoutKnown(g: GenRecord): GenRecord {
  if (!LEADING_BOM_DROPPED) return g;
  const guard = (s: string | null) => (s !== null && s.startsWith('\uFEFF') ? `x${s}` : s);
  return { ...g, ip: guard(g.ip), user_agent: guard(g.user_agent), request_id: guard(g.request_id)! };
}

/**
 * A bound on the text jsonb prints for a tree: its compact JSON, plus, per number, as many digits
 * as its exponent adds (jsonb prints 1.4E+237 with all 238 of them).
 */
function jsonbTextBound(node: JsonNode): number {
  switch (node.t) {
    case 'num':
      return node.raw.length + Math.abs(Number(/[eE]([+-]?\d+)/.exec(node.raw)?.[1] ?? 0)) + 2;
    case 'str':
      return Buffer.byteLength(jsonText(node, 0)) * 2;
    case 'arr':
      return 2 + node.items.reduce((n, item) => n + 2 + jsonbTextBound(item), 0);
    case 'obj':
      return 2 + node.entries.reduce((n, [k, v]) => n + 4 + jsonbTextBound(k) + jsonbTextBound(v), 0);
    default:
      return 5;
  }
}

/** audit_log_bounded (migrations/0008): the metadata's text is at most 16,384 bytes, so that a sealed form fits a tlog-tiles entry. */
const METADATA_BOUND = 16_384;

/** Whether a record stays inside what the property holds the encoders to (see INCLUDE_KNOWN), and inside the table's bounds. */
const admissible = (g: GenRecord) =>
  withinBounds(g) && (!LEADING_BOM_DROPPED || [g.ip, g.user_agent, g.request_id].every((s) => s === null || !s.startsWith('\uFEFF')));

/** audit_log_bounded: the metadata's text, ip (64), user_agent (512: the writer cuts it there itself) and request_id (128). */
const withinBounds = (g: GenRecord) =>
  jsonbTextBound(g.metadata) <= METADATA_BOUND && (g.ip?.length ?? 0) <= 64 && (g.via === 'writer' || (g.user_agent?.length ?? 0) <= 512) && g.request_id.length <= 128;

function randomRecord(rng: Rng): GenRecord {
  const via = rng.chance(0.12) ? 'writer' : 'owner';
  const metadata = genObject(rng, 0);
  for (const key of PERSONAL_KEYS) {
    // The writer turns a string under these keys into {"$personal": ref}; the owner writes the marker itself.
    if (rng.chance(0.25)) metadata.entries.push([str(key), via === 'writer' ? str(genString(rng, 60), rng.int(0, 31)) : personalRef(hex64(rng))]);
  }
  if (rng.chance(0.02)) metadata.entries.push([genKey(rng), rng.chance(0.5) ? num(rng.pick(NON_FINITE)) : arr([num('1'), num(rng.pick(NON_FINITE))])]);
  if (rng.chance(0.01)) metadata.entries.push([str('deep'), chain(rng.int(20, 80), genLeaf(rng))]);
  const stampDraw = rng.next();
  return {
    via,
    actor_id: randomId(rng),
    action: via === 'writer' || rng.chance(0.5) ? rng.pick(AUDIT_ACTIONS) : word(rng),
    resource_type: via === 'writer' || rng.chance(0.5) ? rng.pick(RESOURCE_TYPES) : word(rng),
    resource_id: randomId(rng),
    timestamp: via === 'writer' || stampDraw < 0.08 ? null : stampDraw < 0.3 ? rng.pick(TIMESTAMP_EDGES) : randomStamp(rng),
    result: rng.pick(AUDIT_RESULTS),
    metadata,
    layout: rng.chance(0.5) ? 0 : rng.u32() || 1,
    ip: rng.chance(0.3) ? null : rng.chance(0.4) ? rng.pick(IPS) : genString(rng, 64),
    // The writer cuts user agents at 512 (UTF-16 units); up to 600 here, so that it has to.
    user_agent: rng.chance(0.2) ? null : rng.chance(0.15) ? cutToUnits(genString(rng, 4096).repeat(20), rng.int(480, via === 'writer' ? 600 : 512)) : genString(rng, 512),
    request_id: rng.chance(0.3) ? `${hex64(rng).slice(0, 8)}-${hex64(rng).slice(0, 4)}` : genString(rng, 128),
  };
}

const ALL_CONTROLS = String.fromCharCode(...CONTROL_POINTS);
const ALL_SPECIALS = String.fromCodePoint(...SPECIAL_POINTS);

/**
 * The first records of every seed hold what must not be left to chance: every control
 * character and every special code point in every string field, key and value; every number
 * edge; empty values; a deep chain; personal refs; the longest user agents; a number beyond a
 * double; every timestamp edge.
 */
const FIXED: Array<(base: GenRecord, rng: Rng) => GenRecord> = [
  (b) => ({
    ...b, via: 'owner', ip: ALL_CONTROLS, user_agent: `ua${ALL_CONTROLS}ua`, request_id: `r${ALL_CONTROLS}`,
    metadata: obj([...CONTROL_POINTS.map((c): [string, JsonNode] => [String.fromCharCode(c), str(String.fromCharCode(c))]), [ALL_CONTROLS, str(ALL_CONTROLS, 8)], ['short', str(ALL_CONTROLS, 8 | 4)]]),
  }),
  (b) => ({
    ...b, via: 'owner', ip: ALL_SPECIALS, user_agent: ALL_SPECIALS, request_id: ALL_SPECIALS,
    metadata: obj([...SPECIAL_POINTS.map((c): [string, JsonNode] => [String.fromCodePoint(c), str(String.fromCodePoint(c), c & 31)]), ['all', str(ALL_SPECIALS)], ['escaped', str(ALL_SPECIALS, 1)], ['every unit escaped', str(ALL_SPECIALS, 16)]]),
  }),
  (b) => ({ ...b, via: 'owner', metadata: obj([['n', arr(NUMBER_EDGES.map(num))], ...NUMBER_EDGES.map((raw): [string, JsonNode] => [raw, num(raw)])]) }),
  (b) => ({ ...b, via: 'owner', actor_id: null, resource_id: null, ip: '', user_agent: '', request_id: '', metadata: obj([]), layout: 0 }),
  (b) => ({ ...b, via: 'owner', actor_id: null, resource_id: null, ip: null, user_agent: null, metadata: obj([['', str('')], ['a', arr([])], ['o', obj([])], ['deep', chain(64, str('bottom'))]]) }),
  (b, rng) => ({
    ...b, via: 'owner',
    metadata: obj([
      ['email', personalRef(hex64(rng))], ['oldEmail', personalRef(hex64(rng))], ['newEmail', personalRef(hex64(rng))], [PERSONAL_MARKER, str(hex64(rng))],
      ['nested', obj([['email', personalRef(hex64(rng))], ['list', arr([personalRef(hex64(rng)), personalRef('')])]])], ['"$personal"', str('not a ref')],
    ]),
  }),
  (b) => ({ ...b, via: 'owner', user_agent: '\u{1F600}'.repeat(256), ip: 'x'.repeat(64), request_id: '"\\'.repeat(64) }),
  (b) => ({ ...b, via: 'owner', user_agent: 'Mozilla/5.0 "quoted" \\back\\ '.repeat(18).slice(0, 512) }),
  (b) => ({ ...b, via: 'owner', metadata: obj([['over', num('1e400')], ['fine', num('1')]]) }),
  (b, rng) => ({ ...b, via: 'writer', timestamp: null, action: 'CREATE_USER', resource_type: 'USER', metadata: obj([['email', str(`a${ALL_CONTROLS}@b`)], ['oldEmail', str(ALL_SPECIALS)], ['newEmail', str('')], ['n', num('1e400')], ['z', num('-0')], ['h', str(hex64(rng))]]) }),
  // 511 units, then a surrogate pair the writer's slice(0, 512) cuts in two (see the user-agent test).
  (b) => ({ ...b, via: 'writer', timestamp: null, action: 'LOGIN_SUCCESS', resource_type: 'USER', user_agent: `${'u'.repeat(511)}\u{1F600}tail` }),
  ...TIMESTAMP_EDGES.map((stamp) => (b: GenRecord): GenRecord => ({ ...b, via: 'owner', timestamp: stamp })),
];

function generate(index: number): GenRecord {
  const rng = recordRng(index);
  // A record over the table's bounds is drawn again (from the same stream: reproducible). A
  // fixed record is checked as it comes out: one that makes a writer's record the owner's keeps
  // the writer's user agent, which may run past 512 (the owner's insert has no cut).
  const fixed = FIXED[index] ?? ((b: GenRecord) => b);
  let record = fixed(randomRecord(rng), rng);
  for (let i = 0; i < 50 && !withinBounds(record); i++) record = fixed(randomRecord(rng), rng);
  return withoutKnown(record);
}

/** JSON of a value in ASCII only, every other code unit as \uXXXX, so that it pastes into code as it is (and shows what is invisible). */
const visible = (s: string) => s.replace(/[^\x20-\x7e\n]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
const ascii = (value: unknown, indent?: number) => visible(JSON.stringify(value, null, indent));

/** A record as a message shows it. */
const describe = (g: GenRecord) => ascii({ ...g, timestamp: g.timestamp?.text ?? '(the clock)', metadata: jsonText(g.metadata, g.layout), layout: undefined }, 1);

// ── Writing and reading back ──────────────────────────────────────────────────────────────

const writer = createAuditWriter(Buffer.alloc(32, 0x5a));
let nextSmallId = 1_000_000;
let nextBigId = Number.MAX_SAFE_INTEGER;
let flip = false;
/** Ids for the owner's records: around a million, and down from 2^53 − 1, by turns. */
function nextId(): number {
  flip = !flip;
  return flip ? nextSmallId++ : nextBigId--;
}

const INSERT_COLUMNS = 'id, actor_id, action, resource_type, resource_id, "timestamp", result, metadata, ip, user_agent, request_id';
const VALUES_ROW = (p: number) =>
  `($${p + 1}::bigint, $${p + 2}::bigint, $${p + 3}, $${p + 4}, $${p + 5}::bigint, COALESCE($${p + 6}::timestamptz, clock_timestamp()), $${p + 7}, $${p + 8}::jsonb, $${p + 9}, $${p + 10}, $${p + 11})`;

/**
 * The owner's records in one INSERT, with their timestamps: the stamp trigger (an ordinary
 * trigger, unlike the append-only guards, which are ENABLE ALWAYS) does not fire in a
 * transaction that sets session_replication_role = replica; the CHECK constraints still hold.
 */
async function insertOwner(records: GenRecord[]): Promise<number[]> {
  if (records.length === 0) return [];
  const ids = records.map(() => nextId());
  const params = records.flatMap((g, i) => [
    ids[i], g.actor_id, g.action, g.resource_type, g.resource_id, g.timestamp?.text ?? null, g.result, jsonText(g.metadata, g.layout), g.ip, g.user_agent, g.request_id,
  ]);
  await h.database.owner.transaction(async (tx) => {
    await tx.query('SET LOCAL session_replication_role = replica');
    await tx.query(`INSERT INTO audit_log (${INSERT_COLUMNS}) OVERRIDING SYSTEM VALUE VALUES ${records.map((_, i) => VALUES_ROW(i * 11)).join(', ')}`, params);
  });
  return ids;
}

const writerMetadata = (g: GenRecord) => JSON.parse(jsonText(g.metadata, g.layout)) as Record<string, unknown>;

/** The service's records, through its own audit writer on its own connection (ids from the identity, in call order). */
async function insertWriter(records: GenRecord[]): Promise<number[]> {
  if (records.length === 0) return [];
  const ids = await h.database.db.transaction(async (tx) => {
    for (const g of records) {
      writer.record(
        tx,
        { actor: undefined, ip: g.ip, userAgent: g.user_agent, requestId: g.request_id },
        {
          action: g.action as AuditAction, resourceType: g.resource_type as ResourceType, resourceId: asNumber(g.resource_id), result: g.result as AuditResult,
          metadata: writerMetadata(g), actorId: asNumber(g.actor_id),
        },
      );
    }
    return (await tx.query<{ id: number }>('SELECT id FROM audit_log WHERE xact_id = pg_current_xact_id() ORDER BY id')).map((r) => r.id);
  });
  assert.equal(ids.length, records.length, 'the writer wrote one record per call');
  return ids;
}

interface Parts {
  id: number;
  head: string;
  metadata: string;
  tail: string;
  sealed: string;
  /** EXACT_SQL: the row reaches the service as stored (else the verifier refuses it, as the sealer does). */
  exact: boolean;
}

const PARTS_SQL = `SELECT a.id, ${CANONICAL_HEAD_SQL} AS head, ${CANONICAL_METADATA_SQL} AS metadata, ${CANONICAL_TAIL_SQL} AS tail, ${SEALED_FORM_JSON} AS sealed, ${EXACT_SQL} AS exact
  FROM audit_log a WHERE a.id = ANY($1::bigint[])`;

/** (a) as the service reads records (audit.repository.ts: its columns, the driver's parsers), (b) and (c) as the SQL encoders write them. */
async function readBack(q: Queryable, ids: number[]): Promise<{ rows: Map<number, AuditRow>; parts: Map<number, Parts> }> {
  const rows = await findAuditRecords(q, ids);
  const parts = await q.query<Parts>(PARTS_SQL, [ids]);
  return { rows: new Map(rows.map((r) => [r.id, r])), parts: new Map(parts.map((p) => [p.id, p])) };
}

// ── The property ───────────────────────────────────────────────────────────────────────────

const hex = (b: Buffer) => b.toString('hex');
/** The leaf sealingLeaf gives a record without a canonical form (sealed-form.ts). */
const unverifiableLeaf = (id: number) => leafHash(Buffer.concat([Buffer.from([0xff]), Buffer.from(`no canonical form: record ${id}`)]));
const canonicalOrUndefined = (value: unknown) => {
  try {
    return canonicalize(value);
  } catch {
    return undefined;
  }
};

/** The record the service should read back: what was written, as the database keeps it. */
function expectedMetadata(g: GenRecord, stored: Record<string, unknown>): unknown {
  if (g.via === 'owner') return parseNoNegativeZero(jsonText(g.metadata, g.layout));
  const written = writerMetadata(g);
  const expected: Record<string, unknown> = { ...written };
  for (const key of PERSONAL_KEYS) {
    if (typeof written[key] !== 'string') continue;
    const marker = stored[key] as Record<string, unknown> | undefined;
    assert.deepEqual(Object.keys(marker ?? {}), [PERSONAL_MARKER], `metadata.${key}: the writer stores {"$personal": ref} for a personal value`);
    assert.match(String(marker![PERSONAL_MARKER]), /^[0-9a-f]{64}$/);
    expected[key] = marker;
  }
  // What JSON.stringify makes of it (±Infinity becomes null, -0 becomes 0), as the writer sends it.
  return parseNoNegativeZero(JSON.stringify(expected));
}

/** Whether the encoders agree on one record; counts whether it has a canonical form. Throws an AssertionError where they do not. */
function checkRecord(g: GenRecord, id: number, row: AuditRow | undefined, parts: Parts | undefined): { canonical: boolean } {
  assert.ok(row, `record ${id} is read back by findAuditRecords`);
  assert.ok(parts, `record ${id} is read back as its SQL encodings`);

  // (a) The service's reading is the record written, as the database keeps it.
  assert.deepEqual(row.metadata, JSON.parse(parts.metadata) as unknown, 'the service parses the metadata jsonb prints');
  const stored = parseNoNegativeZero(parts.metadata) as Record<string, unknown>;
  assert.deepEqual(stored, expectedMetadata(g, stored), 'the metadata is the one written (the same JSON value, as doubles)');
  const cut = g.via === 'writer' && g.user_agent !== null ? g.user_agent.slice(0, 512) : g.user_agent;
  if (g.timestamp === null) assert.match(row.timestamp, ISO_MS, 'a clock timestamp, as the service reads it');
  assert.deepEqual(
    { ...row, metadata: undefined },
    {
      id, actor_id: asNumber(g.actor_id), action: g.action, resource_type: g.resource_type, resource_id: asNumber(g.resource_id), timestamp: g.timestamp?.expected ?? row.timestamp,
      result: g.result, metadata: undefined, ip: g.ip, user_agent: cut === null ? null : wellFormed(cut), request_id: g.request_id,
    },
    'the service reads back the record written',
  );

  // (b) PostgreSQL's canonical text (the database verification) against the JS encoder (the sealer).
  const metadata = JSON.parse(parts.metadata) as unknown;
  const sealed = sealedForm(row);
  const jsText = canonicalOrUndefined(sealed);
  const parsedSealed = JSON.parse(parts.sealed) as Record<string, unknown>;
  if (jsText !== undefined) {
    assert.equal(parts.head + canonicalize(metadata) + parts.tail, jsText, 'CANONICAL_HEAD_SQL ‖ JCS(metadata) ‖ CANONICAL_TAIL_SQL is canonicalize(sealedForm(row))');
    const leaf = hex(rowLeaf(row));
    assert.equal(leaf, hex(leafHash(jsText)), 'rowLeaf is SHA-256(0x00 ‖ JCS(sealedForm(row)))');
    assert.equal(hex(canonicalLeaf(parts.head, metadata, parts.tail)), leaf, 'canonicalLeaf (the verifier) equals rowLeaf (the sealer)');
    assert.equal(hex(recordLeaf(sealed)), leaf, 'recordLeaf(sealedForm(row)) equals rowLeaf(row)');
    const sealing = sealingLeaf(row);
    assert.equal(sealing.canonical, true);
    assert.equal(hex(sealing.leaf), leaf, "the sealer's leaf is rowLeaf");
  } else {
    // No canonical form (a number beyond a double in the metadata): every computation refuses, and the sealer seals the record as unverifiable.
    assert.equal(canonicalOrUndefined(metadata), undefined, 'it is the metadata that has no canonical form');
    assert.equal(parts.head + '{}' + parts.tail, canonicalize({ ...sealed, metadata: {} }), 'the rest of the record agrees all the same');
    assert.throws(() => rowLeaf(row), TypeError, 'rowLeaf refuses a record without a canonical form');
    assert.throws(() => recordLeaf(sealed), TypeError);
    assert.throws(() => canonicalLeaf(parts.head, metadata, parts.tail), TypeError, 'canonicalLeaf (so the verifier) refuses it too');
    assert.throws(() => recordLeaf(parsedSealed as never), TypeError, "the export's sealed form has none either");
    const sealing = sealingLeaf(row);
    assert.equal(sealing.canonical, false, 'sealingLeaf marks it non-canonical');
    assert.equal(hex(sealing.leaf), hex(unverifiableLeaf(id)), 'with the leaf no canonical form has');
  }

  // (c) The export's JSON text: the API's keys in the API's order, parsing to sealedForm(row).
  assert.deepEqual(Object.keys(parsedSealed), [...SEALED_FIELDS], 'SEALED_FORM_JSON has the sealed fields in the API order');
  assert.deepEqual(parsedSealed, sealed as unknown, 'JSON.parse(SEALED_FORM_JSON) deep-equals sealedForm(row)');
  if (jsText !== undefined) {
    assert.equal(canonicalize(parsedSealed), jsText, 'and canonicalizes identically');
    assert.equal(hex(recordLeaf(parsedSealed as never)), hex(rowLeaf(row)));
  }
  return { canonical: jsText !== undefined };
}

/** One record written and checked on its own: the error, if any (a refusal by the database included). */
async function attempt(g: GenRecord): Promise<Error | undefined> {
  try {
    const [id] = g.via === 'owner' ? await insertOwner([g]) : await insertWriter([g]);
    const back = await readBack(h.database.db, [id!]);
    checkRecord(g, id!, back.rows.get(id!), back.parts.get(id!));
    return undefined;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

function* shrinkString(s: string): Generator<string> {
  const cps = Array.from(s);
  if (cps.length === 0) return;
  yield '';
  if (cps.length > 1) {
    yield cps.slice(0, cps.length >> 1).join('');
    yield cps.slice(cps.length >> 1).join('');
  }
  if (cps.length <= 12) for (let i = 0; i < cps.length; i++) yield [...cps.slice(0, i), ...cps.slice(i + 1)].join('');
}

function* shrinkNode(n: JsonNode, top: boolean): Generator<JsonNode> {
  switch (n.t) {
    case 'lit':
      if (n.v !== null) yield { t: 'lit', v: null };
      return;
    case 'num':
      if (n.raw !== '0') yield num('0');
      return;
    case 'str':
      if (n.style !== 0) yield { ...n, style: 0 };
      for (const v of shrinkString(n.v)) yield { ...n, v };
      return;
    case 'arr':
      if (!top) yield* n.items;
      if (n.items.length > 0) yield arr([]);
      for (let i = 0; i < n.items.length; i++) yield arr(n.items.filter((_, j) => j !== i));
      for (let i = 0; i < n.items.length; i++) for (const s of shrinkNode(n.items[i]!, false)) yield arr(n.items.map((item, j) => (j === i ? s : item)));
      return;
    case 'obj':
      if (!top) for (const [, v] of n.entries) yield v;
      if (n.entries.length > 0) yield { t: 'obj', entries: [] };
      for (let i = 0; i < n.entries.length; i++) yield { t: 'obj', entries: n.entries.filter((_, j) => j !== i) };
      for (let i = 0; i < n.entries.length; i++) {
        const [k, v] = n.entries[i]!;
        for (const s of shrinkNode(k, false)) yield { t: 'obj', entries: n.entries.map((e, j) => (j === i ? [s as StrNode, v] : e)) };
        for (const s of shrinkNode(v, false)) yield { t: 'obj', entries: n.entries.map((e, j) => (j === i ? [k, s] : e)) };
      }
      return;
  }
}

function* shrinkRecord(g: GenRecord): Generator<GenRecord> {
  if (g.actor_id !== null) yield { ...g, actor_id: null };
  if (g.resource_id !== null) yield { ...g, resource_id: null };
  if (g.ip !== null) yield { ...g, ip: null };
  if (g.user_agent !== null) yield { ...g, user_agent: null };
  if (g.via === 'owner') {
    if (g.timestamp?.text !== PLAIN_STAMP.text) yield { ...g, timestamp: PLAIN_STAMP };
    if (g.action !== 'A') yield { ...g, action: 'A' };
    if (g.resource_type !== 'A') yield { ...g, resource_type: 'A' };
  }
  if (g.result !== 'SUCCESS') yield { ...g, result: 'SUCCESS' };
  if (g.layout !== 0) yield { ...g, layout: 0 };
  for (const m of shrinkNode(g.metadata, true)) yield { ...g, metadata: m as ObjNode };
  for (const v of shrinkString(g.request_id)) yield { ...g, request_id: v };
  if (g.ip !== null) for (const v of shrinkString(g.ip)) yield { ...g, ip: v };
  if (g.user_agent !== null) for (const v of shrinkString(g.user_agent)) yield { ...g, user_agent: v };
  if (g.actor_id !== null && g.actor_id !== 1) yield { ...g, actor_id: 1 };
  if (g.resource_id !== null && g.resource_id !== 1) yield { ...g, resource_id: 1 };
}

/** Greedy shrinking: the first simpler record that still fails, again, until none does. */
async function shrink(g: GenRecord, error: Error): Promise<{ record: GenRecord; error: Error; steps: number }> {
  let current = { record: g, error, steps: 0 };
  let attempts = 0;
  for (let progress = true; progress && attempts < MAX_SHRINK_ATTEMPTS; ) {
    progress = false;
    for (const candidate of shrinkRecord(current.record)) {
      if (!admissible(candidate)) continue;
      if (++attempts > MAX_SHRINK_ATTEMPTS) break;
      const err = await attempt(candidate);
      if (err) {
        current = { record: candidate, error: err, steps: current.steps + 1 };
        progress = true;
        break;
      }
    }
  }
  return current;
}

interface Failure {
  index: number;
  record: GenRecord;
  error: Error;
}

/** Writes the records in batches, reads them back, and checks them in order: the first failure, if any. */
async function firstFailure(indices: number[], stats: { checked: number; canonical: number; writer: number }): Promise<Failure | undefined> {
  for (let start = 0; start < indices.length; start += BATCH) {
    const batch = indices.slice(start, start + BATCH).map((index) => ({ index, record: generate(index) }));
    const owners = batch.filter((b) => b.record.via === 'owner');
    const writers = batch.filter((b) => b.record.via === 'writer');
    let ids: number[];
    try {
      const ownerIds = await insertOwner(owners.map((b) => b.record));
      const writerIds = await insertWriter(writers.map((b) => b.record));
      const byRecord = new Map([...owners.map((b, i) => [b, ownerIds[i]!] as const), ...writers.map((b, i) => [b, writerIds[i]!] as const)]);
      ids = batch.map((b) => byRecord.get(b)!);
    } catch (batchError) {
      // The database refused the batch: find the record it refused.
      for (const b of batch) {
        const error = await attempt(b.record);
        if (error) return { ...b, error };
      }
      throw batchError;
    }
    const back = await readBack(h.database.db, ids);
    for (const [i, b] of batch.entries()) {
      try {
        const { canonical } = checkRecord(b.record, ids[i]!, back.rows.get(ids[i]!), back.parts.get(ids[i]!));
        stats.checked++;
        if (canonical) stats.canonical++;
        if (b.record.via === 'writer') stats.writer++;
      } catch (error) {
        return { ...b, error: error instanceof Error ? error : new Error(String(error)) };
      }
    }
  }
  return undefined;
}

test(`property: for generated records (seed from CANONICAL_SEED, else random), PostgreSQL's canonical text and export JSON agree with the JS encoder, on ${DB_KIND}`, async (t) => {
  const indices = ONLY ?? Array.from({ length: COUNT }, (_, i) => i);
  t.diagnostic(`seed ${SEED_TEXT} (CANONICAL_SEED=${SEED_TEXT}), ${indices.length} records`);
  const stats = { checked: 0, canonical: 0, writer: 0 };
  const started = Date.now();
  const failure = await firstFailure(indices, stats);
  if (failure) {
    const minimal = await shrink(failure.record, failure.error);
    assert.fail(
      [
        `the canonical encoders disagree on ${DB_KIND}: seed ${SEED_TEXT}, record #${failure.index}`,
        `reproduce: CANONICAL_SEED=${SEED_TEXT} CANONICAL_ONLY=${failure.index} node scripts/test.mjs --no-checks --only ${DB_KIND} test/canonical-encoders.test.ts`,
        `minimal record (${minimal.steps} shrinking steps):`,
        describe(minimal.record),
        `its failure: ${minimal.error.message}`,
        '',
        'the record as generated:',
        describe(failure.record),
        `its failure: ${failure.error.message}`,
      ].join('\n'),
    );
  }
  t.diagnostic(
    `${stats.checked} records checked in ${Date.now() - started} ms: ${stats.checked - stats.canonical} without a canonical form (refused by every encoder), ${stats.writer} through the audit writer`,
  );
  assert.equal(stats.checked, indices.length, 'every record was checked');
  if (!ONLY && COUNT >= 1000) {
    assert.ok(stats.checked - stats.canonical >= 1 && stats.canonical > stats.checked * 0.9, 'records with and without a canonical form');
    assert.ok(stats.writer > COUNT * 0.05, 'records through the writer');
  }
});

// ── Where the inputs end ──────────────────────────────────────────────────────────────────

/** A record the owner writes, checked as in the property; its id, row and parts. */
type OwnerValues = Partial<GenRecord> & { metadataText?: string };

async function ownerRecord(g: OwnerValues) {
  const id = nextId();
  const values = { actor_id: null, action: 'A', resource_type: 'B', resource_id: null, result: 'SUCCESS', ip: null, user_agent: null, request_id: 'r', ...g };
  await h.database.owner.query(
    `INSERT INTO audit_log (id, actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
     OVERRIDING SYSTEM VALUE VALUES ($1::bigint, $2::bigint, $3, $4, $5::bigint, $6, $7::jsonb, $8, $9, $10)`,
    [id, values.actor_id, values.action, values.resource_type, values.resource_id, values.result, values.metadataText ?? '{}', values.ip, values.user_agent, values.request_id],
  );
  const back = await readBack(h.database.db, [id]);
  return { id, row: back.rows.get(id)!, parts: back.parts.get(id)! };
}

const pgCode = (code: string) => (err: unknown) => {
  assert.equal((err as { code?: string }).code, code, (err as Error).message);
  return true;
};

test('U+0000: PostgreSQL text holds no NUL, so audit_log refuses it in every text column (22021) and in metadata, in a string or a key (22P05), from the owner and from the audit writer, and writes nothing', async () => {
  const count = async () => (await h.database.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_log'))[0]!.n;
  const before = await count();
  // The JS encoder would have written it (it is JSON's \u0000): the refusal is the database's.
  assert.equal(canonicalize({ s: 'a\u0000b' }), '{"s":"a\\u0000b"}');
  for (const column of ['ip', 'user_agent', 'request_id', 'action'] as const) {
    await assert.rejects(ownerRecord({ [column]: 'A\u0000B' }), pgCode('22021'), `${column} with NUL`);
  }
  for (const metadata of [{ s: 'a\u0000b' }, { 'k\u0000': 1 }, { deep: [{ x: ['\u0000'] }] }]) {
    await assert.rejects(ownerRecord({ metadataText: JSON.stringify(metadata) }), pgCode('22P05'), `metadata ${JSON.stringify(metadata)}`);
  }
  // A raw NUL in the JSON text itself: the text parameter cannot be sent at all.
  await assert.rejects(ownerRecord({ metadataText: '{"s":"a\u0000b"}' }), pgCode('22021'));
  const viaWriter = (metadata: Record<string, unknown>, userAgent: string | null) =>
    h.database.db.transaction(async (tx) => {
      writer.record(tx, { actor: undefined, ip: null, userAgent, requestId: 'nul' }, { action: 'CREATE_PROJECT', resourceType: 'PROJECT', resourceId: 1, metadata });
    });
  await assert.rejects(viaWriter({ name: 'a\u0000b' }, null), pgCode('22P05'), 'the writer: metadata');
  await assert.rejects(viaWriter({}, 'agent\u0000'), pgCode('22021'), 'the writer: user agent');
  await assert.rejects(viaWriter({ email: 'a\u0000@b' }, null), pgCode('22021'), 'the writer: a personal value (audit_personal_data.value is text)');
  assert.equal(await count(), before, 'nothing was written');
});

test('lone surrogates: a text column stores U+FFFD (the driver encodes the string as UTF-8) and the encoders agree on it; metadata refuses one (22P02), which JCS would refuse too', async () => {
  const { row, parts } = await ownerRecord({ ip: 'a\uD800b', user_agent: '\uDFFFx\uD83D', request_id: '\uD83D\uDE00\uDE00' });
  assert.deepEqual([row.ip, row.user_agent, row.request_id], ['a\uFFFDb', '\uFFFDx\uFFFD', '\uD83D\uDE00\uFFFD']);
  checkRecord({ via: 'owner', actor_id: null, action: 'A', resource_type: 'B', resource_id: null, timestamp: null, result: 'SUCCESS', metadata: obj([]), layout: 0, ip: 'a\uFFFDb', user_agent: '\uFFFDx\uFFFD', request_id: '\uD83D\uDE00\uFFFD' }, row.id, row, parts);
  // JSON.stringify writes a lone surrogate as \udxxx, which jsonb refuses; RFC 8785 refuses it too.
  assert.throws(() => canonicalize({ s: '\uD800' }), TypeError);
  await assert.rejects(ownerRecord({ metadataText: JSON.stringify({ s: 'x\uD800' }) }), pgCode('22P02'));
  await assert.rejects(ownerRecord({ metadataText: '{"s":"\\udc00"}' }), pgCode('22P02'));
  // Unescaped in the text, the driver has already replaced it.
  const raw = await ownerRecord({ metadataText: '{"s":"x\uD800"}' });
  assert.deepEqual(raw.row.metadata, { s: 'x\uFFFD' });
});

test("jsonb's numbers: metadata::text prints jsonb's numeric (1E+2 as 100, 1e21 in full, -0 as 0), which JSON.parse reads to the double the written text stands for, so every encoder writes RFC 8785's number", async () => {
  const written = ['1E+2', '1.0', '-0', '-0.0', '1e21', '1E-7', '5e-324', '1.7976931348623157e308', '0.30000000000000004', '9007199254740991', '-9007199254740991', '1e-400', '-1e-400', '18446744073709551617', '100.000', '1e+23'];
  const { row, parts } = await ownerRecord({ metadataText: `{"n":[${written.join(',')}]}` });
  const printed = /^\{"n": \[(.*)\]\}$/.exec(parts.metadata)![1]!.split(', ');
  assert.deepEqual(printed, [
    '100', '1.0', '0', '0.0', '1000000000000000000000', '0.0000001', `0.${'0'.repeat(323)}5`, `17976931348623157${'0'.repeat(292)}`, '0.30000000000000004',
    '9007199254740991', '-9007199254740991', `0.${'0'.repeat(399)}1`, `-0.${'0'.repeat(399)}1`, '18446744073709551617', '100.000', '100000000000000000000000',
  ]);
  const canonical = ['100', '1', '0', '0', '1e+21', '1e-7', '5e-324', '1.7976931348623157e+308', '0.30000000000000004', '9007199254740991', '-9007199254740991', '0', '0', '18446744073709552000', '100', '1e+23'];
  assert.equal(canonicalize(JSON.parse(parts.metadata)), `{"n":[${canonical.join(',')}]}`, 'canonical numbers of what jsonb prints');
  assert.equal(canonicalize(JSON.parse(`{"n":[${written.join(',')}]}`)), `{"n":[${canonical.join(',')}]}`, 'the same as of what was written');
  checkRecord({ via: 'owner', actor_id: null, action: 'A', resource_type: 'B', resource_id: null, timestamp: null, result: 'SUCCESS', metadata: obj([['n', arr(written.map(num))]]), layout: 0, ip: null, user_agent: null, request_id: 'r' }, row.id, row, parts);
});

test('numbers beyond a double: ±1e400 (jsonb keeps it, JSON.parse makes it ±Infinity) has no canonical form in any encoder, and sealingLeaf seals it as unverifiable; huge integers and underflows are rounded to the same double by every encoder, so texts jsonb tells apart share a canonical form', async () => {
  for (const raw of NON_FINITE) {
    const { id, row, parts } = await ownerRecord({ metadataText: `{"x":[1,${raw}]}` });
    assert.ok(!/Infinity|e/i.test(parts.metadata), `jsonb prints ${raw} as its full numeric: ${parts.metadata.slice(0, 40)}…`);
    assert.throws(() => rowLeaf(row), TypeError, `${raw}: rowLeaf refuses`);
    assert.throws(() => canonicalLeaf(parts.head, JSON.parse(parts.metadata), parts.tail), TypeError, `${raw}: canonicalLeaf (the verifier) refuses`);
    assert.throws(() => recordLeaf(JSON.parse(parts.sealed) as never), TypeError, `${raw}: recordLeaf of the export's sealed form refuses`);
    assert.deepEqual(sealingLeaf(row), { leaf: unverifiableLeaf(id), canonical: false });
  }
  // Texts that jsonb keeps apart and a double cannot: both encoders read them as the same double.
  const pairs = [['18446744073709551617', '18446744073709551616'], ['1e-400', '0'], ['0.1000000000000000000001', '0.1'], ['1.7976931348623158e308', '1.7976931348623157e308'], ['-1e-400', '-0']];
  for (const [a, b] of pairs) {
    const x = await ownerRecord({ metadataText: `{"v":${a}}` });
    const y = await ownerRecord({ metadataText: `{"v":${b}}` });
    assert.notEqual(x.parts.metadata, y.parts.metadata, `jsonb keeps ${a} and ${b} apart`);
    assert.equal(canonicalize(JSON.parse(x.parts.metadata)), canonicalize(JSON.parse(y.parts.metadata)), `${a} and ${b}: one canonical metadata`);
    for (const r of [x, y]) assert.equal(hex(canonicalLeaf(r.parts.head, JSON.parse(r.parts.metadata), r.parts.tail)), hex(rowLeaf(r.row)), `${a} / ${b}: the encoders agree`);
  }
});

test("the audit writer cuts a user agent at 512 UTF-16 units: a cut through a surrogate pair leaves a lone surrogate, stored as U+FFFD, and the encoders agree on the stored form", async () => {
  const g: GenRecord = { ...generate(0), via: 'writer', metadata: obj([]), layout: 0, user_agent: `${'u'.repeat(511)}\u{1F600}tail`, timestamp: null, action: 'CREATE_PROJECT', resource_type: 'PROJECT', result: 'SUCCESS' };
  const [id] = await insertWriter([g]);
  const back = await readBack(h.database.db, [id!]);
  const row = back.rows.get(id!)!;
  assert.equal(row.user_agent, `${'u'.repeat(511)}\uFFFD`);
  checkRecord(g, id!, row, back.parts.get(id!));
});

test('action, resource_type and result: the sealed form quotes them unescaped (sealed-form.ts word()), which holds because the CHECK constraints refuse, even to the owner, a trailing newline, non-ASCII capitals and lower case', async () => {
  for (const column of ['action', 'resource_type', 'result'] as const) {
    for (const value of ['A\n', 'A\r', '\nA', 'É', 'Ａ', 'ǅ', 'a', 'A-B', 'A B']) {
      await assert.rejects(ownerRecord({ [column]: value }), pgCode('23514'), `${column} = ${JSON.stringify(value)}`);
    }
  }
});

/**
 * A bigint column beyond ±(2^53 − 1). The drivers read bigint with Number() (db/postgres.ts,
 * db/pglite.ts), which rounds to the nearest double, so no JavaScript encoder can write its
 * digits; CANONICAL_HEAD/TAIL_SQL print the exact ones. So both sides refuse such a record: the
 * JS encoders throw (sealingLeaf seals it as unverifiable), and EXACT_SQL is false, which makes
 * the database verification name it, as for a number beyond a double in the metadata. The
 * service never writes such ids; an owner can.
 */
test('actor_id / resource_id beyond ±(2^53 − 1): every encoder refuses the record (the JS encoders throw, EXACT_SQL is false), none hashes a rounded id', async () => {
  const disagreements: string[] = [];
  for (const [i, value] of BEYOND_SAFE.entries()) {
    const column = i % 2 === 0 ? 'actor_id' : 'resource_id';
    const { row, parts } = await ownerRecord({ [column]: value });
    const jsRefuses = !sealingLeaf(row).canonical && throwsTypeError(() => rowLeaf(row)) && throwsTypeError(() => recordLeaf(sealedForm(row)));
    // The export's form: its record parsed (the id rounded on the way) is refused offline too.
    const offlineRefuses = throwsTypeError(() => recordLeaf(JSON.parse(parts.sealed) as ReturnType<typeof sealedForm>));
    if (!jsRefuses || parts.exact || !offlineRefuses) {
      disagreements.push(`${column} = ${value}: the service reads ${String(row[column])}; JS refuses: ${jsRefuses}, offline refuses: ${offlineRefuses}, EXACT_SQL: ${parts.exact}`);
    }
  }
  assert.deepEqual(disagreements, [], disagreements.join('\n'));
});

const throwsTypeError = (fn: () => unknown) => {
  try {
    fn();
    return false;
  } catch (err) {
    return err instanceof TypeError;
  }
};

/**
 * A text column that starts with U+FEFF. PGlite's protocol reader decodes every field with a
 * TextDecoder that drops a leading byte order mark, so there the service reads the value without
 * it, while the SQL encoders keep it. No encoder may then hash either form: the JS encoders refuse
 * a leading U+FEFF where they see one (PostgreSQL), and EXACT_SQL flags the row on both, so that
 * the verification names the record. The service's own records cannot carry one (HTTP header
 * values reach Node as latin1, never as U+FEFF); an owner's can.
 */
test('a text column that starts with U+FEFF: every encoder refuses the record (EXACT_SQL is false; the JS encoders throw where the driver hands them the BOM)', async () => {
  const values = { ip: '\uFEFF::1', user_agent: '\uFEFFMozilla/5.0', request_id: '\uFEFF' };
  const { id, row, parts } = await ownerRecord(values);
  const [held] = await h.database.owner.query<{ bytes: string }>(`SELECT encode(convert_to(user_agent, 'UTF8'), 'hex') AS bytes FROM audit_log WHERE id = $1`, [id]);
  assert.match(held!.bytes, /^efbbbf/, 'the database holds the BOM');
  assert.deepEqual(JSON.parse(parts.sealed).user_agent, values.user_agent, 'SEALED_FORM_JSON keeps it');
  assert.equal(parts.exact, false, 'EXACT_SQL flags the record, so that the verifier names it');
  const readExactly = [row.ip, row.user_agent, row.request_id].every((v, i) => v === Object.values(values)[i]);
  if (readExactly) {
    assert.equal(sealingLeaf(row).canonical, false, 'the sealer seals it as unverifiable');
    assert.ok(throwsTypeError(() => recordLeaf(JSON.parse(parts.sealed) as ReturnType<typeof sealedForm>)), 'and the offline verifier refuses its export line');
  } else {
    assert.equal(DB_KIND, 'pglite', 'only PGlite\'s reader drops a leading U+FEFF');
  }
});
