// The witness's side of C2SP tlog-witness (C2SP/C2SP tlog-witness.md, https://c2sp.org/tlog-witness):
// reads an add-checkpoint request, checks it against the state the witness holds for the log,
// and decides the answer. Pure: no files, no sockets. The caller persists `next` before it sends
// a 200, and runs one request per log at a time, since the spec requires the check of `old` and
// the update of the state to be atomic.
import { decodeBase64Strict, equalBytes } from './bytes.js';
import { cosignCheckpoint, type Cosigner } from './cosignature.js';
import { EMPTY_ROOT, asHash, verifyConsistency, type Hash } from './merkle.js';
import { NoteError, splitNote } from './note-format.js';
import { openNote, parseCheckpoint, parseVerifierKey, type Checkpoint, type NoteVerifier } from './signed-note.js';

/** The spec's limit on consistency proof lines. */
export const MAX_PROOF_LINES = 63;
/** The media type of a 409's body: the witness's size, in decimal, and a newline. */
export const SIZE_CONTENT_TYPE = 'text/x.tlog.size';

/** A log the witness cosigns for: its origin line, and the keys whose signature it accepts. */
export interface WitnessedLog { origin: string; verifiers: NoteVerifier[] }

/** What the witness holds for one log: the latest checkpoint it cosigned (size 0 and the empty root before the first). */
export interface WitnessState { size: number; root: Hash }

export const INITIAL_STATE: WitnessState = { size: 0, root: EMPTY_ROOT };

export interface AddCheckpointRequest {
  old: number;
  proof: Hash[];
  /** The signed note, as sent. */
  note: string;
  /** Its text (without signature lines), read as a checkpoint. */
  text: string;
  checkpoint: Checkpoint;
}

export type WitnessAnswer =
  | { status: 200; body: string; next: WitnessState; changed: boolean }
  | { status: 409; size: number; body: string }
  | { status: 400 | 403 | 404 | 422; body: string };

const refuse = (status: 400 | 403 | 404 | 422, problem: string): WitnessAnswer => ({ status, body: `${problem}\n` });
const conflict = (size: number): WitnessAnswer => ({ status: 409, size, body: `${size}\n` });

/**
 * Reads an add-checkpoint body: `old <size>`, up to 63 base64 hashes, an empty line, then the
 * signed checkpoint. Anything else is a 400 (answered as a string: the problem).
 */
export function parseAddCheckpoint(body: Uint8Array): AddCheckpointRequest | string {
  let str: string;
  try {
    str = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(body);
  } catch {
    return 'the body is not valid UTF-8';
  }
  const blank = str.indexOf('\n\n');
  if (blank < 0) return 'the body needs an old size line, the proof lines, an empty line and a checkpoint';
  const [oldLine = '', ...proofLines] = str.slice(0, blank).split('\n');
  const oldMatch = /^old (0|[1-9][0-9]*)$/.exec(oldLine);
  const old = oldMatch ? Number(oldMatch[1]) : Number.NaN;
  if (!Number.isSafeInteger(old)) return 'the first line must be "old <size>", in decimal without leading zeros';
  if (proofLines.length > MAX_PROOF_LINES) return `at most ${MAX_PROOF_LINES} consistency proof lines`;
  const proof: Hash[] = [];
  for (const [i, line] of proofLines.entries()) {
    const hash = decodeBase64Strict(line);
    if (!hash || hash.length !== 32) return `consistency proof line ${i + 1} is not a 32-byte hash in base64`;
    proof.push(asHash(hash));
  }
  const note = str.slice(blank + 2);
  try {
    const { text } = splitNote(note);
    return { old, proof, note, text, checkpoint: parseCheckpoint(text) };
  } catch (err) {
    if (err instanceof NoteError) return err.message;
    throw err;
  }
}

/** Whether one of the log's keys signed the note; a signature by a known key that fails is a failure. */
function signedByLog(note: string, log: WitnessedLog): boolean {
  try {
    return openNote(note, log.verifiers).signatures.some((s) => s.verifiedBy !== undefined);
  } catch (err) {
    if (err instanceof NoteError) return false;
    throw err;
  }
}

/**
 * The spec's checks, in its order: a known origin (404), the log's signature (403), old not past
 * the checkpoint's size (400), old equal to the size held (409, with it), the same root when the
 * sizes are equal (409), the consistency proof (422). Then the cosignature, dated `now` (seconds).
 */
export function addCheckpoint(
  request: AddCheckpointRequest, log: WitnessedLog | undefined, state: WitnessState, cosigner: Cosigner, now: number,
): WitnessAnswer {
  const { old, proof, checkpoint } = request;
  if (!log || log.origin !== checkpoint.origin) return refuse(404, `unknown log origin "${checkpoint.origin}"`);
  if (!signedByLog(request.note, log)) return refuse(403, `no signature by a key of the log "${log.origin}" verifies`);
  if (old > checkpoint.treeSize) return refuse(400, `old size ${old} is greater than the checkpoint's size ${checkpoint.treeSize}`);
  if (old !== state.size) return conflict(state.size);
  if (old === checkpoint.treeSize) {
    // The spec answers 409 here too: the witness cosigned another root at this size.
    if (!equalBytes(checkpoint.rootHash, state.root)) return conflict(state.size);
    if (proof.length > 0) return refuse(422, 'the consistency proof between equal sizes must be empty');
  } else if (!verifyConsistency(old, checkpoint.treeSize, state.root, checkpoint.rootHash, proof)) {
    return refuse(422, `the consistency proof from size ${old} to ${checkpoint.treeSize} does not verify`);
  }
  const next: WitnessState = { size: checkpoint.treeSize, root: checkpoint.rootHash };
  return { status: 200, body: cosignCheckpoint(request.text, cosigner, now), next, changed: next.size !== state.size };
}

/**
 * Reads the logs a witness cosigns for from a file in C2SP tlog-policy syntax: its `log <vkey>
 * [<url>]` lines, each log's origin being its key's name; blank lines and lines starting with `#`
 * are skipped; a log named twice trusts each key. Throws an Error naming the line of the first problem.
 */
export function parseWitnessedLogs(text: string): WitnessedLog[] {
  const logs = new Map<string, WitnessedLog>();
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.trim() === '' || line.startsWith('#')) continue;
    const [keyword, vkey, ...rest] = line.split(' ');
    // A tlog-policy file names witnesses, groups and a quorum too: what a log asks of its
    // witnesses, not what this witness needs. Only its `log` lines are read.
    if (keyword === 'witness' || keyword === 'group' || keyword === 'quorum') continue;
    if (keyword !== 'log' || vkey === undefined || rest.length > 1) throw new Error(`line ${i + 1}: expected "log <vkey> [<url>]"`);
    let verifier: NoteVerifier;
    try {
      verifier = parseVerifierKey(vkey);
    } catch (err) {
      throw new Error(`line ${i + 1}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    // The log's origin is its key's name, as a checkpoint's signature line names it.
    const origin = verifier.name;
    const log = logs.get(origin) ?? { origin, verifiers: [] };
    log.verifiers.push(verifier);
    logs.set(origin, log);
  }
  if (logs.size === 0) throw new Error('it names no log (a "log <vkey>" line)');
  return [...logs.values()];
}
