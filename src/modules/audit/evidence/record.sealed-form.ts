// What a leaf commits to (docs/audit-integrity.md §1): the record in its API shape, with each
// personal value as the {"$personal": ref} the row stores, canonicalized by RFC 8785.
import type { AuditRow } from '../audit.repository.js';
import { canonicalize, canonicalKeyOrder, fieldsCanonicalizer } from '../../../tlog/jcs.js';
import { leafHash, type Hash } from '../../../tlog/merkle.js';

/** The sealed form's fields, in the API's order (export.stream.ts builds the same form in SQL). */
export const SEALED_FIELDS = ['id', 'actor_id', 'action', 'resource_type', 'resource_id', 'timestamp', 'result', 'metadata', 'ip', 'user_agent', 'request_id'] as const;

export type SealedField = (typeof SEALED_FIELDS)[number];

export type SealedRecord = Pick<AuditRow, SealedField>;

/** The sealed form of a stored row: exactly the API's fields (a row may carry more columns). */
export function sealedForm(row: AuditRow): SealedRecord {
  return {
    id: row.id,
    actor_id: row.actor_id,
    action: row.action,
    resource_type: row.resource_type,
    resource_id: row.resource_id,
    timestamp: row.timestamp,
    result: row.result,
    metadata: row.metadata,
    ip: row.ip,
    user_agent: row.user_agent,
    request_id: row.request_id,
  };
}

/**
 * Values that do not reach JavaScript exactly as stored, which only someone writing behind the
 * service's back can store: an id beyond 2^53 − 1 (both drivers read bigint with Number(), the
 * nearest double), and a text that starts with U+FEFF (PGlite's reader drops a leading byte
 * order mark). No encoder here can write them as stored, so a sealed form holding one has no
 * canonical form, as the SQL side agrees (EXACT_SQL).
 */
function checkExact(record: SealedRecord): void {
  for (const key of ['id', 'actor_id', 'resource_id'] as const) {
    const v = record[key];
    if (v !== null && !Number.isSafeInteger(v)) throw new TypeError(`canonicalize: ${key} ${String(v)} is beyond 2^53 - 1`);
  }
  for (const key of ['ip', 'user_agent', 'request_id'] as const) {
    if (record[key]?.charCodeAt(0) === 0xfeff) throw new TypeError(`canonicalize: ${key} starts with U+FEFF`);
  }
}

/** SHA-256(0x00 ‖ JCS(record)) of a sealed form as it stands, every key it has included: for sealed forms read from outside (an export), where an extra key must change the leaf. */
export function recordLeaf(record: SealedRecord): Hash {
  checkExact(record);
  return leafHash(canonicalize(record));
}

const canonicalFields = fieldsCanonicalizer(SEALED_FIELDS);
const canonicalSealedForm = (row: SealedRecord): string => {
  checkExact(row);
  return canonicalFields(row);
};

/** recordLeaf(sealedForm(row)) without the copy: the sealer and the verifier run it on every row they read. */
export const rowLeaf = (row: SealedRecord): Hash => leafHash(canonicalSealedForm(row));

/**
 * What a row's leaf hashes, its tlog-tiles entry: the canonical sealed form (UTF-8), or, for a row
 * that has no canonical form (a number beyond a double in its metadata: jsonb takes 1e400, and
 * only someone writing behind the service's back puts one there), bytes that no canonical form
 * has, so that sealing goes on past it and every verification names the record (its recomputed
 * leaf cannot match): 0xFF and the record's id. Canonical JSON is UTF-8, in which the byte 0xFF
 * never occurs.
 */
export function sealedEntry(row: SealedRecord): { entry: Buffer; canonical: boolean } {
  try {
    return { entry: Buffer.from(canonicalSealedForm(row), 'utf8'), canonical: true };
  } catch {
    return { entry: unverifiableEntry(row.id), canonical: false };
  }
}

const unverifiableEntry = (id: number) => Buffer.concat([Buffer.from([0xff]), Buffer.from(`no canonical form: record ${id}`)]);

/** The leaf the sealer gives a row: rowLeaf, or, for a row with no canonical form, the leaf of sealedEntry's marker. */
export function sealingLeaf(row: SealedRecord): { leaf: Hash; canonical: boolean } {
  try {
    return { leaf: rowLeaf(row), canonical: true };
  } catch {
    return { leaf: leafHash(unverifiableEntry(row.id)), canonical: false };
  }
}

/** A JSON string of a column that the table's CHECK constraint holds to ^[A-Z][A-Z_]*$ (or to a list of such words): nothing in it to escape. */
const word = (column: string) => `'"' || ${column} || '"'`;

/**
 * SQL for the sealed form of the audit_log row `a` as JSON text, built by PostgreSQL (on the
 * database's core, which had time to spare): the export ships it as it is, where node-postgres
 * parsed fifteen columns a row and the export wrote them back out with JSON.stringify.
 * Compact, keys in the API's order, so that a grep of an export for
 * `"action":"LOGIN_FAILURE"` finds its lines; only the metadata is as jsonb prints it
 * (`{"key": "value"}`). Its values are the row's as the service reads them (the timestamp in
 * timestamps.ts's form: UTC, milliseconds truncated, which to_char's MS does), so it parses to
 * sealedForm(row); test/audit-export.test.ts holds the two together on odd values. For a row
 * that exists (concat() writes a NULL as nothing).
 */
const JSON_VALUES: Record<SealedField, string> = {
  id: 'a.id::text',
  actor_id: "COALESCE(a.actor_id::text, 'null')",
  // Quoted, not to_json: to_json works out how to print its argument's type on every call
  // (catalog lookups, in perf's profile of an export). A value that breaks the constraint (only
  // someone who dropped it could write one) comes out unescaped, and the record fails
  // verification, as a record written behind the service's back should.
  action: word('a.action'),
  resource_type: word('a.resource_type'),
  resource_id: "COALESCE(a.resource_id::text, 'null')",
  // timestamps.ts's form for the years it gives it to (1 to 9999), quotes included (\" is a
  // literal quote in to_char's format); any other (BC, a fifth digit, infinity: none the service
  // writes) as PostgreSQL prints it, as isoTimestamp passes it on. Not to_char alone: it writes
  // 44 BC as 0044, so a record moved to BC would verify unchanged.
  timestamp: `CASE WHEN a."timestamp" >= '0001-01-01 00:00:00+00' AND a."timestamp" < '10000-01-01 00:00:00+00'
    THEN to_char(a."timestamp" AT TIME ZONE 'UTC', '\\"YYYY-MM-DD"T"HH24:MI:SS.MS"Z\\"') ELSE to_json(a."timestamp"::text)::text END`,
  result: word('a.result'),
  metadata: 'a.metadata::text',
  ip: "COALESCE(to_json(a.ip)::text, 'null')",
  user_agent: "COALESCE(to_json(a.user_agent)::text, 'null')",
  request_id: 'to_json(a.request_id)::text',
};
/** One concat() of the pieces: a chain of || made a new text of the record so far at every step. */
export const SEALED_FORM_JSON = `concat(${SEALED_FIELDS.map((key, i) => `'${i === 0 ? '{' : ','}"${key}":', ${JSON_VALUES[key]}`).join(', ')}, '}')`;

/**
 * The sealed form of `a` in its RFC 8785 form, built by PostgreSQL for the database
 * verification, in three parts: the canonical text up to the metadata's value
 * (`{"action":…,"ip":…,"metadata":`), the metadata as jsonb prints it, and the canonical text
 * after it (`,"request_id":…}`). The verifier canonicalizes only the metadata (jsonb's key order,
 * spacing and numbers are not RFC 8785's) and hashes the three together: parsing and
 * canonicalizing the whole record was half of its work. Every other value already is its
 * canonical text: integers in decimal, strings as to_json writes them, which escapes exactly
 * what JSON.stringify (and so RFC 8785) escapes (quote, backslash, and below U+0020 \b \f \n
 * \r \t or \u00xx; a PostgreSQL string holds no lone surrogate), the timestamp as above.
 * The sealer computes its leaves from the values in JavaScript instead, so each verification
 * also holds the two computations to each other; test/audit-export.test.ts does so on odd
 * values. Null when the row is gone.
 */
const CANONICAL_ORDER = canonicalKeyOrder(SEALED_FIELDS);
const METADATA_AT = CANONICAL_ORDER.indexOf('metadata');
const canonicalSql = (keys: SealedField[], opening: string) => keys.map((key, i) => `'${i === 0 ? opening : ','}"${key}":' || ${JSON_VALUES[key]}`).join(' || ');
export const CANONICAL_HEAD_SQL = `${canonicalSql(CANONICAL_ORDER.slice(0, METADATA_AT), '{')} || ',"metadata":'`;
export const CANONICAL_METADATA_SQL = 'a.metadata::text';
export const CANONICAL_TAIL_SQL = `${canonicalSql(CANONICAL_ORDER.slice(METADATA_AT + 1), ',')} || '}'`;

/**
 * SQL: whether the row's values reach the service exactly as stored. Not so for an id beyond
 * 2^53 − 1 (read as the nearest double), nor, on PGlite, for a text that starts with U+FEFF
 * (its protocol reader decodes with a TextDecoder that drops a leading byte order mark). The
 * service writes neither; a row that holds one has no canonical form the sealer and the
 * verifier can agree on, and verification names it.
 */
const SAFE = 9007199254740991;
export const EXACT_SQL = `(COALESCE(a.id <= ${SAFE}, true) AND COALESCE(a.actor_id BETWEEN -${SAFE} AND ${SAFE}, true)
    AND COALESCE(a.resource_id BETWEEN -${SAFE} AND ${SAFE}, true)
    AND NOT COALESCE(left(a.ip, 1) = chr(65279) OR left(a.user_agent, 1) = chr(65279) OR left(a.request_id, 1) = chr(65279), false))`;

/** The leaf of a sealed form read as those three parts, the metadata parsed; throws where the metadata has no canonical form. */
export const canonicalLeaf = (head: string, metadata: unknown, tail: string): Hash => leafHash(head + canonicalize(metadata) + tail);
