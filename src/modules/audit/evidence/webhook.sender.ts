// Streams the sealed audit log out (docs/api.md 5.9): every sealed record and every checkpoint is
// POSTed at least once, in seq order, to AUDIT_WEBHOOK_URL as
//   {type: "audit-batch", records: [{seq, leaf_hash, record, sealed} …≤100], checkpoint?}
// signed `X-Teamlog-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`.
// With AUDIT_WEBHOOK_FORMAT=ocsf, each record is instead the OCSF event the export's format=ocsf
// gives (ocsf.mapper.ts: seq, leaf hash and sealed form under `unmapped`); the batch, the
// checkpoint, the signature and the delivery rules stay the same.
// The cursor lives in the database (audit_webhook_cursor) and moves only after a 2xx, so a
// receiver that is down for hours, or a restart, loses nothing; a batch whose answer was lost
// is sent again (receivers drop duplicates by seq). Each receiver has a cursor of its own
// (receiverOf): pointing AUDIT_WEBHOOK_URL at a new one sends it everything from seq 0.
//
// What a batch holds. Records from the cursor on, at most 100, and never past the tree size of
// the oldest checkpoint not delivered yet: a batch that reaches that size carries that
// checkpoint, so every checkpoint is delivered, each with (or after) the batch that completes
// the records it covers, and a receiver can check its root against the records it holds the
// moment it arrives. A checkpoint over records already delivered (the sealer signs after
// sealing; or re-signs the same head after a key rotation) comes in a batch with no records.
//
// Why reading the seal by `seq >= cursor` keeps commit order (docs/api.md 5.5): seqs are given by the
// sealer, which reads records in commit order (db/commit-order.ts), one transaction at a time
// under its advisory lock, each batch continuing from what the one before it committed (the seal
// is dense: audit_seal_batches' prev_seq references next_seq). So seq n+1 becomes visible only
// after seq n is, no seq can appear later below one already seen, and the same holds for
// checkpoint ids.
//
// One instance delivers at a time (docs/api.md 5.6). It runs as a background loop like the sealer
// (background/background-loop.ts), but not under the loop's transaction-level advisory lock: here the
// transaction must end before the POST (on PGlite a transaction holds the service's one
// connection, so a slow receiver would stall every request), and the lock of a transaction ends
// with it. So a lease does what the lock cannot: a row (holder, lease_until ≤ 5 s ahead) taken in a short transaction under
// pg_try_advisory_xact_lock (so that a second instance skips instead of queueing), renewed
// every LEASE/3 while this instance works (during a POST and during backoff too), released
// when there is nothing left to send. A holder that dies stops renewing: another instance
// takes over at its next poll after the lease has run out, within lease + poll = 7 s. The
// cursor then advances by compare-and-set, guarded by the holder and the position it read: an
// instance that lost its lease mid-POST (e.g. cut from the database for longer than the lease)
// cannot move the cursor, and at worst the batch it sent is delivered twice.
//
// Retries: any non-2xx answer, network error or 10 s timeout is a failure; the round is tried
// again after an exponential backoff with full jitter (random in [0, min(cap, base·2^n)]),
// for ever. Each retry reads the batch again, so a value erased in the meantime (teamlog audit
// redact) is not sent. A wake (a seal) never shortens a backoff.
import { createHmac, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../../../db/database.js';
import { resolvePersonalData } from '../audit.service.js';
import { BackgroundLoop, type RoundOutcome } from '../../../background/background-loop.js';
import { sealedRowsFrom, type CheckpointRow } from './evidence.repository.js';
import { presentCheckpoint } from './evidence.presenter.js';
import { sealedForm } from './record.sealed-form.js';
import { missingRecordEvent, ocsfEvent } from './ocsf.mapper.js';
import {
  advanceCursor, claimLease, ensureWebhookCursor, nextCheckpoint, releaseLease, renewLease, tryWebhookLock, webhookState, type Deliverer, type WebhookCursor,
} from './webhook.repository.js';

/** Records per POST (docs/api.md 5.9). */
const BATCH = 100;

/** Timings. Not public configuration: production uses the defaults; tests shorten them. */
export interface WebhookTuning {
  /** First backoff ceiling; doubles with each failure. */
  retryBaseMs: number;
  /** Ceiling of every backoff. */
  retryCapMs: number;
  /** A POST that has not answered by then is a failure. */
  timeoutMs: number;
  /** How long a lease lasts unless renewed (renewed every third of it). */
  leaseMs: number;
  /** The safety net: how often an instance looks for work nobody woke it for (another instance's seals, an expired lease). */
  pollMs: number;
}

export const DEFAULT_TUNING: WebhookTuning = { retryBaseMs: 500, retryCapMs: 60_000, timeoutMs: 10_000, leaseMs: 5_000, pollMs: 2_000 };

export type FailureReason = 'status' | 'network' | 'timeout';

export interface WebhookOptions {
  db: Database;
  url: string;
  secret: string;
  /** How each record is shaped (AUDIT_WEBHOOK_FORMAT): the API's record with its seal (default), or an OCSF event. */
  format?: 'teamlog' | 'ocsf';
  log: FastifyBaseLogger;
  tuning?: Partial<WebhookTuning>;
  /** Each failed attempt (the failure counter in /metrics). */
  onFailure?: (reason: FailureReason) => void;
}

/**
 * The receiver a cursor belongs to: the URL without credentials, query or fragment. A new
 * receiver starts from seq 0 (it holds nothing yet); a token in the query can be rotated
 * without starting over; no secret goes into the database.
 */
export function receiverOf(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
}

/** `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`. */
export function signatureHeader(secret: string, body: string, now = Date.now()): string {
  const t = Math.floor(now / 1000);
  return `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')}`;
}

/** Full jitter (AWS Architecture Blog, "Exponential Backoff and Jitter"): uniform in [0, min(cap, base·2^(attempt-1))]. */
export function backoffMs(attempt: number, baseMs: number, capMs: number): number {
  return Math.random() * Math.min(capMs, baseMs * 2 ** Math.min(attempt - 1, 30));
}

interface Batch {
  from: WebhookCursor;
  to: WebhookCursor;
  body: string;
  records: number;
  checkpoint: boolean;
}

type Round =
  | { kind: 'idle' } // nothing to deliver
  | { kind: 'busy' } // another instance holds the lease (or is taking it)
  | { kind: 'delivered'; batch: Batch }
  | { kind: 'lost' } // the lease was taken meanwhile (the batch may have arrived or not): the new holder goes on
  | { kind: 'failed'; reason: FailureReason; status?: number; error?: string };

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

/** A POST that did not get a 2xx: the loop backs off (full jitter) and tries again. */
class DeliveryFailed extends Error {
  constructor(readonly failure: Extract<Round, { kind: 'failed' }>) {
    // Never the secret, the URL's credentials or the body: they may carry personal data.
    super(`delivery failed: ${failure.reason}${failure.status ? ` ${failure.status}` : ''}${failure.error ? ` (${failure.error})` : ''}`);
    this.name = 'DeliveryFailed';
  }
}

export class AuditWebhook {
  private readonly tuning: WebhookTuning;
  /**
   * This instance's cursor: its receiver's, held under a name unique per start (a restarted
   * process never mistakes its predecessor's lease for its own).
   */
  private readonly who: Deliverer;
  private readonly loop: BackgroundLoop;
  /** Renews the lease; set exactly while this instance holds it. */
  private heartbeat: NodeJS.Timeout | undefined;
  private renewing = false;
  /** Aborts the POST in flight (stop, or a lost lease). */
  private inFlight: AbortController | undefined;
  private stopping = false;

  constructor(private readonly opts: WebhookOptions) {
    this.tuning = { ...DEFAULT_TUNING, ...opts.tuning };
    this.who = { receiver: receiverOf(opts.url), holder: `${hostname()}:${process.pid}:${randomUUID()}` };
    // Reading or moving the cursor failing (the database) is retried the same way as a failed POST.
    this.loop = new BackgroundLoop({
      name: 'audit webhook',
      log: opts.log,
      pollMs: this.tuning.pollMs,
      failureBackoffMs: (attempt) => backoffMs(attempt, this.tuning.retryBaseMs, this.tuning.retryCapMs),
      round: () => this.step(),
    });
  }

  start(): void {
    this.stopping = false;
    this.loop.start();
  }

  /** Something may have been sealed: deliver soon (a round under way runs once more afterwards; a backoff is not cut short). */
  wake(): void {
    this.loop.wake();
  }

  /** Stops (a POST in flight is abandoned: sent again later) and hands the lease back so that another instance goes on at once. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.inFlight?.abort();
    await this.loop.stop();
    this.stopHeartbeat();
    await releaseLease(this.opts.db, this.who).catch((err: unknown) => this.opts.log.warn({ err }, 'audit webhook: could not release its lease'));
  }

  /** One round: a batch delivered ('more'), nothing to do or someone else doing it ('idle'), or a failure (thrown: the loop backs off). */
  private async step(): Promise<RoundOutcome> {
    const round = await this.round();
    switch (round.kind) {
      case 'idle':
        // Handed back (if held: an idle poll writes nothing), so that whichever instance is woken next delivers at once.
        if (this.heartbeat) {
          this.stopHeartbeat();
          await releaseLease(this.opts.db, this.who);
        }
        return 'idle';
      case 'busy':
        this.stopHeartbeat();
        return 'idle';
      case 'lost':
        this.stopHeartbeat();
        if (!this.stopping) this.opts.log.warn('audit webhook: another instance took the lease during a delivery; it goes on (the batch may arrive twice)');
        return 'idle';
      case 'delivered':
        return 'more';
      case 'failed':
        this.opts.onFailure?.(round.reason);
        throw new DeliveryFailed(round);
    }
  }

  /** Claims the lease, reads a batch, POSTs it outside any transaction, then advances the cursor. */
  private async round(): Promise<Round> {
    const { db } = this.opts;
    let state = await webhookState(db, this.who);
    if (!state) {
      await ensureWebhookCursor(db, this.who.receiver);
      state = await webhookState(db, this.who);
      if (!state) throw new Error('audit_webhook_cursor has no row for this receiver');
    }
    if (!state.pending) return { kind: 'idle' };
    if (state.leased_elsewhere) return { kind: 'busy' };

    const batch = await db.transaction(async (tx) => {
      if (!(await tryWebhookLock(tx))) return undefined;
      const from = await claimLease(tx, this.who, this.tuning.leaseMs);
      if (!from) return undefined;
      const checkpoint = await nextCheckpoint(tx, from.last_checkpoint_id);
      const end = Math.min(from.next_seq + BATCH, checkpoint ? Math.max(checkpoint.tree_size, from.next_seq) : Infinity);
      const rows = end > from.next_seq ? await sealedRowsFrom(tx, from.next_seq, end - from.next_seq) : [];
      const resolved = new Map((await resolvePersonalData(tx, rows.filter((r) => r.present))).map((r) => [r.id, r]));
      const last = rows[rows.length - 1];
      const nextSeq = last ? last.seq + 1 : from.next_seq;
      const attach: CheckpointRow | undefined = checkpoint && checkpoint.tree_size <= nextSeq ? checkpoint : undefined;
      if (rows[0] && rows[0].seq !== from.next_seq) this.opts.log.error({ expected: from.next_seq, found: rows[0].seq }, 'audit webhook: the seal has a gap; delivering what is there (teamlog audit verify)');
      // A seal whose record is gone (removed behind the service's back) goes out as it is: the receiver sees it.
      const records = rows.map((r) => {
        const delivered = { seq: r.seq, leaf_hash: b64(r.leaf_hash), record: r.present ? sealedForm(resolved.get(r.id)!) : null, sealed: r.present ? sealedForm(r) : null };
        if (this.opts.format !== 'ocsf') return delivered;
        const { record, sealed, seq, leaf_hash } = delivered;
        return record && sealed ? ocsfEvent({ record, sealed, seq, leaf_hash }) : missingRecordEvent(r.record_id, seq, leaf_hash);
      });
      const body = JSON.stringify({ type: 'audit-batch', records, ...(attach ? { checkpoint: presentCheckpoint(attach) } : {}) });
      const to = { next_seq: nextSeq, last_checkpoint_id: attach?.id ?? from.last_checkpoint_id };
      return { from, to, body, records: records.length, checkpoint: attach !== undefined } satisfies Batch;
    });
    if (!batch) return { kind: 'busy' };
    // The lease is ours until we hand it back: keep it alive through the POST and any backoff.
    this.startHeartbeat();
    if (batch.records === 0 && !batch.checkpoint) return { kind: 'idle' };

    const failure = await this.post(batch.body);
    if (failure === 'aborted') return { kind: 'lost' };
    if (failure) return failure;
    const advanced = await advanceCursor(db, this.who, this.tuning.leaseMs, batch.from, batch.to);
    return advanced ? { kind: 'delivered', batch } : { kind: 'lost' };
  }

  /** One POST; undefined on a 2xx, 'aborted' when this instance stopped or lost its lease meanwhile. */
  private async post(body: string): Promise<Extract<Round, { kind: 'failed' }> | 'aborted' | undefined> {
    const controller = new AbortController();
    this.inFlight = controller;
    const timeout = AbortSignal.timeout(this.tuning.timeoutMs);
    try {
      const res = await fetch(this.opts.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'teamlog-audit-webhook', 'x-teamlog-signature': signatureHeader(this.opts.secret, body) },
        body,
        // A redirect is a failure, not a reason to send the signed body elsewhere.
        redirect: 'manual',
        signal: AbortSignal.any([controller.signal, timeout]),
      });
      // The answer's body is not read: a large one must not hold memory or the connection.
      await res.body?.cancel().catch(() => {});
      return res.status >= 200 && res.status < 300 ? undefined : { kind: 'failed', reason: 'status', status: res.status };
    } catch (err) {
      if (controller.signal.aborted) return 'aborted';
      if (timeout.aborted) return { kind: 'failed', reason: 'timeout' };
      const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
      const error = typeof cause?.code === 'string' ? cause.code : typeof cause?.message === 'string' ? cause.message : (err as Error).name;
      return { kind: 'failed', reason: 'network', error };
    } finally {
      this.inFlight = undefined;
    }
  }

  private startHeartbeat(): void {
    if (this.heartbeat) return;
    this.heartbeat = setInterval(() => void this.renew(), Math.max(1, Math.floor(this.tuning.leaseMs / 3)));
    this.heartbeat.unref();
  }

  private stopHeartbeat(): void {
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }

  private async renew(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      if (!(await renewLease(this.opts.db, this.who, this.tuning.leaseMs))) {
        // Taken over (this instance was cut off for longer than the lease): stop sending; the next round finds it busy.
        this.stopHeartbeat();
        this.inFlight?.abort();
      }
    } catch (err) {
      this.opts.log.warn({ err }, 'audit webhook: could not renew its lease');
    } finally {
      this.renewing = false;
    }
  }
}

export function createAuditWebhook(opts: WebhookOptions): AuditWebhook {
  return new AuditWebhook(opts);
}
