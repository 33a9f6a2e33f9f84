// What the log makes of witnesses' cosignature lines (C2SP tlog-cosignature, cosignature/v1): a
// line is kept only once it verifies under the key the policy names for its witness, and read
// again under the policy each time it is served (a stored row is evidence, not trusted state).
// A checkpoint is witnessed when the witnesses whose lines verify meet the policy's quorum.
// The note served carries the lines after the log's own signature line.
import { cosignatureTimestamp, verifyCosignature } from '../../../tlog/cosignature.js';
import { NoteError, splitNote, type SignatureLine } from '../../../tlog/note-format.js';
import { evaluateQuorum, type Policy, type PolicyWitness } from '../../../tlog/policy.js';

/** A cosignature as the JSON checkpoint shows it (docs/api.md 5.11). */
export interface PresentedCosignature {
  /** The witness's name, as in its vkey and the line. */
  name: string;
  /** The key ID: 8 hex digits, as in the witness's vkey. */
  key_id: string;
  /** The timestamp the cosignature signs, ISO 8601 UTC (whole seconds). */
  time: string;
  /** The Ed25519 signature alone (64 bytes), standard base64, as the checkpoint's own `signature`. */
  signature: string;
}

export interface CheckedCosignature extends PresentedCosignature {
  /** The signature line, without its newline. */
  line: string;
  /** Seconds since the epoch. */
  timestamp: number;
}

const TIMESTAMP_BYTES = 8;
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Reads one stored or received signature line (without its newline) against a checkpoint's text. */
function readLine(text: string, line: string): SignatureLine | undefined {
  try {
    return splitNote(`${text}\n${line}\n`).lines[0];
  } catch (err) {
    if (err instanceof NoteError) return undefined;
    throw err;
  }
}

function checked(s: SignatureLine, timestamp: number): CheckedCosignature {
  return {
    name: s.name,
    key_id: hex(s.keyHash),
    time: new Date(timestamp * 1000).toISOString(),
    signature: Buffer.from(s.signature.subarray(TIMESTAMP_BYTES)).toString('base64'),
    line: s.line,
    timestamp,
  };
}

export type LineVerdict = { ok: true; cosignature: CheckedCosignature } | { ok: false; problem: string; otherKey: boolean };

/**
 * Checks one line as `witness`'s cosignature of the checkpoint whose note text (without
 * signatures) is `text`: its name and key ID are the witness's, it verifies, and it is not
 * dated after `notAfter` (seconds), when given.
 */
export function checkLine(text: string, line: string, witness: PolicyWitness, notAfter?: number): LineVerdict {
  const s = readLine(text, line);
  if (!s) return { ok: false, problem: 'a malformed signature line', otherKey: false };
  const verdict = verifyCosignature(text, s, witness.verifier, notAfter);
  if (!verdict.ok) return { ok: false, problem: verdict.problem, otherKey: verdict.reason === 'other-key' };
  return { ok: true, cosignature: checked(s, verdict.timestamp) };
}

/**
 * The lines kept for a checkpoint that hold under the policy: each by one of its witnesses and
 * verifying. Without a policy there is no key to check them with: the lines are shown as kept
 * (each was checked when it came in).
 */
export function validCosignatures(text: string, lines: readonly string[], policy: Policy | undefined): CheckedCosignature[] {
  const out: CheckedCosignature[] = [];
  for (const line of lines) {
    if (!policy) {
      const s = readLine(text, line);
      const timestamp = s && cosignatureTimestamp(s.signature);
      if (s && timestamp !== undefined) out.push(checked(s, timestamp));
      continue;
    }
    for (const witness of policy.witnesses) {
      const verdict = checkLine(text, line, witness);
      if (verdict.ok) {
        out.push(verdict.cosignature);
        break;
      }
    }
  }
  return out;
}

/** Whether cosignatures by these witnesses meet the policy's quorum (never, without a policy). */
export function meetsQuorum(policy: Policy | undefined, cosignatures: readonly { name: string }[]): boolean {
  return policy !== undefined && evaluateQuorum(policy, cosignatures.map((c) => c.name)).met;
}

/** The log's signed note with the cosignature lines after its own signature line. */
export const cosignedNote = (note: string, cosignatures: readonly { line: string }[]): string => note + cosignatures.map((c) => `${c.line}\n`).join('');

/** The note's text: what its signatures sign (the note up to its signature lines). */
export function noteText(note: string): string {
  return splitNote(note).text;
}
