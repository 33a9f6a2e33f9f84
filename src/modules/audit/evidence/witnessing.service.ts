// The log's checkpoints as witnesses have cosigned them (docs/api.md 5.11): each served note
// carries the cosignature lines kept for it, each read again under the policy before it is
// shown; the newest witnessed checkpoint (its cosignatures meet the policy's quorum); each
// witness's state for GET /audit-logs/witnesses; and how far witnessing lags, for /health/ready
// and the metrics. The submissions themselves are witness.submitter.ts's.
import type { WitnessPolicyFile } from '../../../config.js';
import type { Queryable } from '../../../db/database.js';
import { DomainError } from '../../../domain/errors.js';
import { QUORUM_NONE, type Policy } from '../../../tlog/policy.js';
import { cosignedNote, meetsQuorum, noteText, validCosignatures, type CheckedCosignature } from './cosignature.checker.js';
import { cosignatureLines, firstCheckpointAfter, newestCosigned, witnessStates } from './cosignature.repository.js';
import { latestCheckpoint, type CheckpointRow } from './evidence.repository.js';

/** A checkpoint with the cosignatures that hold under the policy, and its note carrying them. */
export interface CosignedCheckpoint {
  row: CheckpointRow;
  cosignatures: CheckedCosignature[];
  /** The cosignatures meet the policy's quorum (never without a policy). */
  witnessed: boolean;
  /** The log's signed note, then the cosignature lines. */
  note: string;
}

/** Checkpoints with cosignatures read per page, and pages at most, looking for the newest witnessed one. */
const PAGE = 100;
const MAX_PAGES = 10;

function cosignaturesOf(row: CheckpointRow, lines: readonly string[], policy: Policy | undefined): CheckedCosignature[] {
  let text: string;
  try {
    text = noteText(row.note);
  } catch {
    // A note that does not even parse (written behind the service's back) carries nobody's cosignature.
    return [];
  }
  return validCosignatures(text, lines, policy);
}

function cosignedFrom(row: CheckpointRow, lines: readonly string[], policy: Policy | undefined): CosignedCheckpoint {
  const cosignatures = cosignaturesOf(row, lines, policy);
  return { row, cosignatures, witnessed: meetsQuorum(policy, cosignatures), note: cosignedNote(row.note, cosignatures) };
}

/** A checkpoint with its kept cosignatures, checked under the policy (if any). */
export async function cosignedCheckpoint(q: Queryable, row: CheckpointRow, policy: Policy | undefined): Promise<CosignedCheckpoint> {
  const lines = (await cosignatureLines(q, [row.id])).get(row.id) ?? [];
  return cosignedFrom(row, lines.map((l) => l.line), policy);
}

/** Checks a checkpoint's lines under the policy; a memo may answer for lines it checked before. */
export type CheckLines = (row: CheckpointRow, lines: readonly string[]) => CosignedCheckpoint;

/**
 * Remembers the verdicts on the checkpoints' lines, by checkpoint and lines: the probes and the
 * metrics look for the newest witnessed checkpoint again and again, and while a witness is down
 * that means reading back over every checkpoint cosigned since, each cosignature an Ed25519
 * verification. A checkpoint's row never changes; its lines only grow, which changes the key.
 */
function checkedLinesMemo(policy: Policy | undefined, max = 4096): CheckLines {
  const memo = new Map<number, { key: string; cosigned: CosignedCheckpoint }>();
  return (row, lines) => {
    const key = lines.join('\n');
    const known = memo.get(row.id);
    if (known?.key === key) return known.cosigned;
    const cosigned = cosignedFrom(row, lines, policy);
    if (memo.size >= max) memo.clear();
    memo.set(row.id, { key, cosigned });
    return cosigned;
  };
}

/**
 * The newest checkpoint whose cosignatures meet the policy's quorum; `quorum none` needs none, so
 * the newest checkpoint is. Only checkpoints holding a cosignature can be witnessed otherwise:
 * those are read newest first, a page at a time, up to MAX_PAGES pages.
 */
export async function newestWitnessed(q: Queryable, policy: Policy, check: CheckLines = (row, lines) => cosignedFrom(row, lines, policy)): Promise<CosignedCheckpoint | undefined> {
  if (policy.quorum === QUORUM_NONE) {
    const latest = await latestCheckpoint(q);
    return latest && (await cosignedCheckpoint(q, latest, policy));
  }
  let before = Number.MAX_SAFE_INTEGER;
  for (let page = 0; page < MAX_PAGES; page++) {
    const rows = await newestCosigned(q, PAGE, before);
    for (const row of rows) {
      const cosigned = check(row, row.lines);
      if (cosigned.witnessed) return cosigned;
    }
    if (rows.length < PAGE) return undefined;
    before = rows.at(-1)!.id;
  }
  return undefined;
}

/** How far witnessing lags: since when the log has held a checkpoint newer than its newest witnessed one. */
export interface WitnessingLag {
  newestWitnessed: { tree_size: number; created_at: string } | null;
  /** The first checkpoint signed after the newest witnessed one (null: the newest checkpoint is witnessed, or there is none). */
  unwitnessedSince: string | null;
  unwitnessedMs: number;
}

export interface WitnessState {
  name: string;
  vkey: string;
  url: string | null;
  last_cosigned_size: number | null;
  last_cosigned_at: string | null;
  last_error: string | null;
}

/**
 * Text with the credentials of every URL in it masked: `http://user:secret@host/` is shown as
 * `http://[redacted]@host/` (up to the authority's last @, as a URL parser reads it). A witness
 * URL may carry them (the policy file is the operator's, not the API's), and a failed
 * submission's error may quote the URL (fetch refuses one that holds credentials, naming it):
 * GET /audit-logs/witnesses shows neither the policy's nor the errors'.
 */
export function withoutUrlCredentials(text: string): string {
  return text.replace(/(\b[A-Za-z][A-Za-z0-9+.-]*:\/\/)[^\s/?#]*@/g, '$1[redacted]@');
}

/** At most this many characters of a witness's last error are shown (witness.schemas.ts says so). */
const MAX_ERROR_SHOWN = 1000;

const masked = (text: string | null, max = Infinity) => (text === null ? null : withoutUrlCredentials(text).slice(0, max));

export function createWitnessing(db: Queryable, file: WitnessPolicyFile | undefined) {
  const policy = file?.policy;
  const check = checkedLinesMemo(policy);
  const witnessed = (p: Policy) => newestWitnessed(db, p, check);

  async function lag(): Promise<WitnessingLag | undefined> {
    if (!policy) return undefined;
    const newest = await witnessed(policy);
    const next = await firstCheckpointAfter(db, newest?.row.id ?? 0);
    return {
      newestWitnessed: newest ? { tree_size: newest.row.tree_size, created_at: newest.row.created_at } : null,
      unwitnessedSince: next?.created_at ?? null,
      unwitnessedMs: next ? Math.max(0, Date.now() - Date.parse(next.created_at)) : 0,
    };
  }

  return {
    /** The policy in force, if any. */
    policy,

    cosigned: (row: CheckpointRow) => cosignedCheckpoint(db, row, policy),

    newestWitnessed: async () => (policy ? witnessed(policy) : undefined),

    /**
     * The checkpoint GET /audit-logs/tlog/checkpoint and tlog-proofs serve: with a policy, the
     * newest witnessed one (404 until there is one); without, the newest.
     */
    async served(): Promise<CosignedCheckpoint> {
      if (policy) {
        const newest = await witnessed(policy);
        if (!newest) throw new DomainError('not_found', 'NOT_FOUND', 'No checkpoint meets the witness policy\'s quorum yet: see GET /audit-logs/witnesses');
        return newest;
      }
      const latest = await latestCheckpoint(db);
      if (!latest) throw new DomainError('not_found', 'NOT_FOUND', 'Checkpoint not found');
      return cosignedCheckpoint(db, latest, undefined);
    },

    /**
     * GET /audit-logs/witnesses: the policy, whether the witnesses now cosigning meet its quorum,
     * the newest witnessed checkpoint, each witness's state. Without a policy the log asks no
     * witness: `policy` is null and there is nothing else to show.
     */
    async status() {
      if (!file || !policy) return { policy: null, quorum_met: false, newest_witnessed: null, witnesses: [] as WitnessState[] };
      const states = new Map((await witnessStates(db)).map((s) => [s.vkey, s]));
      const witnesses: WitnessState[] = policy.witnesses.map((w) => {
        const s = states.get(w.vkey);
        return {
          name: w.name, vkey: w.vkey, url: masked(w.url ?? null),
          last_cosigned_size: s?.last_cosigned_size ?? null, last_cosigned_at: s?.last_cosigned_at ?? null, last_error: masked(s?.last_error ?? null, MAX_ERROR_SHOWN),
        };
      });
      // Cosigning now: the witness's last submission was cosigned (its error is cleared by a cosignature).
      const cosigning = witnesses.filter((w) => w.last_cosigned_size !== null && w.last_error === null);
      const newest = await witnessed(policy);
      return {
        policy: withoutUrlCredentials(file.text),
        quorum_met: meetsQuorum(policy, cosigning),
        newest_witnessed: newest ? { tree_size: newest.row.tree_size, created_at: newest.row.created_at } : null,
        witnesses,
      };
    },

    lag,

    /** For /health/ready: undefined without a policy; stale when a checkpoint has waited longer than `maxAgeMs` for a witnessed successor. */
    async health(maxAgeMs: number) {
      const l = await lag();
      if (!l) return undefined;
      return {
        stale: l.unwitnessedMs > maxAgeMs,
        newest_witnessed: l.newestWitnessed,
        unwitnessed_since: l.unwitnessedSince,
        unwitnessed_seconds: Math.round(l.unwitnessedMs / 1000),
      };
    },
  };
}

export type Witnessing = ReturnType<typeof createWitnessing>;
