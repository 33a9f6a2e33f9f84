// Verify, in the browser with Web Crypto only (docs/api.md section 5, item 4): the record shown is the
// one the log sealed, its leaf is in the tree a signed checkpoint names, and the checkpoint is
// signed by a key the log publishes. Each step that fails is named; nothing is taken from the
// server on trust but the public keys themselves (which docs/console.md says to compare with a
// copy held elsewhere). The formats and the RFCs' algorithms are src/tlog/'s runtime-neutral
// modules, the ones the server and the offline verifier use; only the hashing and the Ed25519
// check are the browser's own (webcrypto.ts).
import { decodeBase64Strict, encodeBase64, equalBytes, utf8Bytes } from '../../src/tlog/bytes.js';
import { canonicalize } from '../../src/tlog/jcs.js';
import { leafHashWith, rootFromInclusionPath } from '../../src/tlog/merkle-path.js';
import { parseCheckpoint, signaturesBy, signedMessage, splitNote, verifierKeyWith, type CheckpointBody, type NoteParts, type VerifierKeyText } from '../../src/tlog/note-format.js';
import type { AuditRecord, CheckpointJson, ConsoleApi, InclusionProof } from './api.js';
import { ApiError } from './api.js';
import { ed25519Verify, sha256, subtle } from './webcrypto.js';
import { checkCosignatures, type WitnessReport } from './witnesses.js';

export type Step = 'proof' | 'sealed form' | 'leaf hash' | 'checkpoint' | 'audit path' | 'signature' | 'witnesses';

export type Verdict =
  | { kind: 'verified'; treeSize: number; seq: number; keyId: string; keyName: string; checkpointTime: string; witnesses: WitnessReport }
  | { kind: 'failed'; step: Step; reason: string }
  | { kind: 'not-sealed' }
  | { kind: 'insecure' }
  /** Could not be checked at all (the service did not answer, or refused for another reason). */
  | { kind: 'error'; reason: string };

/** The fields of a sealed form: exactly the API's (src/modules/audit/evidence/record.sealed-form.ts). */
const SEALED_FIELDS = ['id', 'actor_id', 'action', 'resource_type', 'resource_id', 'timestamp', 'result', 'metadata', 'ip', 'user_agent', 'request_id'] as const;

class StepFailure extends Error {
  constructor(
    readonly step: Step,
    reason: string,
  ) {
    super(reason);
  }
}

const fail = (step: Step, reason: string): never => {
  throw new StepFailure(step, reason);
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A personal value as the sealed form holds it: {"$personal": "<keyed hash>"}. */
const isPersonal = (v: unknown): boolean => isObject(v) && Object.keys(v).length === 1 && typeof v.$personal === 'string';

const show = (v: unknown) => (v === undefined ? 'nothing' : JSON.stringify(v));

/**
 * Where the sealed form and the record shown disagree, or undefined. A personal value is sealed
 * as its keyed hash, which only the service's key can recompute: the record may show the value or
 * "[redacted]" there, any string, but not another shape.
 */
function disagreement(sealed: unknown, shown: unknown, where: string): string | undefined {
  if (isPersonal(sealed)) return typeof shown === 'string' ? undefined : `${where} is a personal value in the sealed form, ${show(shown)} on the record shown`;
  if (isObject(sealed) && isObject(shown)) {
    const keys = new Set([...Object.keys(sealed), ...Object.keys(shown)]);
    for (const k of [...keys].sort()) {
      const d = disagreement(sealed[k], shown[k], `${where}.${k}`);
      if (d) return d;
    }
    return undefined;
  }
  let same: boolean;
  try {
    same = canonicalize(sealed) === canonicalize(shown);
  } catch {
    same = false;
  }
  return same ? undefined : `${where} is ${show(sealed)} in the sealed form, ${show(shown)} on the record shown`;
}

function checkSealedForm(sealed: Record<string, unknown>, record: AuditRecord): void {
  const keys = Object.keys(sealed).sort().join(',');
  if (keys !== [...SEALED_FIELDS].sort().join(',')) fail('sealed form', `the sealed form has the fields ${Object.keys(sealed).join(', ')}, not the record's`);
  const shown = record as unknown as Record<string, unknown>;
  for (const field of SEALED_FIELDS) {
    const d = disagreement(sealed[field], shown[field], field);
    if (d) fail('sealed form', d);
  }
}

async function proofFor(api: ConsoleApi, id: number, treeSize?: number): Promise<InclusionProof | undefined> {
  try {
    return await api.proof(id, treeSize);
  } catch (err) {
    // 409: the service found its stored evidence changed and will not serve a proof from it.
    if (err instanceof ApiError && err.status === 409) return fail('proof', `the service refuses to prove this record: ${err.detail}`);
    throw err;
  }
}

async function run(api: ConsoleApi, record: AuditRecord): Promise<Verdict> {
  const keysRequest = api.publicKeys();
  const policyRequest = api.witnesses();
  // Settled now, so that an error is not left unhandled while the proof is read.
  policyRequest.catch(() => undefined);
  let proof = await proofFor(api, record.id);
  if (!proof) return { kind: 'not-sealed' };
  const checkpoint: CheckpointJson | undefined = await api.latestCheckpoint();
  if (!checkpoint) return fail('checkpoint', 'the service has a proof but no signed checkpoint');
  // A checkpoint signed between the two requests: the proof again, against it.
  if (checkpoint.tree_size > proof.tree_size) proof = (await proofFor(api, record.id, checkpoint.tree_size)) ?? fail('proof', 'the proof went missing');
  const keys = await keysRequest;

  // 1. The sealed form is the record shown.
  if (proof.id !== record.id || proof.sealed.id !== record.id) fail('sealed form', `the proof is of record ${String(proof.sealed.id)}, not ${record.id}`);
  checkSealedForm(proof.sealed, record);

  // 2. Its leaf: SHA-256(0x00 ‖ JCS bytes).
  let canonical: string;
  try {
    canonical = canonicalize(proof.sealed);
  } catch (err) {
    return fail('leaf hash', `the sealed form has no canonical JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  const leaf = await leafHashWith(sha256, utf8Bytes(canonical));
  if (encodeBase64(leaf) !== proof.leaf_hash) fail('leaf hash', `the sealed form hashes to ${encodeBase64(leaf)}, the proof says ${proof.leaf_hash}`);

  // 3. The checkpoint: its note well formed, of the size the proof is against.
  let body: CheckpointBody;
  let note: NoteParts;
  try {
    note = splitNote(checkpoint.note);
    body = parseCheckpoint(note.text);
  } catch (err) {
    return fail('checkpoint', err instanceof Error ? err.message : String(err));
  }
  if (body.treeSize !== proof.tree_size) fail('checkpoint', `the checkpoint covers ${body.treeSize} records, the proof ${proof.tree_size}`);
  if (checkpoint.root_hash !== encodeBase64(body.rootHash)) fail('checkpoint', 'the checkpoint\'s root hash is not the one in its signed note');

  // 4. The audit path leads from the leaf to the checkpoint's root.
  const path = proof.audit_path.map((h) => decodeBase64Strict(h));
  if (path.some((h) => !h || h.length !== 32)) fail('audit path', 'the audit path holds a hash that is not 32 bytes of base64');
  const root = await rootFromInclusionPath(sha256, leaf, proof.seq, proof.tree_size, path as Uint8Array[]);
  if (!root) fail('audit path', `the audit path has the wrong length for record ${proof.seq} of ${proof.tree_size}`);
  if (!equalBytes(root!, body.rootHash)) fail('audit path', 'the audit path does not lead to the checkpoint\'s root hash');

  // 5. The note is signed by a key the log publishes: every signature line by that key (name and
  // key hash) verifies with Ed25519, as Go's note.Open and src/tlog/signed-note.ts's openNote ask.
  for (const published of keys) {
    if (published.algorithm !== 'Ed25519') continue;
    let key: VerifierKeyText;
    try {
      key = await verifierKeyWith(sha256, published.note_verifier_key);
    } catch (err) {
      return fail('signature', `the published key ${published.key_id} (${JSON.stringify(published.note_verifier_key)}) is refused: ${err instanceof Error ? err.message : String(err)}`);
    }
    const signatures = signaturesBy(note, key.name, key.keyHash);
    if (signatures.length === 0) continue;
    const message = signedMessage(note.text);
    for (const s of signatures) {
      if (!(await ed25519Verify(key.publicKey, s.signature, message))) fail('signature', `the checkpoint's signature by ${published.key_id} does not verify`);
    }
    // 6. The witnesses' cosignatures on this checkpoint, against the policy's keys.
    const witnesses = await checkCosignatures(note, await policyRequest, checkpoint.witnessed === true);
    if (witnesses.kind === 'bad') fail('witnesses', witnesses.reason);
    return { kind: 'verified', treeSize: body.treeSize, seq: proof.seq, keyId: published.key_id, keyName: key.name, checkpointTime: checkpoint.created_at, witnesses };
  }
  return fail('signature', 'the checkpoint carries no signature by a key in /audit-logs/public-keys');
}

/** Runs every step; never throws. */
export async function verifyRecord(api: ConsoleApi, record: AuditRecord): Promise<Verdict> {
  if (!subtle()) return { kind: 'insecure' };
  try {
    return await run(api, record);
  } catch (err) {
    if (err instanceof StepFailure) return { kind: 'failed', step: err.step, reason: err.message };
    return { kind: 'error', reason: err instanceof Error ? err.message : String(err) };
  }
}
