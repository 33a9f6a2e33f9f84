// Verifies an NDJSON export with no database, as an outside auditor would: the checkpoint's
// signature under a public key the auditor holds, then every record line against it (its
// leaf recomputed from the sealed form, its inclusion proof to the checkpoint's root, its API
// form consistent with its sealed form). The line checks (export-range.verifier.ts) run over byte ranges
// of the file cut at line boundaries, a worker thread each, so that a large export uses every
// core; a small one is one range, verified on this thread. The ranges' reports are joined here in
// file order, with the checks that need the lines before a range: the result is the one a
// single pass over the file gives. Each range is streamed: constant memory.
import { open, stat, type FileHandle } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { moduleWorker } from '../../../process/module-worker.js';
import { checkCheckpoint } from '../../../tlog/checkpoint-check.js';
import type { NoteVerifier } from '../../../tlog/signed-note.js';
import { isObject, verifyRange, type ByteRange, type RangeReport, type RangeTask, type RangeWorkerMessage } from './export-range.verifier.js';

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

export interface ExportVerifyOptions {
  /**
   * How many byte ranges, each verified by a worker thread of its own (fewer when the file has
   * fewer lines); 1 verifies on the caller's thread. By default one per core, up to MAX_WORKERS,
   * for a file of at least two MIN_RANGE_BYTES; 1 below.
   */
  workers?: number;
}

/**
 * A worker thread takes some 65 ms to start, and its code then runs cold (a single pass warms up
 * as it goes, and two busy workers leave V8's background compiler no core of its own): on this
 * 2-core machine two workers were slower than one thread up to about 30,000 lines of 1.5 KB
 * (45 MB), even at 50,000 (77 MB), 1.4 times faster at 100,000, 1.8 at a million.
 */
const MIN_RANGE_BYTES = 40 << 20;
/** Each worker holds a heap of its own (some 50 MB while it runs), and reads its range from the same disk. */
const MAX_WORKERS = 8;

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
 * The file cut into at most `count` byte ranges of about equal size, each cut just after a newline
 * so that every line lies whole in one range (fewer ranges when the file has fewer lines). The
 * last runs to the end of the file, as a single pass would read it.
 */
export async function lineRanges(path: string, count: number): Promise<ByteRange[]> {
  const file = await open(path, 'r');
  try {
    const { size } = await file.stat();
    const starts = [0];
    const buf = Buffer.alloc(65_536);
    for (let k = 1; k < count; k++) {
      const start = await nextLineStart(file, Math.max(Math.floor((size * k) / count), starts.at(-1)!), buf);
      if (start === undefined || start >= size) break;
      starts.push(start);
    }
    return starts.map((start, i) => (i + 1 < starts.length ? { start, end: starts[i + 1]! } : { start }));
  } finally {
    await file.close();
  }
}

/** The offset just after the first newline at or after `from`; undefined when none follows. */
async function nextLineStart(file: FileHandle, from: number, buf: Buffer): Promise<number | undefined> {
  for (let pos = from; ; ) {
    const { bytesRead } = await file.read(buf, 0, buf.length, pos);
    if (bytesRead === 0) return undefined;
    const nl = buf.subarray(0, bytesRead).indexOf(0x0a);
    if (nl !== -1) return pos + nl + 1;
    pos += bytesRead;
  }
}

const defaultWorkers = (size: number) => Math.max(1, Math.min(availableParallelism(), MAX_WORKERS, Math.floor(size / MIN_RANGE_BYTES)));

/** A failed verification, with the counts of what verified before the problem. */
function failure(counts: { checked: number; withoutProof: number; treeSize: number }, problem: string, line?: number, id?: unknown): ExportVerifyReport {
  return {
    ok: false, records_checked: counts.checked, records_without_proof: counts.withoutProof, tree_size: counts.treeSize,
    ...(typeof id === 'number' ? { first_bad_id: id } : {}), ...(line ? { line } : {}), problem,
  };
}

/**
 * `complete`: the export must hold every record the checkpoint covers (seq 0 … size − 1),
 * whatever its trailer says about filters: the trailer is not signed, so only the auditor's
 * own expectation can make completeness a check.
 */
export async function verifyExportFile(
  path: string, verifiers: NoteVerifier[], onProgress?: (checked: number) => void, complete = false, options: ExportVerifyOptions = {},
): Promise<ExportVerifyReport> {
  if (options.workers !== undefined && !(Number.isSafeInteger(options.workers) && options.workers >= 1)) throw new RangeError(`workers must be a positive integer, got ${options.workers}`);
  const fail = (problem: string, treeSize = 0) => failure({ checked: 0, withoutProof: 0, treeSize }, problem);
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
  const { treeSize, rootHash } = verdict.checkpoint;
  if (trailer.tree_size !== treeSize || trailer.root_hash !== rootHash.toString('base64')) return fail('the checkpoint line\'s fields disagree with its signed note', treeSize);
  const summary = isObject(trailer.export) ? trailer.export : {};
  const unfiltered = complete || (isObject(summary.filters) && Object.keys(summary.filters).length === 0);

  const workers = options.workers ?? defaultWorkers((await stat(path)).size);
  const task = { path, treeSize, rootHash: rootHash.toString('base64'), unfiltered };
  const ranges = await lineRanges(path, workers);
  const reports = ranges.length === 1 ? [await verifyRange({ ...task, range: ranges[0]! }, onProgress)] : await verifyInWorkers(task, ranges, onProgress);
  return joinRanges(reports, { treeSize, unfiltered, records: summary.records });
}

/**
 * The ranges' reports, each range verified by a worker thread of its own. Once a range reports a
 * problem, those after it cannot hold the file's first one: their workers are stopped and their
 * reports left out. An exception in a worker rejects, as it would have been thrown on one thread;
 * every worker is terminated, whatever the outcome.
 */
async function verifyInWorkers(task: Omit<RangeTask, 'range'>, ranges: ByteRange[], onProgress?: (checked: number) => void): Promise<Array<RangeReport | undefined>> {
  const workers: Worker[] = [];
  const leaveOut: Array<() => void> = [];
  const progress = ranges.map(() => 0);
  try {
    return await Promise.all(ranges.map((range, i) => new Promise<RangeReport | undefined>((resolve, reject) => {
      const worker = moduleWorker('export-range.worker', import.meta.url, { workerData: { ...task, range } satisfies RangeTask });
      workers.push(worker);
      leaveOut.push(() => {
        resolve(undefined);
        void worker.terminate();
      });
      worker.on('message', (message: RangeWorkerMessage) => {
        if (message.type === 'progress') {
          progress[i] = message.checked;
          onProgress?.(progress.reduce((sum, n) => sum + n, 0));
          return;
        }
        resolve(message.report);
        if (message.report.problem) for (const later of leaveOut.slice(i + 1)) later();
      });
      worker.on('error', reject);
      // After 'done' or 'error', or once left out, this rejection changes nothing.
      worker.on('exit', (code) => reject(new Error(`the worker thread verifying bytes ${range.start} to ${range.end ?? 'the end'} of ${task.path} stopped (exit code ${code}) before it reported`)));
    })));
  } finally {
    await Promise.all(workers.map((worker) => worker.terminate()));
  }
}

/**
 * The file's report from its ranges' reports, in file order: a range's lines are numbered after
 * those of the ranges before it, and the first problem in the file wins. A range's own checks
 * could not see the lines before it; what they would have found is found here, on the range's
 * first non-empty line and its first record with a seq, which is where a single pass would have
 * found it (before anything else on that line).
 */
function joinRanges(reports: Array<RangeReport | undefined>, trailer: { treeSize: number; unfiltered: boolean; records: unknown }): ExportVerifyReport {
  const { treeSize, unfiltered } = trailer;
  const total = { checked: 0, withoutProof: 0, treeSize };
  let linesBefore = 0;
  let lastSeq = -1;
  let sawCheckpoint = false;
  const fail = (problem: string, line?: number, id?: number, inRange = { checked: 0, withoutProof: 0 }) =>
    failure({ ...total, checked: total.checked + inRange.checked, withoutProof: total.withoutProof + inRange.withoutProof }, problem, line, id);

  for (const r of reports) {
    // Left out only after a range with a problem of its own, where the loop has returned.
    if (!r) throw new Error('a range was left out, yet no range before it has a problem');
    if (sawCheckpoint && r.firstLine !== undefined) return fail('a line follows the checkpoint line', linesBefore + r.firstLine);
    const first = r.firstProven;
    if (first) {
      const problem =
        total.withoutProof > 0 ? 'a record with a proof follows records without one'
        : first.seq === undefined ? undefined // not in the tree: the range's own problem, on this line
        : first.seq <= lastSeq ? `record ${first.idText}: seq ${first.seq} is out of order`
        : unfiltered && first.seq !== lastSeq + 1 ? `seq ${lastSeq + 1} is missing from an unfiltered export: a line was removed`
        : undefined;
      if (problem) return fail(problem, linesBefore + first.line, first.id, { checked: 0, withoutProof: first.withoutProofBefore });
    }
    if (r.problem) return fail(r.problem.problem, linesBefore + r.problem.line, r.problem.id, r);
    total.checked += r.checked;
    total.withoutProof += r.withoutProof;
    linesBefore += r.lines;
    lastSeq = r.lastSeq ?? lastSeq;
    sawCheckpoint ||= r.sawCheckpoint;
  }
  if (!sawCheckpoint) return fail('the checkpoint line is missing');
  if (unfiltered && lastSeq !== treeSize - 1) return fail(`the export ends at seq ${lastSeq}, but the checkpoint covers ${treeSize} records: lines were removed`);
  const records = total.checked + total.withoutProof;
  if (typeof trailer.records === 'number' && trailer.records !== records) {
    return fail(`the export says it holds ${trailer.records} records, but has ${records}: lines were removed or added`);
  }
  return { ok: true, records_checked: total.checked, records_without_proof: total.withoutProof, tree_size: treeSize };
}
