// A checkpoint as the API shows it: every hash in standard base64, as in the note.
import type { CheckpointRow } from './evidence.repository.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

export function presentCheckpoint(c: CheckpointRow) {
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

