// Offline proofs that an entry is in the log, C2SP tlog-proof (https://c2sp.org/tlog-proof),
// `c2sp.org/tlog-proof@v1`: a header line, optional `extra` data in base64, the entry's `index`,
// its RFC 6962 inclusion path (one base64 hash a line, from the leaf's sibling up), a blank line,
// then the checkpoint's signed note verbatim, with the log's signature and the witnesses'
// cosignatures. Checked with nothing else than the entry and a tlog-policy: no database, no network.
//
// Reading is strict, like the notes': a proof is either exactly well formed or refused.
import { decodeBase64Strict, encodeBase64 } from './bytes.js';
import { leafHash, verifyInclusion, type Hash } from './merkle.js';
import { HASH_BYTES } from './merkle-path.js';
import { NoteError, splitNote } from './note-format.js';
import { verifyCheckpointWithPolicy, type Policy, type PolicyCheckOptions, type QuorumVerdict } from './policy.js';
import type { Checkpoint } from './signed-note.js';

export const TLOG_PROOF_HEADER = 'c2sp.org/tlog-proof@v1';
/** The file extension the spec recommends. */
export const TLOG_PROOF_EXTENSION = '.tlog-proof';

export interface TlogProof {
  /** Opaque, unauthenticated application data; absent when the proof has no `extra` line. */
  extra?: Buffer;
  index: number;
  /** The inclusion path, leaf's sibling first, each 32 bytes. */
  inclusionPath: Buffer[];
  /** The checkpoint's whole signed note, ending with a newline. */
  checkpoint: string;
}

export class ProofError extends Error {
  /** 1-based line of the proof, when the problem is on one. */
  readonly line?: number;
  constructor(message: string, line?: number) {
    super(line === undefined ? `malformed tlog proof: ${message}` : `malformed tlog proof, line ${line}: ${message}`);
    this.name = 'ProofError';
    this.line = line;
  }
}

const INDEX = /^index (0|[1-9][0-9]*)$/;

export function formatTlogProof(proof: TlogProof): string {
  if (!Number.isSafeInteger(proof.index) || proof.index < 0) throw new ProofError('the index must be a non-negative safe integer');
  if (proof.inclusionPath.some((h) => h.length !== HASH_BYTES)) throw new ProofError(`an inclusion path hash is ${HASH_BYTES} bytes`);
  try {
    splitNote(proof.checkpoint);
  } catch (err) {
    if (err instanceof NoteError) throw new ProofError(`the checkpoint is not a signed note: ${err.message}`);
    throw err;
  }
  return [
    `${TLOG_PROOF_HEADER}\n`,
    proof.extra === undefined ? '' : `extra ${encodeBase64(proof.extra)}\n`,
    `index ${proof.index}\n`,
    ...proof.inclusionPath.map((h) => `${encodeBase64(h)}\n`),
    '\n',
    proof.checkpoint,
  ].join('');
}

/**
 * Reads a proof. Bytes are accepted so that invalid UTF-8 is refused rather than decoded to
 * U+FFFD. The checkpoint part must be a well-formed signed note; its signatures are not checked
 * here (verifyTlogProof does that).
 */
export function parseTlogProof(input: string | Uint8Array): TlogProof {
  let text: string;
  if (typeof input === 'string') {
    text = input;
  } else {
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(input);
    } catch {
      throw new ProofError('not valid UTF-8');
    }
  }
  // The header, extra, index and hash lines hold no blank line; the first one ends them.
  const blank = text.indexOf('\n\n');
  if (blank < 0) throw new ProofError('no blank line before the checkpoint');
  const lines = text.slice(0, blank).split('\n');
  const checkpoint = text.slice(blank + 2);

  if (lines[0] !== TLOG_PROOF_HEADER) throw new ProofError(`the first line must be ${JSON.stringify(TLOG_PROOF_HEADER)}`, 1);
  let at = 1;
  let extra: Buffer | undefined;
  if (lines[at]?.startsWith('extra ')) {
    const bytes = decodeBase64Strict(lines[at]!.slice('extra '.length));
    if (!bytes) throw new ProofError('the extra data is not standard base64', at + 1);
    extra = Buffer.from(bytes);
    at++;
  }
  const index = INDEX.exec(lines[at] ?? '')?.[1];
  if (index === undefined) throw new ProofError('expected "index <n>", in decimal without leading zeros', at + 1);
  if (!Number.isSafeInteger(Number(index))) throw new ProofError('the index is too large', at + 1);
  at++;
  const inclusionPath = lines.slice(at).map((line, i) => {
    const hash = decodeBase64Strict(line);
    if (!hash || hash.length !== HASH_BYTES) throw new ProofError(`an inclusion path line must be a ${HASH_BYTES}-byte hash in standard base64`, at + i + 1);
    return Buffer.from(hash);
  });
  try {
    splitNote(checkpoint);
  } catch (err) {
    if (err instanceof NoteError) throw new ProofError(`the checkpoint is not a signed note: ${err.message}`);
    throw err;
  }
  return extra === undefined ? { index: Number(index), inclusionPath, checkpoint } : { extra, index: Number(index), inclusionPath, checkpoint };
}

/** The logged entry, or its leaf hash when the caller computed it (how is application-specific). */
export type ProofLeaf = { entry: Uint8Array } | { leafHash: Hash };

export type TlogProofVerdict =
  | { ok: true; checkpoint: Checkpoint; index: number; cosignatures: Array<{ witness: string; timestamp: number }> }
  | { ok: false; problem: string; quorum?: QuorumVerdict };

/**
 * The spec's verification: the leaf hash (from the entry given, never implicitly from the
 * unauthenticated `extra`, though an application whose extra is the entry may pass it, as its
 * inclusion then authenticates it); the checkpoint signed by a policy log named as its origin;
 * the cosignatures of the policy's witnesses verified and meeting its quorum; and the inclusion
 * path from that leaf at `index` to the checkpoint's root hash.
 */
export function verifyTlogProof(proof: TlogProof, leaf: ProofLeaf, policy: Policy, options: PolicyCheckOptions = {}): TlogProofVerdict {
  const checked = verifyCheckpointWithPolicy(proof.checkpoint, policy, options);
  if (!checked.ok) return checked;
  const { checkpoint } = checked;
  if (proof.index >= checkpoint.treeSize) return { ok: false, problem: `index ${proof.index} is not in a tree of ${checkpoint.treeSize} entries` };
  const hash = 'entry' in leaf ? leafHash(leaf.entry) : leaf.leafHash;
  if (!verifyInclusion(hash, proof.index, checkpoint.treeSize, proof.inclusionPath, checkpoint.rootHash)) {
    return { ok: false, problem: `the inclusion path does not lead from entry ${proof.index} to the checkpoint's root hash` };
  }
  return { ok: true, checkpoint, index: proof.index, cosignatures: checked.cosignatures };
}
