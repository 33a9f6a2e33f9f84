// Verifies an NDJSON export with no database, as an outside auditor would: the checkpoint's
// signature under a public key the auditor holds, then every record line against it (its
// leaf recomputed from the sealed form, its inclusion proof to the checkpoint's root, its API
// form consistent with its sealed form). Streams the file line by line: constant memory.
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { checkCheckpoint } from './checkpoint-check.js';
import { canonicalize } from './jcs.js';
import { InclusionChecker } from './merkle.js';
import { recordLeaf, type SealedRecord } from './sealed-form.js';
import type { NoteVerifier } from './signed-note.js';

export interface ExportVerifyReport {
  ok: boolean;
  /** Record lines whose inclusion proof verified. */
  records_checked: number;
  /** Record lines not yet covered by the checkpoint (no proof: nothing to check). */
  records_without_proof: number;
  tree_size: number;
  first_bad_id?: number;
  line?: number;
  problem?: string;
}

const FIELDS = ['id', 'actor_id', 'action', 'resource_type', 'resource_id', 'timestamp', 'result', 'metadata', 'ip', 'user_agent', 'request_id'] as const;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isPersonalRef = (v: unknown) => isObject(v) && Object.keys(v).length === 1 && typeof v.$personal === 'string';

/** The last line of a file, read from its end (the checkpoint line, which the proofs are against). */
export async function lastLine(path: string): Promise<string> {
  const file = await open(path, 'r');
  try {
    const { size } = await file.stat();
    let text = '';
    for (let end = size; end > 0; ) {
      const start = Math.max(0, end - 65_536);
      const buf = Buffer.alloc(end - start);
      await file.read(buf, 0, buf.length, start);
      text = buf.toString('utf8') + text;
      end = start;
      const trimmed = text.replace(/\n+$/, '');
      const cut = trimmed.lastIndexOf('\n');
      if (cut >= 0) return trimmed.slice(cut + 1);
      if (start === 0) return trimmed;
    }
    return '';
  } finally {
    await file.close();
  }
}

/**
 * The file's lines (LF or CRLF), a read's worth at a time. readline split a million-line export
 * with a regular expression that cost more than parsing the lines' JSON; a newline byte never
 * occurs inside a UTF-8 sequence, so splitting the bytes and decoding each line is exact.
 */
export async function* lineBatches(path: string): AsyncGenerator<string[]> {
  let rest: Buffer | undefined;
  const line = (buf: Buffer, start: number, end: number) => buf.toString('utf8', start, end > start && buf[end - 1] === CR ? end - 1 : end);
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    const buf = rest ? Buffer.concat([rest, chunk]) : chunk;
    const lines: string[] = [];
    let start = 0;
    for (let nl = buf.indexOf(LF); nl !== -1; nl = buf.indexOf(LF, start)) {
      lines.push(line(buf, start, nl));
      start = nl + 1;
    }
    rest = start < buf.length ? buf.subarray(start) : undefined;
    yield lines;
  }
  if (rest) yield [line(rest, 0, rest.length)];
}

const [LF, CR] = [0x0a, 0x0d];

/** Why a record's API form does not match the sealed form it claims, or undefined when it does. */
function apiFormProblem(record: unknown, sealed: SealedRecord): string | undefined {
  if (!isObject(record)) return 'its record is not an object';
  const keys = Object.keys(record);
  if (keys.length !== FIELDS.length || !FIELDS.every((f) => f in record)) return 'its record does not have exactly the API fields';
  for (const f of FIELDS) {
    if (f === 'metadata') continue;
    if (record[f] !== sealed[f]) return `its record and its sealed form differ in ${f}`;
  }
  const meta = record.metadata;
  if (!isObject(meta) || !isObject(sealed.metadata)) return 'its metadata is not an object';
  const sealedKeys = Object.keys(sealed.metadata);
  if (Object.keys(meta).length !== sealedKeys.length) return 'its record and its sealed form have different metadata keys';
  for (const k of sealedKeys) {
    const s = sealed.metadata[k];
    // A personal value is committed to by its ref; the value itself (or "[redacted]") cannot be checked here.
    const same = !Object.hasOwn(meta, k) ? false : isPersonalRef(s) ? typeof meta[k] === 'string' : meta[k] === s || (typeof s === 'object' && canonicalize(meta[k]) === canonicalize(s));
    if (!same) return `its record and its sealed form differ in metadata.${k}`;
  }
  return undefined;
}

/**
 * `complete`: the export must hold every record the checkpoint covers (seq 0 … size − 1),
 * whatever its trailer says about filters: the trailer is not signed, so only the auditor's
 * own expectation can make completeness a check.
 */
export async function verifyExportFile(path: string, verifiers: NoteVerifier[], onProgress?: (checked: number) => void, complete = false): Promise<ExportVerifyReport> {
  let checked = 0;
  let withoutProof = 0;
  let treeSize = 0;
  const fail = (problem: string, line?: number, id?: unknown): ExportVerifyReport => ({
    ok: false, records_checked: checked, records_without_proof: withoutProof, tree_size: treeSize,
    ...(typeof id === 'number' ? { first_bad_id: id } : {}), ...(line ? { line } : {}), problem,
  });

  let trailer: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(await lastLine(path));
    if (!isObject(parsed) || parsed.type !== 'checkpoint') return fail('the last line is not the export\'s checkpoint line');
    trailer = parsed;
  } catch {
    return fail('the last line is not the export\'s checkpoint line (not JSON)');
  }
  // Without a signed checkpoint nothing in the file is held to the key: records "not covered
  // yet" carry no proof, so a file stripped of its checkpoint, every record passed off as not
  // covered, would otherwise verify whatever it says. An export with no checkpoint proves nothing.
  if (typeof trailer.note !== 'string') return fail('the export carries no signed checkpoint: nothing in it can be checked against the key');
  const verdict = checkCheckpoint(trailer.note, verifiers);
  if (!verdict.ok) return fail(`the checkpoint: ${verdict.problem}`);
  treeSize = verdict.checkpoint.treeSize;
  const root = verdict.checkpoint.rootHash;
  if (trailer.tree_size !== treeSize || trailer.root_hash !== root.toString('base64')) return fail('the checkpoint line\'s fields disagree with its signed note');
  // Records come in seq order: the checker reuses what the previous record's path proved.
  const paths = new InclusionChecker(treeSize, root);
  const summary = isObject(trailer.export) ? trailer.export : {};
  const unfiltered = complete || (isObject(summary.filters) && Object.keys(summary.filters).length === 0);

  let lineNo = 0;
  let lastSeq = -1;
  let pendingStarted = false;
  let sawTrailer = false;
  for await (const lines of lineBatches(path)) for (const line of lines) {
    lineNo++;
    if (line === '') continue;
    if (sawTrailer) return fail('a line follows the checkpoint line', lineNo);
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      return fail('a line is not JSON', lineNo);
    }
    if (!isObject(entry)) return fail('a line is not a JSON object', lineNo);
    if (entry.type === 'checkpoint') {
      sawTrailer = true;
      continue;
    }
    const sealed = entry.sealed as SealedRecord;
    const id = isObject(entry.record) ? entry.record.id : undefined;
    if (entry.type !== 'record' || !isObject(sealed)) return fail('a line is neither a record nor the checkpoint', lineNo, id);
    const problem = apiFormProblem(entry.record, sealed);
    if (problem) return fail(`record ${String(id)}: ${problem}`, lineNo, id);
    if (entry.seq === null) {
      pendingStarted = true;
      withoutProof++;
      continue;
    }
    const seq = entry.seq;
    if (pendingStarted) return fail('a record with a proof follows records without one', lineNo, id);
    if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0 || seq >= treeSize) return fail(`record ${String(id)}: its seq is not in the checkpoint's tree`, lineNo, id);
    if (seq <= lastSeq) return fail(`record ${String(id)}: seq ${seq} is out of order`, lineNo, id);
    if (unfiltered && seq !== lastSeq + 1) return fail(`seq ${lastSeq + 1} is missing from an unfiltered export: a line was removed`, lineNo, id);
    lastSeq = seq;
    let leaf: Buffer;
    try {
      leaf = recordLeaf(sealed);
    } catch {
      return fail(`record ${String(id)}: its sealed form is not JSON that can be canonicalized`, lineNo, id);
    }
    if (entry.leaf_hash !== leaf.toString('base64')) return fail(`record ${String(id)} does not match its leaf hash`, lineNo, id);
    const path_ = entry.audit_path;
    if (!Array.isArray(path_) || !path_.every((h) => typeof h === 'string')) return fail(`record ${String(id)}: its audit path is malformed`, lineNo, id);
    if (!paths.verify(leaf, seq, path_)) {
      return fail(`record ${String(id)}: its inclusion proof does not lead to the checkpoint's root`, lineNo, id);
    }
    checked++;
    if (checked % 10_000 === 0) onProgress?.(checked);
  }
  if (!sawTrailer) return fail('the checkpoint line is missing');
  if (unfiltered && lastSeq !== treeSize - 1) return fail(`the export ends at seq ${lastSeq}, but the checkpoint covers ${treeSize} records: lines were removed`);
  if (typeof summary.records === 'number' && summary.records !== checked + withoutProof) {
    return fail(`the export says it holds ${summary.records} records, but has ${checked + withoutProof}: lines were removed or added`);
  }
  return { ok: true, records_checked: checked, records_without_proof: withoutProof, tree_size: treeSize };
}
