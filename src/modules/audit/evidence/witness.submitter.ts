// Asks the policy's witnesses to cosign the log's newest checkpoint (docs/api.md 5.11,
// docs/audit-integrity.md "Witnessing"), as C2SP tlog-witness add-checkpoint requests:
//   POST <url>/add-checkpoint
//   old <the size the witness holds>
//   <the consistency proof from it, one base64 hash a line>
//   <blank line>
//   <the checkpoint's signed note>
// A 409 (text/x.tlog.size) names the size the witness holds: the request is made again from it.
// Other refusals (400, 403, 404, 422, …) are recorded with their body; a witness that does not
// answer is tried again after a backoff, and caught up later with one consistency proof from the
// size it holds. Each cosignature returned is checked (cosignature/v1, Ed25519, the key the policy
// names, not dated in the future) before it is kept, append-only, beside its checkpoint.
//
// A background loop like the webhook's (background/background-loop.ts): woken when a checkpoint
// is signed, and by a poll; a witness is sent at most one checkpoint every
// AUDIT_WITNESS_INTERVAL_MS. Nothing here holds a transaction over the network, so sealing and
// the service's writes never wait for a witness; and since a transaction-level advisory lock ends
// with its transaction, one instance at a time submits by holding a lease row (taken under an
// advisory lock, as the webhook's), which runs out if its holder dies.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import { ConfigError } from '../../../config.js';
import type { Database } from '../../../db/database.js';
import { BackgroundLoop, type RoundOutcome } from '../../../background/background-loop.js';
import { checkCheckpoint } from '../../../tlog/checkpoint-check.js';
import type { Policy, PolicyWitness } from '../../../tlog/policy.js';
import { SIZE_CONTENT_TYPE } from '../../../tlog/witness.js';
import { checkLine, noteText } from './cosignature.checker.js';
import {
  claimWitnessLease, ensureWitnessState, insertCosignature, recordCosigned, recordFailure, recordKnownSize, releaseWitnessLease, tryWitnessLock, witnessStates,
  type WitnessStateRow,
} from './cosignature.repository.js';
import { latestCheckpoint, type CheckpointRow } from './evidence.repository.js';
import type { LogIdentity } from './log.identity.js';
import { withoutUrlCredentials } from './witnessing.service.js';

/** Timings. Not public configuration: production uses the defaults; tests may shorten them. */
export interface WitnessTuning {
  /** A request that has not answered by then is a failure. */
  timeoutMs: number;
  /** First backoff after a witness failed to answer; doubles with each failure in a row. */
  retryBaseMs: number;
  /** Ceiling of a backoff (and never longer than the interval). */
  retryCapMs: number;
  /** The safety net: how often an instance looks for work nobody woke it for. */
  pollMs: number;
}

export const DEFAULT_WITNESS_TUNING: WitnessTuning = { timeoutMs: 10_000, retryBaseMs: 1000, retryCapMs: 60_000, pollMs: 2000 };

/** What a submission came to, for the metrics: one counter by witness and outcome. */
export type SubmissionOutcome = 'cosigned' | 'conflict' | 'refused' | 'invalid' | 'network' | 'timeout';

export interface WitnessSubmitterOptions {
  db: Database;
  policy: Policy;
  identity: LogIdentity;
  intervalMs: number;
  log: FastifyBaseLogger;
  /** The RFC 6962 consistency proof between two sizes of the stored tree, checked against the signed checkpoint (evidence.service.ts). */
  consistencyProof(from: number, to: number): Promise<string[]>;
  tuning?: Partial<WitnessTuning>;
  onOutcome?: (witness: string, outcome: SubmissionOutcome) => void;
}

/** At most this many bytes of a witness's refusal are kept (it is the witness's text, shown to admins). */
const MAX_ERROR_BODY = 500;
/** A 409 is followed at most this many times in one submission: a witness that keeps moving is asked again next round. */
const MAX_CONFLICTS = 2;
/** Rounds of 409 and retry, each up to a timeout: the lease covers them with room to spare. */
const leaseMsOf = (t: WitnessTuning) => (MAX_CONFLICTS + 1) * t.timeoutMs + 5000;

/**
 * A policy's `log` lines, if it has any, must name this service's own key: the policy is what
 * verifiers are given, and one naming another log would make every checkpoint fail it.
 */
export function requirePolicyNamesLog(policy: Policy, identity: LogIdentity): void {
  if (policy.logs.length === 0 || policy.logs.some((l) => l.vkey === identity.verifierKey)) return;
  throw new ConfigError(
    `AUDIT_WITNESS_POLICY names the log ${policy.logs.map((l) => l.vkey).join(', ')}, not this service's own key ${identity.verifierKey}: ` +
      'write that key on its `log` line (GET /audit-logs/public-keys lists it), or leave the `log` line out',
  );
}

class Timeout extends Error {}

/** The shortest wait the loop is asked for between two rounds. */
const MIN_WAIT_MS = 20;

/** The witness has cosigned this checkpoint's size, and nothing went wrong since. */
const hasCosigned = (state: WitnessStateRow | undefined, checkpoint: CheckpointRow) => state?.last_cosigned_size === checkpoint.tree_size && state.last_error === null;

const errorText = (status: number, body: string) => {
  const text = body.trim().slice(0, MAX_ERROR_BODY);
  return `${status}${text ? `: ${text}` : ''}`;
};

export class WitnessSubmitter {
  private readonly tuning: WitnessTuning;
  private readonly holder = `${hostname()}:${process.pid}:${randomUUID()}`;
  private readonly loop: BackgroundLoop;
  /** Per witness (vkey): failures in a row, and when it may be asked again. */
  private readonly schedule = new Map<string, { failures: number; notBefore: number }>();
  private readonly inFlight = new Set<AbortController>();

  constructor(private readonly o: WitnessSubmitterOptions) {
    this.tuning = { ...DEFAULT_WITNESS_TUNING, ...o.tuning };
    this.loop = new BackgroundLoop({ name: 'audit witness submitter', log: o.log, pollMs: this.tuning.pollMs, round: () => this.round() });
  }

  start(): void {
    this.loop.start();
  }

  /** A checkpoint was signed: submit it if a witness is due. */
  wake(): void {
    this.loop.wake();
  }

  async stop(): Promise<void> {
    for (const c of this.inFlight) c.abort();
    await this.loop.stop();
  }

  private async round(): Promise<RoundOutcome> {
    const { db, policy } = this.o;
    const witnesses = policy.witnesses.filter((w): w is PolicyWitness & { url: string } => w.url !== undefined);
    if (witnesses.length === 0) return 'idle';
    const checkpoint = await latestCheckpoint(db);
    if (!checkpoint) return 'idle';
    // Only a checkpoint this service's keys signed is sent: a row written behind its back is the sealer's to refuse, not to spread.
    const claim = { treeSize: checkpoint.tree_size, rootHash: Buffer.from(checkpoint.root_hash) };
    if (!checkCheckpoint(checkpoint.note, this.o.identity.trusted, claim).ok) return { afterMs: this.tuning.pollMs };

    const states = new Map((await witnessStates(db)).map((s) => [s.vkey, s]));
    const needing = witnesses.filter((w) => !hasCosigned(states.get(w.vkey), checkpoint));
    // Every witness holds this checkpoint's cosignature: nothing to do until the next one (a wake).
    if (needing.length === 0) return 'idle';
    const now = Date.now();
    const due = needing.filter((w) => this.dueAt(w, states.get(w.vkey)) <= now);
    if (due.length > 0) {
      const leased = await db.transaction(async (tx) => (await tryWitnessLock(tx)) && claimWitnessLease(tx, this.holder, leaseMsOf(this.tuning)));
      if (!leased) return { afterMs: this.tuning.pollMs };
      let results: PromiseSettledResult<void>[];
      try {
        // In parallel, each request with its own timeout: a slow witness holds back no other.
        results = await Promise.allSettled(due.map(async (w) => {
          if (!states.has(w.vkey)) await ensureWitnessState(db, w.vkey, w.name);
          await this.submit(w, checkpoint, states.get(w.vkey)?.known_size ?? 0);
        }));
      } finally {
        await releaseWitnessLease(db, this.holder);
      }
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    }
    // The next witness to fall due (one that has just cosigned finds nothing to do then).
    return { afterMs: Math.max(MIN_WAIT_MS, Math.min(...needing.map((w) => this.dueAt(w, states.get(w.vkey)))) - Date.now()) };
  }

  /**
   * When a witness may be asked next: as planned by this instance (an interval after an answer,
   * a backoff after none), or, after a restart or another instance's work, an interval after the
   * last attempt the database knows of.
   */
  private dueAt(w: PolicyWitness, state: WitnessStateRow | undefined): number {
    const planned = this.schedule.get(w.vkey);
    if (planned) return planned.notBefore;
    return state?.last_attempt_at ? Date.parse(state.last_attempt_at) + this.o.intervalMs : 0;
  }

  /** The next attempt: an interval after a success or a refusal, a backoff (full jitter, up to the interval) after no answer. */
  private plan(w: PolicyWitness, answered: boolean): void {
    const failures = answered ? 0 : (this.schedule.get(w.vkey)?.failures ?? 0) + 1;
    const wait = answered
      ? this.o.intervalMs
      : Math.min(this.o.intervalMs, this.tuning.retryCapMs, this.tuning.retryBaseMs * 2 ** Math.min(failures - 1, 30)) * (0.5 + Math.random() / 2);
    this.schedule.set(w.vkey, { failures, notBefore: Date.now() + wait });
  }

  private async submit(w: PolicyWitness & { url: string }, checkpoint: CheckpointRow, knownSize: number): Promise<void> {
    const { db, log } = this.o;
    const size = checkpoint.tree_size;
    let old = knownSize;
    const fail = async (outcome: SubmissionOutcome, error: string, answered: boolean) => {
      // An error may quote the witness's URL, and a URL may hold a password: neither the
      // database nor the log keeps it.
      const shown = withoutUrlCredentials(error);
      await recordFailure(db, w.vkey, shown);
      this.plan(w, answered);
      this.o.onOutcome?.(w.name, outcome);
      log.warn({ witness: w.name, treeSize: size }, `audit witness submitter: ${w.name} did not cosign: ${shown}`);
    };
    for (let conflicts = 0; ; conflicts++) {
      if (old > size) {
        return fail('conflict', `the witness holds tree size ${old}, larger than the log's newest checkpoint (${size}): it has seen a checkpoint this log did not sign`, true);
      }
      // A proof that cannot be made (the stored tree was changed) fails the round: the loop logs it and backs off.
      const proof = old === 0 || old === size ? [] : await this.o.consistencyProof(old, size);
      let answer: { status: number; type: string | null; body: string };
      try {
        answer = await this.post(w.url, `old ${old}\n${proof.map((h) => `${h}\n`).join('')}\n${checkpoint.note}`);
      } catch (err) {
        if (err instanceof Timeout) return fail('timeout', `no answer within ${this.tuning.timeoutMs} ms`, false);
        const cause = (err as Error & { cause?: { code?: string; message?: string } }).cause;
        return fail('network', `network: ${(err as Error).message}${cause ? ` (${cause.code ?? cause.message})` : ''}`, false);
      }
      if (answer.status === 200) return this.keep(w, checkpoint, answer.body, fail);
      const named = answer.status === 409 && answer.type?.split(';')[0]?.trim() === SIZE_CONTENT_TYPE ? /^(0|[1-9][0-9]*)\n?$/.exec(answer.body)?.[1] : undefined;
      if (named === undefined) return fail('refused', errorText(answer.status, answer.body), true);
      const held = Number(named);
      await recordKnownSize(db, w.vkey, held);
      // Asked from the size it named and answering 409 again: it holds another root at that size.
      if (held === old || conflicts >= MAX_CONFLICTS) {
        return fail('conflict', `409: the witness holds tree size ${held}${held === old ? ' with another root than this log\'s' : ''}`, true);
      }
      old = held;
    }
  }

  /** A 200: its lines by the policy's key for this witness are checked, and a valid one is kept. */
  private async keep(w: PolicyWitness, checkpoint: CheckpointRow, body: string, fail: (o: SubmissionOutcome, e: string, answered: boolean) => Promise<void>): Promise<void> {
    const text = noteText(checkpoint.note);
    // Dated after this moment is dated in the future: the witness signed it before it answered.
    const notAfter = Math.ceil(Date.now() / 1000);
    const lines = body.split('\n').filter((l) => l !== '');
    const problems: string[] = [];
    for (const line of lines) {
      const verdict = checkLine(text, line, w, notAfter);
      if (!verdict.ok) {
        problems.push(verdict.otherKey ? `a line not by ${w.vkey.split('+').slice(0, 2).join('+')}` : verdict.problem);
        continue;
      }
      const c = verdict.cosignature;
      await insertCosignature(this.o.db, { checkpointId: checkpoint.id, treeSize: checkpoint.tree_size, witness: c.name, keyId: c.key_id, timestamp: c.timestamp, line: c.line });
      await recordCosigned(this.o.db, w.vkey, checkpoint.tree_size);
      this.plan(w, true);
      this.o.onOutcome?.(w.name, 'cosigned');
      return;
    }
    await fail('invalid', `200, but no valid cosignature: ${problems.join('; ') || 'the body holds no signature line'}`, true);
  }

  private async post(url: string, body: string): Promise<{ status: number; type: string | null; body: string }> {
    const controller = new AbortController();
    this.inFlight.add(controller);
    const timer = setTimeout(() => controller.abort(new Timeout()), this.tuning.timeoutMs);
    try {
      // fetch refuses a URL that holds credentials: they travel as Basic authentication instead.
      const target = new URL(`${url.replace(/\/+$/, '')}/add-checkpoint`);
      const headers: Record<string, string> = { 'content-type': 'text/plain; charset=utf-8' };
      if (target.username !== '' || target.password !== '') {
        headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`).toString('base64')}`;
        target.username = '';
        target.password = '';
      }
      const res = await fetch(target, { method: 'POST', body, signal: controller.signal, headers });
      return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
    } catch (err) {
      if (controller.signal.reason instanceof Timeout) throw controller.signal.reason;
      throw err;
    } finally {
      clearTimeout(timer);
      this.inFlight.delete(controller);
    }
  }
}
