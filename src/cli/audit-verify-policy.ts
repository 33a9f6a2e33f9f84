// `--policy <file>` (a C2SP tlog-policy) for `teamlog audit verify` and `audit verify-proof`: the
// checkpoint verified against must carry the log's signature and cosignatures by witnesses that
// meet the policy's quorum (docs/api.md 5.11). Each verdict is checked here again, in the pure
// spec code (src/tlog/policy.ts), from the note as served: what the service says it kept is not
// taken on trust.
//
// Against the database, "the checkpoint" is the newest witnessed one, the one GET
// /audit-logs/tlog/checkpoint serves under a policy: the checkpoints signed since are the
// witnesses' to catch up with (they are asked at most every AUDIT_WITNESS_INTERVAL_MS), and are
// not a failure until they have waited longer than AUDIT_WITNESS_MAX_AGE_MS, as /health/ready
// says. Then the witnesses missing from the newest checkpoint are named.
import { readFileSync } from 'node:fs';
import type { Queryable } from '../db/database.js';
import type { Policy } from '../tlog/policy.js';
import type { NoteVerifier } from '../tlog/signed-note.js';
import type { Verdict } from './audit-verify-checks.js';
import { UsageError } from './support.js';

const CHECK = 'the witness quorum';

/**
 * A witness's clock may run a little ahead of this machine's; a cosignature dated further ahead
 * than this cannot be an honest statement about the past, so it counts as invalid.
 */
export const CLOCK_SKEW_SECONDS = 600;

export const cosignaturesNotAfter = () => Math.floor(Date.now() / 1000) + CLOCK_SKEW_SECONDS;

/**
 * The policy file, parsed strictly. A file that cannot be read or parsed is an input error (exit
 * 2), never a failed verification. `needsLog`: the policy must name the log (verify-proof has no
 * other way to know its key; verify holds the log's key already).
 */
export async function readPolicyFile(file: string, needsLog: boolean): Promise<Policy> {
  const { PolicyError, parsePolicy } = await import('../tlog/policy.js');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read the policy ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let policy: Policy;
  try {
    policy = parsePolicy(text);
  } catch (err) {
    if (err instanceof PolicyError) throw new UsageError(`${file}: ${err.message}`);
    throw err;
  }
  if (needsLog && policy.logs.length === 0) throw new UsageError(`${file} names no log: add a "log <vkey>" line with the log's note verifier key`);
  return policy;
}

const isoTime = (seconds: number) => new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');

/** "cosigned by a (at …), b (at …)", or what is missing, for a checkpoint's note under the policy. */
async function quorumOf(note: string, policy: Policy, logs: NoteVerifier[]) {
  const { verifyCheckpointWithPolicy, evaluateQuorum, describeUnmetQuorum } = await import('../tlog/policy.js');
  const verdict = verifyCheckpointWithPolicy(note, policy, { logs, notAfter: cosignaturesNotAfter() });
  if (verdict.ok) {
    const by = verdict.cosignatures.map((c) => `${c.witness} (at ${isoTime(c.timestamp)})`);
    return { ok: true as const, size: verdict.checkpoint.treeSize, said: by.length > 0 ? `cosigned by ${by.join(', ')}` : 'no cosignature needed (quorum none)' };
  }
  const unmet = verdict.quorum && !verdict.quorum.met ? describeUnmetQuorum(verdict.quorum) : undefined;
  // The witnesses whose cosignature is missing, even when the note fails for another reason.
  const missing = unmet ?? describeUnmetQuorum(evaluateQuorum(policy, []));
  return { ok: false as const, problem: verdict.problem, missing };
}

/** A checkpoint note held outside the database (a saved one, an export's last line) under the policy. */
export async function noteQuorumVerdict(note: string, policy: Policy, logs: NoteVerifier[], what: string): Promise<Verdict> {
  const q = await quorumOf(note, policy, logs);
  if (!q.ok) return { check: CHECK, outcome: 'failed', problem: `${what} does not meet the witness policy (quorum ${policy.quorum}): ${q.problem}` };
  return { check: CHECK, outcome: 'passed', said: `${what} (${q.size.toLocaleString('en')} records) is witnessed: ${q.said}, quorum ${policy.quorum} met` };
}

/**
 * The database's newest witnessed checkpoint under the policy, checked again from its note with
 * its cosignature lines; and whether the checkpoints after it have waited for witnesses longer
 * than `maxAgeMs`.
 */
export async function databaseQuorumVerdict(db: Queryable, policy: Policy, logs: NoteVerifier[], maxAgeMs: number): Promise<Verdict> {
  const [{ newestWitnessed, cosignedCheckpoint }, { latestCheckpoint }, { firstCheckpointAfter }, { evaluateQuorum, describeUnmetQuorum }] = await Promise.all([
    import('../modules/audit/evidence/witnessing.service.js'), import('../modules/audit/evidence/evidence.repository.js'),
    import('../modules/audit/evidence/cosignature.repository.js'), import('../tlog/policy.js'),
  ]);
  const latest = await latestCheckpoint(db);
  if (!latest) return { check: CHECK, outcome: 'not-made', why: 'nothing is signed yet, so there is no checkpoint for witnesses to have cosigned' };
  const newest = await cosignedCheckpoint(db, latest, policy);
  const missingOnNewest = () => {
    const quorum = evaluateQuorum(policy, newest.cosignatures.map((c) => policy.witnesses.find((w) => w.verifier.name === c.name && w.verifier.keyHash.toString('hex') === c.key_id)?.name ?? ''));
    return quorum.met ? 'the newest checkpoint meets it' : describeUnmetQuorum(quorum);
  };
  const witnessed = await newestWitnessed(db, policy);
  if (!witnessed) {
    return { check: CHECK, outcome: 'failed', problem: `no checkpoint in the database carries cosignatures meeting quorum ${policy.quorum}: ${missingOnNewest()}` };
  }
  const q = await quorumOf(witnessed.note, policy, logs);
  if (!q.ok) return { check: CHECK, outcome: 'failed', problem: `the newest witnessed checkpoint (${witnessed.row.tree_size} records) does not verify under the policy: ${q.problem}` };
  const head = `the newest witnessed checkpoint (${q.size.toLocaleString('en')} records) is ${q.said}, quorum ${policy.quorum} met`;
  if (witnessed.row.id === latest.id) return { check: CHECK, outcome: 'passed', said: head };
  const first = await firstCheckpointAfter(db, witnessed.row.id);
  const waitedMs = first ? Date.now() - Date.parse(first.created_at) : 0;
  const after = `the ${(latest.tree_size - witnessed.row.tree_size).toLocaleString('en')} records after it`;
  if (waitedMs > maxAgeMs) {
    return {
      check: CHECK, outcome: 'failed',
      problem: `${after} have waited ${Math.round(waitedMs / 1000)} s for witnesses (AUDIT_WITNESS_MAX_AGE_MS is ${Math.round(maxAgeMs / 1000)} s): ${missingOnNewest()}; ${head}`,
    };
  }
  return { check: CHECK, outcome: 'passed', said: `${head}; ${after} are not witnessed yet (${Math.round(waitedMs / 1000)} s, within AUDIT_WITNESS_MAX_AGE_MS)` };
}
