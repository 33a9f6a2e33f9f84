// The canonical form of an audit record is computed three ways, and all three must give the
// same bytes (docs/audit-integrity.md §1; record.sealed-form.ts): in JavaScript by the sealer
// (rowLeaf, sealingLeaf; recordLeaf for a sealed form read from outside), in PostgreSQL for the
// database verification (CANONICAL_HEAD_SQL ‖ JCS(metadata) ‖ CANONICAL_TAIL_SQL), and in
// PostgreSQL as the export's JSON text (SEALED_FORM_JSON), which must parse to sealedForm(row).
// jcs.ts is the truth. A property test over generated records holds the SQL encoders to it:
// every control character, quotes and backslashes, Unicode of every kind, numbers at the edges
// and in every spelling jsonb accepts, nested metadata, personal-data markers, nulls, long user
// agents and timestamps at the edges, written as the owner (timestamps chosen, the stamp
// trigger skipped) or through the audit writer, and read back as the service reads them.
//
// The generator (helpers/record-generator.ts) is seeded: every run prints its seed, and a failure names the seed and the
// record, shrinks the record to a minimal one, and shows both. Environment:
//   CANONICAL_SEED=<uint32, decimal or 0x…>  the seed (default: a random one)
//   CANONICAL_COUNT=<n>                      records per run (default 2400)
//   CANONICAL_ONLY=<i>[,<j>…]                only these records of the seed (to reproduce one)
//   CANONICAL_INCLUDE_KNOWN=1                generate the refused cases too (see INCLUDE_KNOWN in helpers/record-generator.ts)
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
import { PERSONAL_KEYS, PERSONAL_MARKER, createAuditWriter, type AuditAction, type AuditResult, type ResourceType } from '../src/modules/audit/audit.writer.js';
import { canonicalize } from '../src/tlog/jcs.js';
import { leafHash } from '../src/tlog/merkle.js';
import {
  CANONICAL_HEAD_SQL, CANONICAL_METADATA_SQL, CANONICAL_TAIL_SQL, EXACT_SQL, SEALED_FIELDS, SEALED_FORM_JSON, canonicalLeaf, recordLeaf, rowLeaf, sealedForm, sealingLeaf,
} from '../src/modules/audit/evidence/record.sealed-form.js';
import { useTestDatabase } from './helpers/harness.js';
import {
  BEYOND_SAFE, ISO_MS, NON_FINITE, admissible, asNumber, describeRecord, generateRecord, jsonText, parseNoNegativeZero, shrinkRecord, wellFormed,
  jsonArray as arr, jsonNumber as num, jsonObject as obj, type GenRecord,
} from './helpers/record-generator.js';
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
/** The leaf sealingLeaf gives a record without a canonical form (record.sealed-form.ts). */
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
    const batch = indices.slice(start, start + BATCH).map((index) => ({ index, record: generateRecord(SEED, index) }));
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
        describeRecord(minimal.record),
        `its failure: ${minimal.error.message}`,
        '',
        'the record as generated:',
        describeRecord(failure.record),
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
  const g: GenRecord = { ...generateRecord(SEED, 0), via: 'writer', metadata: obj([]), layout: 0, user_agent: `${'u'.repeat(511)}\u{1F600}tail`, timestamp: null, action: 'CREATE_PROJECT', resource_type: 'PROJECT', result: 'SUCCESS' };
  const [id] = await insertWriter([g]);
  const back = await readBack(h.database.db, [id!]);
  const row = back.rows.get(id!)!;
  assert.equal(row.user_agent, `${'u'.repeat(511)}\uFFFD`);
  checkRecord(g, id!, row, back.parts.get(id!));
});

test('action, resource_type and result: the sealed form quotes them unescaped (record.sealed-form.ts word()), which holds because the CHECK constraints refuse, even to the owner, a trailing newline, non-ASCII capitals and lower case', async () => {
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
