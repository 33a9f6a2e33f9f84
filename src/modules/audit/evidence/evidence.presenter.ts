// A checkpoint as the API shows it: every hash in standard base64, as in the note.
import type { PresentedCosignature } from './cosignature.checker.js';
import type { CheckpointRow } from './evidence.repository.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

/** What witnessing adds (witnessing.service.ts): the cosignatures, whether they meet the quorum, and the note carrying them. */
export interface CheckpointWitnessing {
  cosignatures: readonly PresentedCosignature[];
  witnessed: boolean;
  note: string;
}

export function presentCheckpoint(c: CheckpointRow): ReturnType<typeof presentSigned>;
export function presentCheckpoint(c: CheckpointRow, witnessing: CheckpointWitnessing): ReturnType<typeof presentSigned> & { cosignatures: PresentedCosignature[]; witnessed: boolean };
export function presentCheckpoint(c: CheckpointRow, witnessing?: CheckpointWitnessing) {
  const signed = presentSigned(c);
  if (!witnessing) return signed;
  return {
    ...signed,
    // The log's own signature line first, then the witnesses'.
    note: witnessing.note,
    cosignatures: witnessing.cosignatures.map(({ name, key_id, time, signature }) => ({ name, key_id, time, signature })),
    witnessed: witnessing.witnessed,
  };
}

function presentSigned(c: CheckpointRow) {
  return {
    origin: c.note.slice(0, c.note.indexOf('\n')),
    tree_size: c.tree_size,
    root_hash: b64(c.root_hash),
    prev_checkpoint_hash: c.prev_checkpoint_hash ? b64(c.prev_checkpoint_hash) : null,
    key_id: c.key_id,
    signature: b64(c.signature),
    created_at: c.created_at,
    note: c.note,
  };
}
