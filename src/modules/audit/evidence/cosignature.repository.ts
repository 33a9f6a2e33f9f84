// Witnesses' cosignatures of the log's checkpoints (append-only), each witness's state as the
// submitter saw it, and the submitter's lease (migrations/0017_audit_cosignatures.sql). Lease
// checks use the database's clock, never an instance's own, as the webhook's do.
import type { Queryable, Tx } from '../../../db/database.js';
import { query, statements } from '../../../db/statements.js';
import type { CheckpointRow } from './evidence.repository.js';

const CHECKPOINT_COLUMNS = 'c.id, c.tree_size, c.root_hash, c.prev_checkpoint_hash, c.key_id, c.signature, c.note, c.created_at';
const STATE_COLUMNS = 'vkey, witness, known_size, last_cosigned_size, last_cosigned_at, last_attempt_at, last_error, last_error_at';

/** Taking the lease: one instance at a time, the others skip instead of queueing. */
const WITNESS_LOCK = 7_245_040;

export interface CosignatureRow {
  checkpoint_id: number;
  witness: string;
  key_id: string;
  cosigned_at: number;
  line: string;
}

/** A checkpoint with the cosignature lines kept for it (none when none were). */
export interface CosignedCheckpointRow extends CheckpointRow {
  lines: string[];
}

export interface WitnessStateRow {
  vkey: string;
  witness: string;
  known_size: number;
  last_cosigned_size: number | null;
  last_cosigned_at: string | null;
  last_attempt_at: string | null;
  last_error: string | null;
  last_error_at: string | null;
}

const S = statements('cosignature', {
  insert: `INSERT INTO audit_cosignatures (checkpoint_id, tree_size, witness, key_id, cosigned_at, line)
   VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
  // One checkpoint's lines, in the order they arrived (the log's own signature line comes first in a note).
  linesOf: `SELECT checkpoint_id, witness, key_id, cosigned_at, line FROM audit_cosignatures
   WHERE checkpoint_id = ANY($1::bigint[]) ORDER BY checkpoint_id, received_at, witness, key_id`,
  // The newest checkpoints before id $2 that hold any cosignature, newest first, each with its
  // lines: where the newest witnessed one is looked for, a page at a time.
  newestCosigned: `SELECT ${CHECKPOINT_COLUMNS},
     ARRAY(SELECT s.line FROM audit_cosignatures s WHERE s.checkpoint_id = c.id ORDER BY s.received_at, s.witness, s.key_id) AS lines
   FROM (SELECT DISTINCT checkpoint_id FROM audit_cosignatures WHERE checkpoint_id < $2 ORDER BY checkpoint_id DESC LIMIT $1) k
   JOIN audit_checkpoints c ON c.id = k.checkpoint_id
   ORDER BY c.id DESC`,
  checkpointById: `SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints c WHERE c.id = $1`,
  newestAtSize: `SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints c WHERE c.tree_size = $1 ORDER BY c.id DESC LIMIT 1`,
  // The first checkpoint signed after checkpoint $1 (any, when $1 is 0): since when the log has
  // held a checkpoint newer than its newest witnessed one.
  firstAfter: 'SELECT c.id, c.tree_size, c.created_at FROM audit_checkpoints c WHERE c.id > $1 ORDER BY c.id LIMIT 1',
  states: `SELECT ${STATE_COLUMNS} FROM audit_witness_state`,
  ensureState: 'INSERT INTO audit_witness_state (vkey, witness) VALUES ($1, $2) ON CONFLICT (vkey) DO NOTHING',
  // A 200: the witness holds this size now. Sizes only grow (a late answer never moves them back).
  cosigned: `UPDATE audit_witness_state SET known_size = GREATEST(known_size, $2), last_cosigned_size = GREATEST(COALESCE(last_cosigned_size, 0), $2),
     last_cosigned_at = clock_timestamp(), last_attempt_at = clock_timestamp(), last_error = NULL, last_error_at = NULL
   WHERE vkey = $1`,
  // A 409 names the size the witness holds: the next submission starts from it, whatever it is.
  knownSize: 'UPDATE audit_witness_state SET known_size = $2 WHERE vkey = $1',
  failed: `UPDATE audit_witness_state SET last_attempt_at = clock_timestamp(), last_error = $2, last_error_at = clock_timestamp() WHERE vkey = $1`,
  tryLock: `SELECT pg_try_advisory_xact_lock(${WITNESS_LOCK}) AS locked`,
  claim: `UPDATE audit_witness_lease SET holder = $1, lease_until = clock_timestamp() + $2::float8 * interval '1 millisecond'
   WHERE singleton AND (holder IS NULL OR holder = $1 OR lease_until <= clock_timestamp())
   RETURNING true AS held`,
  release: 'UPDATE audit_witness_lease SET holder = NULL, lease_until = NULL WHERE singleton AND holder = $1',
});

export function insertCosignature(q: Queryable, c: { checkpointId: number; treeSize: number; witness: string; keyId: string; timestamp: number; line: string }) {
  return query(q, S.insert, [c.checkpointId, c.treeSize, c.witness, c.keyId, c.timestamp, c.line]);
}

/** The kept lines of these checkpoints, by checkpoint id. */
export async function cosignatureLines(q: Queryable, checkpointIds: number[]): Promise<Map<number, CosignatureRow[]>> {
  const byId = new Map<number, CosignatureRow[]>(checkpointIds.map((id) => [id, []]));
  if (checkpointIds.length === 0) return byId;
  for (const row of await query<CosignatureRow>(q, S.linesOf, [checkpointIds])) byId.get(row.checkpoint_id)?.push(row);
  return byId;
}

export const newestCosigned = (q: Queryable, limit: number, beforeId: number) => query<CosignedCheckpointRow>(q, S.newestCosigned, [limit, beforeId]);
export const checkpointById = async (q: Queryable, id: number) => (await query<CheckpointRow>(q, S.checkpointById, [id]))[0];
export const newestCheckpointAtSize = async (q: Queryable, size: number) => (await query<CheckpointRow>(q, S.newestAtSize, [size]))[0];
export const firstCheckpointAfter = async (q: Queryable, id: number) =>
  (await query<{ id: number; tree_size: number; created_at: string }>(q, S.firstAfter, [id]))[0];

export const witnessStates = (q: Queryable) => query<WitnessStateRow>(q, S.states);
export const ensureWitnessState = (q: Queryable, vkey: string, witness: string) => query(q, S.ensureState, [vkey, witness]);
export const recordCosigned = (q: Queryable, vkey: string, size: number) => query(q, S.cosigned, [vkey, size]);
export const recordKnownSize = (q: Queryable, vkey: string, size: number) => query(q, S.knownSize, [vkey, size]);
export const recordFailure = (q: Queryable, vkey: string, error: string) => query(q, S.failed, [vkey, error]);

export const tryWitnessLock = async (tx: Tx) => (await query<{ locked: boolean }>(tx, S.tryLock))[0]?.locked === true;
export const claimWitnessLease = async (tx: Tx, holder: string, leaseMs: number) => (await query(tx, S.claim, [holder, leaseMs])).length > 0;
export const releaseWitnessLease = (q: Queryable, holder: string) => query(q, S.release, [holder]);
