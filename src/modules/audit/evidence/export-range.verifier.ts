// The line checks of an export's offline verification (export.verifier.ts) over one byte range of
// the file: each line's JSON, each record's API form against its sealed form, its leaf, its
// inclusion proof to the checkpoint's root, and the order of seqs inside the range. Whatever
// needs the lines before the range (the seq before its first one, whether records without a
// proof or the checkpoint line came earlier) is left to the caller, who joins the ranges in file
// order, from what the report says of the range's first lines. The same function verifies a
// small file whole on the caller's thread and each range of a large one in a worker thread
// (export-range.worker.ts).
import { createReadStream } from 'node:fs';
import { canonicalize } from '../../../tlog/jcs.js';
import { InclusionChecker } from '../../../tlog/merkle.js';
import { SEALED_FIELDS as FIELDS, recordLeaf, type SealedRecord } from './record.sealed-form.js';

/** Bytes [start, end) of a file; no end: to the end of the file. Cut at line boundaries. */
export interface ByteRange {
  start: number;
  end?: number;
}

/** What a range is checked against: plain data, so that it can be handed to a worker thread. */
export interface RangeTask {
  path: string;
  range: ByteRange;
  treeSize: number;
  /** The checkpoint's root hash, base64. */
  rootHash: string;
  /** Seqs must be contiguous: an unfiltered export, or --complete. */
  unfiltered: boolean;
}

/** What a worker thread of verifyExportFile posts: its progress, then its report. */
export type RangeWorkerMessage = { type: 'progress'; checked: number } | { type: 'done'; report: RangeReport };

/** Line numbers here count from the range's first line (1). */
export interface RangeReport {
  /** Lines read, empty ones included: up to the problem's line when there is one. */
  lines: number;
  /** Record lines whose proof verified, and those without a proof, before the problem if any. */
  checked: number;
  withoutProof: number;
  /** The first non-empty line: it fails if the checkpoint line came in an earlier range. */
  firstLine?: number;
  /**
   * The first record line with a seq, where the checks against the records before the range
   * apply: records without a proof must not precede it, and its seq must follow the last one
   * before it. `seq` is set once the seq is known to be in the checkpoint's tree.
   */
  firstProven?: { line: number; id?: number; idText: string; withoutProofBefore: number; seq?: number };
  /** The last seq that passed the order checks. */
  lastSeq?: number;
  sawCheckpoint: boolean;
  /** The range's first problem: it stops there. */
  problem?: { line: number; problem: string; id?: number };
}

/** A JSON object (not null, not an array). */
export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isPersonalRef = (v: unknown) => isObject(v) && Object.keys(v).length === 1 && typeof v.$personal === 'string';
const [LF, CR] = [0x0a, 0x0d];

/**
 * A range's lines (LF or CRLF), a read's worth at a time. readline split a million-line export
 * with a regular expression that cost more than parsing the lines' JSON; a newline byte never
 * occurs inside a UTF-8 sequence, so splitting the bytes and decoding each line is exact.
 */
export async function* lineBatches(path: string, range: ByteRange = { start: 0 }): AsyncGenerator<string[]> {
  let rest: Buffer | undefined;
  const line = (buf: Buffer, start: number, end: number) => buf.toString('utf8', start, end > start && buf[end - 1] === CR ? end - 1 : end);
  const bytes = { start: range.start, ...(range.end !== undefined ? { end: range.end - 1 } : {}) }; // createReadStream's end is inclusive
  for await (const chunk of createReadStream(path, { ...bytes, highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
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

/** Why a record's API form does not match the sealed form it claims, or undefined when it does. */
/** Whether two JSON values are the same value; undefined when one cannot be canonicalized (a number beyond a double: a crafted line, reported, not thrown). */
function sameJson(a: unknown, b: unknown): boolean | undefined {
  try {
    return canonicalize(a) === canonicalize(b);
  } catch {
    return undefined;
  }
}

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
    const same = !Object.hasOwn(meta, k) ? false : isPersonalRef(s) ? typeof meta[k] === 'string' : meta[k] === s || (typeof s === 'object' && sameJson(meta[k], s));
    if (same === undefined) return 'its sealed form is not JSON that can be canonicalized';
    if (!same) return `its record and its sealed form differ in metadata.${k}`;
  }
  return undefined;
}

/** Verifies the range's lines, up to the first problem; `onProgress` every 10,000 records checked. */
export async function verifyRange(task: RangeTask, onProgress?: (checked: number) => void): Promise<RangeReport> {
  const { treeSize, unfiltered } = task;
  const report: RangeReport = { lines: 0, checked: 0, withoutProof: 0, sawCheckpoint: false };
  const stop = (problem: string, id?: unknown): RangeReport => {
    report.problem = { line: report.lines, problem, ...(typeof id === 'number' ? { id } : {}) };
    return report;
  };
  // Records come in seq order: the checker reuses what the previous record's path proved.
  const paths = new InclusionChecker(treeSize, Buffer.from(task.rootHash, 'base64'));
  /** Undefined until the range's first record with a seq: the one before it lies in an earlier range. */
  let lastSeq: number | undefined;

  for await (const lines of lineBatches(task.path, task.range)) for (const line of lines) {
    report.lines++;
    if (line === '') continue;
    report.firstLine ??= report.lines;
    if (report.sawCheckpoint) return stop('a line follows the checkpoint line');
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      return stop('a line is not JSON');
    }
    if (!isObject(entry)) return stop('a line is not a JSON object');
    if (entry.type === 'checkpoint') {
      report.sawCheckpoint = true;
      continue;
    }
    const sealed = entry.sealed as SealedRecord;
    const id = isObject(entry.record) ? entry.record.id : undefined;
    if (entry.type !== 'record' || !isObject(sealed)) return stop('a line is neither a record nor the checkpoint', id);
    const problem = apiFormProblem(entry.record, sealed);
    if (problem) return stop(`record ${String(id)}: ${problem}`, id);
    if (entry.seq === null) {
      report.withoutProof++;
      continue;
    }
    const seq = entry.seq;
    if (lastSeq === undefined) {
      report.firstProven = { line: report.lines, idText: String(id), withoutProofBefore: report.withoutProof, ...(typeof id === 'number' ? { id } : {}) };
    }
    if (report.withoutProof > 0) return stop('a record with a proof follows records without one', id);
    if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0 || seq >= treeSize) return stop(`record ${String(id)}: its seq is not in the checkpoint's tree`, id);
    if (lastSeq === undefined) report.firstProven!.seq = seq;
    else if (seq <= lastSeq) return stop(`record ${String(id)}: seq ${seq} is out of order`, id);
    else if (unfiltered && seq !== lastSeq + 1) return stop(`seq ${lastSeq + 1} is missing from an unfiltered export: a line was removed`, id);
    lastSeq = seq;
    report.lastSeq = seq;
    let leaf: Buffer;
    try {
      leaf = recordLeaf(sealed);
    } catch {
      return stop(`record ${String(id)}: its sealed form is not JSON that can be canonicalized`, id);
    }
    if (entry.leaf_hash !== leaf.toString('base64')) return stop(`record ${String(id)} does not match its leaf hash`, id);
    const path_ = entry.audit_path;
    if (!Array.isArray(path_) || !path_.every((h) => typeof h === 'string')) return stop(`record ${String(id)}: its audit path is malformed`, id);
    if (!paths.verify(leaf, seq, path_)) return stop(`record ${String(id)}: its inclusion proof does not lead to the checkpoint's root`, id);
    report.checked++;
    if (report.checked % 10_000 === 0) onProgress?.(report.checked);
  }
  return report;
}
