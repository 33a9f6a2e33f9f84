// The audit webhook's cursors and leases, one per receiver (migrations/0006_audit_webhook.sql,
// 0007_webhook_receiver.sql). Every lease check
// uses the database's clock (clock_timestamp()), never an instance's own, so instances with
// skewed clocks agree on when a lease has run out.
import type { Queryable, Tx } from '../../../db/database.js';
import { query, statements } from '../../../db/statements.js';
import type { CheckpointRow } from './evidence.repository.js';

const CHECKPOINT_COLUMNS = 'id, tree_size, root_hash, prev_checkpoint_hash, key_id, signature, note, created_at';

export interface WebhookCursor {
  next_seq: number;
  last_checkpoint_id: number;
}

export interface WebhookState extends WebhookCursor {
  /** Another instance holds an unexpired lease. */
  leased_elsewhere: boolean;
  /** Sealed records or checkpoints beyond the cursor. */
  pending: boolean;
}

export interface WebhookLag {
  records: number;
  seconds: number;
}

/** Taking the lease: one instance at a time, the others skip instead of queueing (docs/api.md 5.6). */
const WEBHOOK_LOCK = 7_245_030;
const LEASE = `clock_timestamp() + $2::float8 * interval '1 millisecond'`;

const S = statements('webhook', {
  // A receiver's row: the one there before cursors were per receiver is adopted by the first
  // receiver that asks (migrations/0007_webhook_receiver.sql); otherwise a new row, from seq 0.
  // If someone deleted the row, the stream starts over from seq 0: duplicates, which receivers
  // recognise by seq.
  adopt: `UPDATE audit_webhook_cursor SET receiver = $1
   WHERE receiver IS NULL AND NOT EXISTS (SELECT 1 FROM audit_webhook_cursor WHERE receiver = $1)`,
  ensure: 'INSERT INTO audit_webhook_cursor (receiver) VALUES ($1) ON CONFLICT (receiver) DO NOTHING',
  // Without a lock or a write: what an idle poll costs. Pending is the cursor against the
  // newest seq and checkpoint (each a descent of its primary key), not an EXISTS, whose plan
  // scans the whole seal for a row past a cursor that is at its end (evidence.repository.ts,
  // "waiting").
  state: `SELECT c.next_seq, c.last_checkpoint_id,
     (c.holder IS NOT NULL AND c.holder <> $1 AND c.lease_until > clock_timestamp()) AS leased_elsewhere,
     (c.next_seq < COALESCE((SELECT max(s.next_seq) FROM audit_seal_batches s), 0)
       OR c.last_checkpoint_id < COALESCE((SELECT max(k.id) FROM audit_checkpoints k), 0)) AS pending
   FROM audit_webhook_cursor c WHERE c.receiver = $2`,
  tryLock: `SELECT pg_try_advisory_xact_lock(${WEBHOOK_LOCK}) AS locked`,
  // Takes the lease when nobody holds it, it has run out, or it is already ours.
  claim: `UPDATE audit_webhook_cursor SET holder = $1, lease_until = ${LEASE}
   WHERE receiver = $3 AND (holder IS NULL OR holder = $1 OR lease_until <= clock_timestamp())
   RETURNING next_seq, last_checkpoint_id`,
  renew: `UPDATE audit_webhook_cursor SET lease_until = ${LEASE} WHERE receiver = $3 AND holder = $1 RETURNING true AS held`,
  release: 'UPDATE audit_webhook_cursor SET holder = NULL, lease_until = NULL WHERE receiver = $2 AND holder = $1',
  // Compare-and-set: only the lease's holder moves the cursor, and only from where it read it.
  advance: `UPDATE audit_webhook_cursor SET next_seq = $3, last_checkpoint_id = $4, delivered_at = clock_timestamp(), lease_until = ${LEASE}
   WHERE receiver = $7 AND holder = $1 AND next_seq = $5 AND last_checkpoint_id = $6
   RETURNING true AS advanced`,
  nextCheckpoint: `SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints WHERE id > $1 ORDER BY id LIMIT 1`,
  // Sealed records not delivered yet, and how long the oldest of them has been sealed (0 when none).
  lag: `SELECT GREATEST(s.size - c.next_seq, 0) AS records,
     CASE WHEN c.next_seq < s.size THEN GREATEST(COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - (
       SELECT o.sealed_at FROM audit_seal_batches o WHERE o.first_seq <= c.next_seq ORDER BY o.first_seq DESC LIMIT 1)), 0), 0) ELSE 0 END::float8 AS seconds
   FROM audit_webhook_cursor c
   CROSS JOIN (SELECT COALESCE(max(next_seq), 0) AS size FROM audit_seal_batches) s
   WHERE c.receiver = $1`,
});

/** Whose cursor, and who moves it: a receiver (receiverOf in webhook.sender.ts) and this instance's name as a lease holder. */
export interface Deliverer {
  receiver: string;
  holder: string;
}

/** Makes sure the receiver has its row (adopting the one from before cursors were per receiver, if nobody has). */
export async function ensureWebhookCursor(q: Queryable, receiver: string): Promise<void> {
  await query(q, S.adopt, [receiver]);
  await query(q, S.ensure, [receiver]);
}

export const webhookState = async (q: Queryable, d: Deliverer) => (await query<WebhookState>(q, S.state, [d.holder, d.receiver]))[0];

export const tryWebhookLock = async (tx: Tx) => (await query<{ locked: boolean }>(tx, S.tryLock))[0]?.locked === true;
export const claimLease = async (tx: Tx, d: Deliverer, leaseMs: number) => (await query<WebhookCursor>(tx, S.claim, [d.holder, leaseMs, d.receiver]))[0];
export const renewLease = async (q: Queryable, d: Deliverer, leaseMs: number) => (await query(q, S.renew, [d.holder, leaseMs, d.receiver])).length > 0;
export const releaseLease = (q: Queryable, d: Deliverer) => query(q, S.release, [d.holder, d.receiver]);

export async function advanceCursor(q: Queryable, d: Deliverer, leaseMs: number, from: WebhookCursor, to: WebhookCursor): Promise<boolean> {
  const rows = await query(q, S.advance, [d.holder, leaseMs, to.next_seq, to.last_checkpoint_id, from.next_seq, from.last_checkpoint_id, d.receiver]);
  return rows.length > 0;
}

export const nextCheckpoint = async (q: Queryable, afterId: number) => (await query<CheckpointRow>(q, S.nextCheckpoint, [afterId]))[0];
export const webhookLag = async (q: Queryable, receiver: string): Promise<WebhookLag> =>
  (await query<WebhookLag>(q, S.lag, [receiver]))[0] ?? { records: 0, seconds: 0 };
