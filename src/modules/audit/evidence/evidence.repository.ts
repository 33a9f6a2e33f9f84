// The evidence tables (migrations/0004_audit_evidence.sql, 0008_snapshot_batches.sql): the seal
// (one row per batch: its seqs, record ids and leaves), the tree as tlog-tiles, the checkpoints,
// the signing keys and the log's origin. Tile hashes travel into PostgreSQL as hex text (one
// form for both drivers) and come back as bytea.
import { committedReader, type LowerBound, type PositionColumns, type SnapshotText } from '../../../db/commit-order.js';
import type { Queryable, Tx } from '../../../db/database.js';
import { query, send, statements } from '../../../db/statements.js';
import type { AuditRow } from '../audit.repository.js';
import type { Hash } from '../../../tlog/merkle.js';
import { CANONICAL_HEAD_SQL, CANONICAL_METADATA_SQL, CANONICAL_TAIL_SQL, EXACT_SQL } from './record.sealed-form.js';

const RECORD_COLUMNS = 'a.id, a.actor_id, a.action, a.resource_type, a.resource_id, a."timestamp", a.result, a.metadata, a.ip, a.user_agent, a.request_id';
const CHECKPOINT_COLUMNS = 'id, tree_size, root_hash, prev_checkpoint_hash, key_id, signature, note, created_at';
const POSITION_COLUMNS = 'after_snapshot::text, after_xact::text, after_id, snapshot::text, through_id';

export interface SealBatchRow extends PositionColumns {
  first_seq: number;
  next_seq: number;
  sealed_at: string;
}

export interface CheckpointRow {
  id: number;
  tree_size: number;
  root_hash: Uint8Array;
  prev_checkpoint_hash: Uint8Array | null;
  key_id: string;
  signature: Uint8Array;
  note: string;
  created_at: string;
}

export interface SigningKeyRow {
  key_id: string;
  algorithm: 'Ed25519';
  public_key: string;
  note_verifier_key: string;
  created_at: string;
}

/** A sealed record joined to its record's columns (all null, and `present` false, when the record row is gone). */
export interface SealedRow extends AuditRow {
  seq: number;
  record_id: number;
  leaf_hash: Uint8Array;
  present: boolean;
}

/** A stored tile: `width` hashes of tree level 8·level from node idx·256. */
export interface TileRow {
  level: number;
  idx: number;
  width: number;
  hashes: Uint8Array;
}

/**
 * The seal from seq $1 on, record by record, with `extra` columns of the record `a` (a LEFT JOIN:
 * a deleted record shows as a gap). A batch's arrays are unnested once per batch (leaves are
 * bytea[]: a single bytea would be read again for every record). Each record by its key, always:
 * the lateral subquery is not flattened (OFFSET 0), so the planner cannot turn a read of 20,000
 * records into a hash join over the whole audit_log or a parallel plan.
 */
const sealedFrom = (extra: string) => `SELECT b.first_seq + u.ord - 1 AS seq, u.id AS record_id, u.leaf AS leaf_hash, ${extra}
   FROM audit_seal_batches b
   CROSS JOIN LATERAL unnest(b.record_ids, b.leaves) WITH ORDINALITY AS u(id, leaf, ord)
   LEFT JOIN LATERAL (SELECT * FROM audit_log r WHERE r.id = u.id OFFSET 0) a ON true
   WHERE b.first_seq >= (SELECT COALESCE(max(first_seq), 0) FROM audit_seal_batches WHERE first_seq <= $1)
     AND b.first_seq + u.ord - 1 >= $1
   ORDER BY b.first_seq, u.ord LIMIT $2`;

// The sealer's reads are planned per call, not prepared: a prepared statement keeps the
// generic plan of its first run on its connection, and on tables whose statistics say "empty"
// (analyzed before the first record) that plan is a sequential scan, kept while the table
// grows to millions of rows (test/prepared-statements.test.ts).
const S = statements('evidence', {
  lastBatch: `SELECT first_seq, next_seq, sealed_at, ${POSITION_COLUMNS} FROM audit_seal_batches ORDER BY first_seq DESC LIMIT 1`,
  insertBatch: `INSERT INTO audit_seal_batches (first_seq, record_ids, leaves, record_span, after_snapshot, after_xact, after_id, snapshot, through_id)
   SELECT $1, $2::bigint[], ARRAY(SELECT decode(h, 'hex') FROM unnest($3::text[]) WITH ORDINALITY AS l(h, n) ORDER BY n),
          int8range($4, $5, '[]'), $6::pg_snapshot, $7::xid8, $8, $9::pg_snapshot, $10`,
  insertTiles: `INSERT INTO audit_tiles (level, idx, width, hashes)
   SELECT l, i, w, decode(h, 'hex') FROM unnest($1::smallint[], $2::bigint[], $3::smallint[], $4::text[]) AS t(l, i, w, h)`,
  // Each asked tile (level, idx) at the narrowest stored width of at least the one asked: one
  // descent of the primary key each, whatever the table's size.
  tiles: `SELECT k.level, k.idx, t.width, t.hashes
   FROM unnest($1::smallint[], $2::bigint[], $3::smallint[]) AS k(level, idx, width)
   CROSS JOIN LATERAL (SELECT width, hashes FROM audit_tiles t WHERE t.level = k.level AND t.idx = k.idx AND t.width >= k.width ORDER BY t.width LIMIT 1) t`,
  // Full tiles of one level in index order, from $2 (the verifier compares them with its own).
  fullTilesFrom: `SELECT level, idx, width, hashes FROM audit_tiles WHERE level = $1 AND width = 256 AND idx >= $2 ORDER BY idx LIMIT $3`,
  // Stored partial tiles of one level (the verifier checks each is a prefix of its tile).
  partialTiles: `SELECT level, idx, width, hashes FROM audit_tiles WHERE level = $1 AND width < 256 ORDER BY idx, width`,
  // Leaves of seqs [$1, $2), from the batches that hold them (level 0 beyond its full tiles).
  leaves: `SELECT b.first_seq + u.ord - 1 AS seq, u.leaf
   FROM audit_seal_batches b CROSS JOIN LATERAL unnest(b.leaves) WITH ORDINALITY AS u(leaf, ord)
   WHERE b.first_seq >= (SELECT COALESCE(max(first_seq), 0) FROM audit_seal_batches WHERE first_seq <= $1) AND b.first_seq < $2
     AND b.first_seq + u.ord - 1 >= $1 AND b.first_seq + u.ord - 1 < $2
   ORDER BY b.first_seq, u.ord`,
  sealOf: `SELECT b.first_seq + u.ord - 1 AS seq, u.leaf AS leaf_hash
   FROM audit_seal_batches b CROSS JOIN LATERAL unnest(b.record_ids, b.leaves) WITH ORDINALITY AS u(id, leaf, ord)
   WHERE b.record_span @> $1::bigint AND u.id = $1
   ORDER BY b.first_seq LIMIT 1`,
  latestCheckpoint: `SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints ORDER BY id DESC LIMIT 1`,
  newestTwoCheckpoints: `SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints ORDER BY id DESC LIMIT 2`,
  checkpointsAfter: `SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints WHERE id > $1 ORDER BY id LIMIT $2`,
  insertCheckpoint: `INSERT INTO audit_checkpoints (tree_size, root_hash, prev_checkpoint_hash, key_id, signature, note, created_at)
   VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), $4, decode($5, 'hex'), $6, $7)`,
  sealedFrom: { text: sealedFrom(`${RECORD_COLUMNS}, a.id IS NOT NULL AS present`), prepare: true },
  // The same for the verifier, each record as its sealed form's canonical text in three parts
  // (record.sealed-form.ts; null when the record is gone).
  sealedCanonicalFrom: { text: sealedFrom(`${CANONICAL_HEAD_SQL} AS head, ${CANONICAL_METADATA_SQL} AS metadata, ${CANONICAL_TAIL_SQL} AS tail, ${EXACT_SQL} AS exact`), prepare: true },
  // The first record of an id range that the sealer has taken, by its position, and that the
  // seal does not hold. Taken: visible in its last snapshot ($3; for the previous release's seal,
  // up to the point ($4, $5) in (xact_id, id) order), less, while a pair is unfinished, the pair's
  // rows past its last id ($9): those not below the pair's lower bound ($6, or the point ($7,
  // $8)). The seal's ids of the range come as a bitmap ($10: bit i, least significant first, is
  // id $1 + i), so that a range costs one row back instead of an object per record.
  firstUnsealedTaken: `SELECT a.id FROM audit_log a
   WHERE a.id >= $1 AND a.id < $2
     AND CASE WHEN $3::pg_snapshot IS NOT NULL THEN pg_visible_in_snapshot(a.xact_id, $3::pg_snapshot)
              ELSE (a.xact_id < $4::xid8 OR (a.xact_id = $4::xid8 AND a.id <= $5::bigint)) END
     AND NOT ($9::bigint IS NOT NULL AND a.id > $9::bigint
              AND NOT CASE WHEN $6::pg_snapshot IS NOT NULL THEN pg_visible_in_snapshot(a.xact_id, $6::pg_snapshot)
                           ELSE (a.xact_id < $7::xid8 OR (a.xact_id = $7::xid8 AND a.id <= $8::bigint)) END)
     AND get_bit($10::bytea, (a.id - $1)::int) = 0
   ORDER BY a.id LIMIT 1`,
  // Stored partial tiles of (level, idx) that are not a prefix of the tile $3 (recomputed).
  badPartialTile: `SELECT width FROM audit_tiles
   WHERE level = $1 AND idx = $2 AND width < 256 AND (width * 32 > octet_length($3::bytea) OR hashes <> substring($3::bytea FROM 1 FOR width * 32))
   ORDER BY width LIMIT 1`,
  // A stored tile of the level beyond the tile (idx, width) at the tree's edge: none should exist.
  tileBeyond: `SELECT level, idx, width FROM audit_tiles WHERE level = $1 AND (idx > $2 OR (idx = $2 AND width > $3)) ORDER BY idx, width LIMIT 1`,
  // Whether the partial tile at the tree's edge is stored at its exact width (the sealer stores every width a partial tile reaches).
  edgeTileStored: 'SELECT EXISTS (SELECT 1 FROM audit_tiles WHERE level = $1 AND idx = $2 AND width = $3) AS stored',
  // The first record whose transaction position is one no transaction has reached yet: moved forward behind the service's back.
  // The snapshot's xmax, not pg_current_xact_id(): a verification takes no transaction id (it also runs read-only).
  // The records of the reading transaction itself stand at its own id, which may lie past the
  // xmax of a snapshot taken before it had one: they are not from the future.
  recordFromTheFuture: `SELECT a.id, a.xact_id::text AS xact_id, pg_snapshot_xmax(pg_current_snapshot())::text AS next_xact_id
   FROM audit_log a WHERE a.xact_id >= pg_snapshot_xmax(pg_current_snapshot()) AND a.xact_id IS DISTINCT FROM pg_current_xact_id_if_assigned()
   ORDER BY a.id LIMIT 1`,
  maxRecordId: 'SELECT COALESCE(max(id), 0) AS id FROM audit_log',
  origin: 'SELECT origin FROM audit_log_origin',
  setOrigin: 'INSERT INTO audit_log_origin (origin) VALUES ($1) ON CONFLICT (singleton) DO NOTHING',
  registerKey: `INSERT INTO audit_signing_keys (key_id, public_key, note_verifier_key) VALUES ($1, $2, $3)
   ON CONFLICT DO NOTHING`,
  keyById: 'SELECT key_id, algorithm, public_key, note_verifier_key, created_at FROM audit_signing_keys WHERE key_id = $1',
  keys: 'SELECT key_id, algorithm, public_key, note_verifier_key, created_at FROM audit_signing_keys ORDER BY created_at, key_id',
});

/** A committed record as the sealer reads it (db/commit-order.ts), with its timestamp for the stall check. */
export type CommittedRecord = AuditRow;

/** The sealer's reader: committed audit records in commit order. */
export const committedRecords = committedReader<CommittedRecord>('audit-reader', 'audit_log', RECORD_COLUMNS.replace('a.id, ', '').replaceAll('a.', 't.'));

export const lastSealBatch = async (q: Queryable) => (await query<SealBatchRow>(q, S.lastBatch))[0];
export const sealedSize = async (q: Queryable) => (await lastSealBatch(q))?.next_seq ?? 0;

export function insertSealBatch(tx: Tx, firstSeq: number, recordIds: number[], leaves: Hash[], position: PositionColumns): void {
  const span = recordIds.reduce((m, id) => ({ min: Math.min(m.min, id), max: Math.max(m.max, id) }), { min: Infinity, max: -Infinity });
  send(tx, S.insertBatch, [
    firstSeq, recordIds, leaves.map((l) => l.toString('hex')), span.min, span.max,
    position.after_snapshot, position.after_xact, position.after_id, position.snapshot, position.through_id,
  ]);
}

export function insertTiles(tx: Tx, tiles: Array<{ level: number; index: number; hashes: Buffer }>): void {
  if (tiles.length === 0) return;
  send(tx, S.insertTiles, [tiles.map((t) => t.level), tiles.map((t) => t.index), tiles.map((t) => t.hashes.length / 32), tiles.map((t) => t.hashes.toString('hex'))]);
}

/** Stored tiles at the narrowest width of at least the one asked, keyed `level/idx`; level-0 partial tiles are not stored (see leavesBetween). */
export async function storedTiles(q: Queryable, wanted: Array<{ level: number; index: number; width: number }>): Promise<Map<string, TileRow>> {
  if (wanted.length === 0) return new Map();
  const rows = await query<TileRow>(q, S.tiles, [wanted.map((w) => w.level), wanted.map((w) => w.index), wanted.map((w) => w.width)]);
  return new Map(rows.map((r) => [`${r.level}/${r.idx}`, r]));
}

export const fullTilesFrom = (q: Queryable, level: number, fromIndex: number, limit: number) => query<TileRow>(q, S.fullTilesFrom, [level, fromIndex, limit]);
export const partialTiles = (q: Queryable, level: number) => query<TileRow>(q, S.partialTiles, [level]);

/** The leaves of seqs [from, to), in order, from the seal's batches. */
export const leavesBetween = async (q: Queryable, from: number, to: number) =>
  (await query<{ seq: number; leaf: Uint8Array }>(q, S.leaves, [from, to]));

export const sealOf = async (q: Queryable, recordId: number) => (await query<{ seq: number; leaf_hash: Uint8Array }>(q, S.sealOf, [recordId]))[0];
export const latestCheckpoint = async (q: Queryable) => (await query<CheckpointRow>(q, S.latestCheckpoint))[0];
/** The newest checkpoint and the one before it, newest first (fewer when there are fewer). */
export const newestTwoCheckpoints = (q: Queryable) => query<CheckpointRow>(q, S.newestTwoCheckpoints);
export const checkpointsAfter = (q: Queryable, afterId: number, limit: number) => query<CheckpointRow>(q, S.checkpointsAfter, [afterId, limit]);

export function insertCheckpoint(
  tx: Tx,
  c: { treeSize: number; rootHash: Hash; prevHash: Hash | null; keyId: string; signature: Buffer; note: string; createdAt: string },
): void {
  send(tx, S.insertCheckpoint, [c.treeSize, c.rootHash.toString('hex'), c.prevHash?.toString('hex') ?? null, c.keyId, c.signature.toString('hex'), c.note, c.createdAt]);
}

/** A sealed record with its record's sealed form as canonical text in three parts (record.sealed-form.ts); all null where the record row is gone. */
export type SealedCanonicalRow = { seq: number; record_id: number; leaf_hash: Uint8Array } & (
  | { head: string; metadata: string; tail: string; exact: boolean }
  | { head: null; metadata: null; tail: null; exact: null }
);

/** The seal from seq `fromSeq` on, each record as its sealed form's canonical text in three parts. */
export const sealedCanonicalFrom = (q: Queryable, fromSeq: number, limit: number) => query<SealedCanonicalRow>(q, S.sealedCanonicalFrom, [fromSeq, limit]);

/** The seal from seq `fromSeq` on with its records' columns: `present` is false where the record row is gone. */
export const sealedRowsFrom = (q: Queryable, fromSeq: number, limit: number) => query<SealedRow>(q, S.sealedFrom, [fromSeq, limit]);

/** What the sealer has taken, as firstUnsealedTaken reads it: up to `upper`, less the rest of an unfinished pair. */
export interface Consumed {
  upper: LowerBound;
  unfinished: { lower: LowerBound; afterId: number } | null;
}

/** A bound as three parameters: the snapshot, or the point's xact_id and id. */
function boundParams(b: LowerBound | undefined): [SnapshotText | null, string | null, number | null] {
  if (!b) return [null, null, null];
  return 'snapshot' in b ? [b.snapshot, null, null] : [null, b.xact, b.id];
}

/**
 * The first record in [fromId, fromId + 8·sealed.length) that the sealer's position says it has
 * taken and whose bit in `sealed` (that range's seal, least significant bit first) is not set.
 */
export const firstUnsealedTaken = async (q: Queryable, fromId: number, sealed: Uint8Array, c: Consumed) =>
  (await query<{ id: number }>(q, S.firstUnsealedTaken, [
    fromId, fromId + sealed.length * 8, ...boundParams(c.upper), ...boundParams(c.unfinished?.lower), c.unfinished?.afterId ?? null, Buffer.from(sealed.buffer, sealed.byteOffset, sealed.length),
  ]))[0]?.id;

/** The narrowest stored partial tile of (level, index) that is not a prefix of `tile`, if any. */
export const badPartialTile = async (q: Queryable, level: number, index: number, tile: Buffer) =>
  (await query<{ width: number }>(q, S.badPartialTile, [level, index, tile]))[0]?.width;

/** A stored tile of `level` beyond (index, width), the tree's edge at that level, if any. */
export const tileBeyond = async (q: Queryable, level: number, index: number, width: number) =>
  (await query<{ level: number; idx: number; width: number }>(q, S.tileBeyond, [level, index, width]))[0];
/** Whether the tile (level, index) is stored at exactly `width`. */
export const edgeTileStored = async (q: Queryable, level: number, index: number, width: number) =>
  (await query<{ stored: boolean }>(q, S.edgeTileStored, [level, index, width]))[0]!.stored;

/** The first record whose xact_id no transaction has reached yet, with that id and the next one to be given. */
export const recordFromTheFuture = async (q: Queryable) => (await query<{ id: number; xact_id: string; next_xact_id: string }>(q, S.recordFromTheFuture))[0];
export const maxRecordId = async (q: Queryable) => (await query<{ id: number }>(q, S.maxRecordId))[0]!.id;

export const storedOrigin = async (q: Queryable) => (await query<{ origin: string }>(q, S.origin))[0]?.origin;
export const setOrigin = (q: Queryable, origin: string) => query(q, S.setOrigin, [origin]);
export const registerKey = (q: Queryable, keyId: string, publicKeyPem: string, verifierKey: string) => query(q, S.registerKey, [keyId, publicKeyPem, verifierKey]);
export const keyById = async (q: Queryable, keyId: string) => (await query<SigningKeyRow>(q, S.keyById, [keyId]))[0];
export const signingKeys = (q: Queryable) => query<SigningKeyRow>(q, S.keys);
