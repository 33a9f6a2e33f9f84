// The evidence tables (migrations/0004_audit_evidence.sql): the seal, the stored tree nodes,
// the checkpoints, the signing keys and the log's origin. Hashes travel into PostgreSQL as hex
// text (one form for both drivers) and come back as bytea.
import { COMMITTED } from '../../../db/commit-order.js';
import type { Queryable, Tx } from '../../../db/database.js';
import { query, send, statements } from '../../../db/statements.js';
import type { AuditRow } from '../audit.repository.js';
import type { Hash, NodeKey } from './merkle.js';
import { CANONICAL_HEAD_SQL, CANONICAL_METADATA_SQL, CANONICAL_TAIL_SQL } from './sealed-form.js';

const RECORD_COLUMNS = 'a.id, a.actor_id, a.action, a.resource_type, a.resource_id, a."timestamp", a.result, a.metadata, a.ip, a.user_agent, a.request_id';
const CHECKPOINT_COLUMNS = 'id, tree_size, root_hash, prev_checkpoint_hash, key_id, signature, note, created_at';

export interface SealCursor {
  seq: number;
  record_id: number;
  /** xid8 as text: beyond 2^53 in principle, so never a JS number. */
  record_xact_id: string;
}

export interface RecordToSeal extends AuditRow {
  xact_id: string;
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

// The sealer's reads are planned per call, not prepared: a prepared statement keeps the
// generic plan of its first run on its connection, and on tables whose statistics say "empty"
// (analyzed before the first record) that plan is a sequential scan, kept while the table
// grows to millions of rows. Preparing them once sealed a backlog at 1,950 records/s instead
// of 24,000 (test/prepared-statements.test.ts).
const S = statements('evidence', {
  cursor: 'SELECT seq, record_id, record_xact_id::text AS record_xact_id FROM audit_seal ORDER BY seq DESC LIMIT 1',
  // The next committed records in commit order, after the cursor (audit_log_commit_order_idx).
  toSeal: `SELECT ${RECORD_COLUMNS}, a.xact_id::text AS xact_id FROM audit_log a
   WHERE (a.xact_id, a.id) > ($1::xid8, $2::bigint) AND a.${COMMITTED}
   ORDER BY a.xact_id, a.id LIMIT $3`,
  // Committed records beyond the cursor that the batch could not take: behind a running
  // transaction. The first such record in index order, not EXISTS: under EXISTS a generic plan
  // expects a third of the table past any position and scans audit_log from its start for the
  // first match, which a caught-up sealer never finds (190 ms and the buffer cache churned on
  // every idle poll at a million records); ORDER BY … LIMIT 1 is one index descent.
  waiting: 'SELECT true AS waiting FROM audit_log WHERE (xact_id, id) > ($1::xid8, $2::bigint) ORDER BY xact_id, id LIMIT 1',
  insertSeals: `INSERT INTO audit_seal (seq, record_id, record_xact_id, leaf_hash)
   SELECT s, r, x, decode(h, 'hex') FROM unnest($1::bigint[], $2::bigint[], $3::xid8[], $4::text[]) AS t(s, r, x, h)`,
  insertNodes: `INSERT INTO audit_tree_nodes (level, idx, hash)
   SELECT l, i, decode(h, 'hex') FROM unnest($1::smallint[], $2::bigint[], $3::text[]) AS t(l, i, h)`,
  // Stored nodes by key: level 0 is a leaf (audit_seal), above it audit_tree_nodes.
  nodes: `SELECT k.level, k.idx, COALESCE(n.hash, s.leaf_hash) AS hash
   FROM unnest($1::smallint[], $2::bigint[]) AS k(level, idx)
   LEFT JOIN audit_tree_nodes n ON k.level > 0 AND n.level = k.level AND n.idx = k.idx
   LEFT JOIN audit_seal s ON k.level = 0 AND s.seq = k.idx`,
  sealOf: 'SELECT seq, leaf_hash FROM audit_seal WHERE record_id = $1',
  sealedSize: 'SELECT COALESCE(max(seq) + 1, 0) AS size FROM audit_seal',
  latestCheckpoint: `SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints ORDER BY id DESC LIMIT 1`,
  checkpointsAfter: `SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints WHERE id > $1 ORDER BY id LIMIT $2`,
  insertCheckpoint: `INSERT INTO audit_checkpoints (tree_size, root_hash, prev_checkpoint_hash, key_id, signature, note, created_at)
   VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), $4, decode($5, 'hex'), $6, $7)`,
  // The seal from seq $1 on, with its records (a LEFT JOIN: a deleted record shows as a gap).
  // Each record by its key, always: the lateral subquery is not flattened (OFFSET 0), so the
  // planner cannot turn a read of 20,000 records into a hash join over the whole audit_log
  // (280 ms a read once the seal had statistics) or a parallel plan (30 ms to start workers).
  sealedFrom: {
    text: `SELECT s.seq, s.record_id, s.leaf_hash, ${RECORD_COLUMNS}, a.id IS NOT NULL AS present
   FROM audit_seal s LEFT JOIN LATERAL (SELECT * FROM audit_log r WHERE r.id = s.record_id OFFSET 0) a ON true
   WHERE s.seq >= $1 ORDER BY s.seq LIMIT $2`,
    prepare: true,
  },
  // The same for the verifier, each record as its sealed form's canonical text in three parts
  // (sealed-form.ts; null when the record is gone).
  sealedCanonicalFrom: {
    text: `SELECT s.seq, s.record_id, s.leaf_hash, ${CANONICAL_HEAD_SQL} AS head, ${CANONICAL_METADATA_SQL} AS metadata, ${CANONICAL_TAIL_SQL} AS tail
   FROM audit_seal s LEFT JOIN LATERAL (SELECT * FROM audit_log r WHERE r.id = s.record_id OFFSET 0) a ON true
   WHERE s.seq >= $1 ORDER BY s.seq LIMIT $2`,
    prepare: true,
  },
  // Records in an id range that are at or behind the sealer's cursor in commit order and yet
  // have no seal: nobody but someone behind the service's back puts a record there.
  unsealedBehind: `SELECT a.id FROM audit_log a
   WHERE a.id >= $1 AND a.id < $2 AND (a.xact_id, a.id) <= ($3::xid8, $4::bigint)
     AND NOT EXISTS (SELECT 1 FROM audit_seal s WHERE s.record_id = a.id)
   ORDER BY a.id LIMIT 1`,
  maxRecordId: 'SELECT COALESCE(max(id), 0) AS id FROM audit_log',
  origin: 'SELECT origin FROM audit_log_origin',
  setOrigin: 'INSERT INTO audit_log_origin (origin) VALUES ($1) ON CONFLICT (singleton) DO NOTHING',
  registerKey: `INSERT INTO audit_signing_keys (key_id, public_key, note_verifier_key) VALUES ($1, $2, $3)
   ON CONFLICT DO NOTHING`,
  keyById: 'SELECT key_id, algorithm, public_key, note_verifier_key, created_at FROM audit_signing_keys WHERE key_id = $1',
  keys: 'SELECT key_id, algorithm, public_key, note_verifier_key, created_at FROM audit_signing_keys ORDER BY created_at, key_id',
});

export const sealCursor = async (q: Queryable) => (await query<SealCursor>(q, S.cursor))[0];

export const recordsToSeal = (tx: Tx, after: SealCursor | undefined, limit: number) =>
  query<RecordToSeal>(tx, S.toSeal, [after?.record_xact_id ?? '0', after?.record_id ?? 0, limit]);

export const recordsWaiting = async (tx: Tx, after: SealCursor | undefined) =>
  (await query<{ waiting: boolean }>(tx, S.waiting, [after?.record_xact_id ?? '0', after?.record_id ?? 0])).length > 0;

export function insertSeals(tx: Tx, seals: Array<{ seq: number; recordId: number; xactId: string; leaf: Hash }>): void {
  send(tx, S.insertSeals, [seals.map((s) => s.seq), seals.map((s) => s.recordId), seals.map((s) => s.xactId), seals.map((s) => s.leaf.toString('hex'))]);
}

export function insertNodes(tx: Tx, nodes: Array<{ key: NodeKey; hash: Hash }>): void {
  if (nodes.length === 0) return;
  send(tx, S.insertNodes, [nodes.map((n) => n.key.level), nodes.map((n) => n.key.index), nodes.map((n) => n.hash.toString('hex'))]);
}

/** The stored hashes of these nodes, keyed `level:index`; a missing one is absent from the map. */
export async function fetchNodes(q: Queryable, keys: NodeKey[]): Promise<Map<string, Hash>> {
  const unique = [...new Map(keys.map((k) => [`${k.level}:${k.index}`, k])).values()];
  if (unique.length === 0) return new Map();
  const rows = await query<{ level: number; idx: number; hash: Uint8Array | null }>(q, S.nodes, [unique.map((k) => k.level), unique.map((k) => k.index)]);
  const found = new Map<string, Hash>();
  for (const r of rows) if (r.hash) found.set(`${r.level}:${r.idx}`, Buffer.from(r.hash));
  return found;
}

export const sealOf = async (q: Queryable, recordId: number) => (await query<{ seq: number; leaf_hash: Uint8Array }>(q, S.sealOf, [recordId]))[0];
export const sealedSize = async (q: Queryable) => (await query<{ size: number }>(q, S.sealedSize))[0]!.size;
export const latestCheckpoint = async (q: Queryable) => (await query<CheckpointRow>(q, S.latestCheckpoint))[0];
export const checkpointsAfter = (q: Queryable, afterId: number, limit: number) => query<CheckpointRow>(q, S.checkpointsAfter, [afterId, limit]);

export function insertCheckpoint(
  tx: Tx,
  c: { treeSize: number; rootHash: Hash; prevHash: Hash | null; keyId: string; signature: Buffer; note: string; createdAt: string },
): void {
  send(tx, S.insertCheckpoint, [c.treeSize, c.rootHash.toString('hex'), c.prevHash?.toString('hex') ?? null, c.keyId, c.signature.toString('hex'), c.note, c.createdAt]);
}

/** A sealed record with its record's sealed form as canonical text in three parts (sealed-form.ts); all null where the record row is gone. */
export type SealedCanonicalRow = { seq: number; record_id: number; leaf_hash: Uint8Array } & (
  | { head: string; metadata: string; tail: string }
  | { head: null; metadata: null; tail: null }
);

/** The seal from seq `fromSeq` on, each record as its sealed form's canonical text in three parts. */
export const sealedCanonicalFrom = (q: Queryable, fromSeq: number, limit: number) => query<SealedCanonicalRow>(q, S.sealedCanonicalFrom, [fromSeq, limit]);

/** The seal from seq `fromSeq` on with its records' columns: `present` is false where the record row is gone. */
export const sealedRowsFrom = (q: Queryable, fromSeq: number, limit: number) => query<SealedRow>(q, S.sealedFrom, [fromSeq, limit]);

export const firstUnsealedBehind = async (q: Queryable, fromId: number, toId: number, cursor: SealCursor) =>
  (await query<{ id: number }>(q, S.unsealedBehind, [fromId, toId, cursor.record_xact_id, cursor.record_id]))[0]?.id;
export const maxRecordId = async (q: Queryable) => (await query<{ id: number }>(q, S.maxRecordId))[0]!.id;

export const storedOrigin = async (q: Queryable) => (await query<{ origin: string }>(q, S.origin))[0]?.origin;
export const setOrigin = (q: Queryable, origin: string) => query(q, S.setOrigin, [origin]);
export const registerKey = (q: Queryable, keyId: string, publicKeyPem: string, verifierKey: string) => query(q, S.registerKey, [keyId, publicKeyPem, verifierKey]);
export const keyById = async (q: Queryable, keyId: string) => (await query<SigningKeyRow>(q, S.keyById, [keyId]))[0];
export const signingKeys = (q: Queryable) => query<SigningKeyRow>(q, S.keys);
