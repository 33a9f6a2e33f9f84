// Checks one checkpoint note: well formed, signed by the given key, saying what it is claimed
// to say, and chained to the note before it (docs/audit-integrity.md §4–5). Shared by the
// database verifier, the offline verifier of exports and `verify --checkpoint`.
import { createHash } from 'node:crypto';
import type { Hash } from './merkle.js';
import { NoteError, openNote, parseCheckpoint, type Checkpoint, type NoteVerifier } from './signed-note.js';

/** SHA-256 of a checkpoint's whole signed note: what the next one's `prev` line names. */
export const noteHash = (note: string): Hash => createHash('sha256').update(note, 'utf8').digest();

export interface CheckpointClaim {
  treeSize?: number;
  rootHash?: Hash;
  /** The raw Ed25519 signature stored beside the note. */
  signature?: Buffer;
  /** The previous checkpoint's whole note (null: this is the first one; undefined: not checked). */
  previousNote?: string | null;
  origin?: string;
}

export type CheckpointVerdict = { ok: true; checkpoint: Checkpoint; signature: Buffer } | { ok: false; problem: string };

export function checkCheckpoint(note: string, verifiers: NoteVerifier[], claim: CheckpointClaim = {}): CheckpointVerdict {
  let checkpoint: Checkpoint;
  let signature: Buffer | undefined;
  try {
    const opened = openNote(note, verifiers);
    signature = opened.signatures.find((s) => s.verifiedBy)?.signature;
    checkpoint = parseCheckpoint(opened.text);
  } catch (err) {
    if (err instanceof NoteError) return { ok: false, problem: err.code === 'invalid-signature' ? 'its signature does not verify' : err.message };
    throw err;
  }
  if (!signature) return { ok: false, problem: 'it is not signed by the expected key' };
  if (claim.signature && !claim.signature.equals(signature)) return { ok: false, problem: 'its stored signature is not the one in its note' };
  if (claim.origin !== undefined && checkpoint.origin !== claim.origin) return { ok: false, problem: `its origin is "${checkpoint.origin}", not "${claim.origin}"` };
  if (claim.treeSize !== undefined && checkpoint.treeSize !== claim.treeSize) return { ok: false, problem: `its note says tree size ${checkpoint.treeSize}, its row ${claim.treeSize}` };
  if (claim.rootHash && !claim.rootHash.equals(checkpoint.rootHash)) return { ok: false, problem: 'its note and its row disagree on the root hash' };
  if (claim.previousNote !== undefined) {
    const prev = checkpoint.extensions.find((e) => e.startsWith('prev '))?.slice(5);
    const expected = claim.previousNote === null ? undefined : noteHash(claim.previousNote).toString('base64');
    if (prev !== expected) return { ok: false, problem: expected ? 'its prev line does not name the checkpoint before it' : 'it names a previous checkpoint, but none precedes it' };
  }
  return { ok: true, checkpoint, signature };
}
