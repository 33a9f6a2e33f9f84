// The offline verifier (`teamlog audit verify --file`, export.verifier.ts) with its line checks
// split across worker threads, a byte range of the export each: whatever the number of ranges,
// the report is the one a single pass over the file gives. An edit in a later range, one in
// several ranges (the first in the file wins, even when a later range finds its own first), and
// one right at a range's start, where only the lines of the range before show what is wrong,
// are named by their first bad record and absolute line number.
//
// The exports are made by the real exporter from a log sealed and checkpointed by a real
// server's sealer; the records appended after that server stopped are not covered by the
// checkpoint (no proof). The number of ranges is given explicitly: nothing depends on the cores.
import assert from 'node:assert/strict';
import { createPublicKey } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import type { Database } from '../src/db/database.js';
import { moduleWorker } from '../src/process/module-worker.js';
import type { AuditFilters } from '../src/modules/audit/audit.repository.js';
import { exportAuditLog } from '../src/modules/audit/evidence/export.stream.js';
import { noteVerifier, type NoteVerifier } from '../src/tlog/signed-note.js';
import { lineRanges, verifyExportFile, type ExportVerifyReport } from '../src/modules/audit/evidence/export.verifier.js';
import { createTestDatabase, startTestServer, TEST_SIGNING_KEY, type TestDatabase } from './helpers/server.js';

/** Enough for each of two ranges to pass 10,000 checked records, when a worker reports its progress. */
const RECORDS = 24_000;
/** Appended once no sealer runs: in the export without a proof, after the others. */
const PENDING = 3;
/**
 * Spaces after a line's JSON change nothing it says, and make it long enough that a range
 * boundary can be placed right after it (the split cuts at the first newline past a fraction of
 * the file's bytes).
 */
const PAD = ' '.repeat(4096);

let dir: string;
let database: TestDatabase;
let key: NoteVerifier;
/** The unfiltered export's lines (its checkpoint line last), and a filtered one's (seqs with gaps). */
let genuine: string[];
let filtered: string[];

interface Line {
  type: string;
  record: { id: number; request_id: string; metadata: Record<string, unknown> };
  sealed: { id: number; request_id: string; metadata: Record<string, unknown> };
  seq: number | null;
}
const parse = (line: string) => JSON.parse(line) as Line;
const idAt = (lines: string[], i: number) => parse(lines[i]!).record.id;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'teamlog-verify-parallel-'));
  database = await createTestDatabase();
  const server = await startTestServer({ database, env: { AUDIT_CHECKPOINT_INTERVAL_MS: '100' } });
  try {
    await appendTaskRecords(server.owner, RECORDS);
    await coveredByCheckpoint(server.owner);
  } finally {
    await server.close();
  }
  await appendTaskRecords(database.owner, PENDING);
  genuine = await exportLines({});
  filtered = await exportLines({ action: ['CREATE_TASK'] });
  const note = (JSON.parse(genuine.at(-1)!) as { note: string }).note;
  key = noteVerifier(note.slice(0, note.indexOf('\n')), createPublicKey(TEST_SIGNING_KEY));
});

after(async () => {
  await database?.drop();
  rmSync(dir, { recursive: true, force: true });
});

/** Records as the service writes them, a third of them CREATE_TASK (for the filtered export), about 1 KB a line. */
async function appendTaskRecords(owner: Database, count: number): Promise<void> {
  await owner.query(
    `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
     SELECT NULL, CASE WHEN g % 3 = 0 THEN 'CREATE_TASK' ELSE 'UPDATE_TASK' END, 'TASK', g, 'SUCCESS',
            jsonb_build_object('n', g, 'title', repeat('t', 200), 'tags', jsonb_build_array('a', g % 7)), '10.0.0.1', 'parallel-test', 'parallel-' || g
     FROM generate_series(1, $1::int) g`,
    [count],
  );
}

/** Until every record is sealed and the newest checkpoint covers them all. */
async function coveredByCheckpoint(owner: Database): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    const [row] = await owner.query<{ records: number; covered: number }>(
      'SELECT (SELECT count(*)::int FROM audit_log) AS records, (SELECT COALESCE(max(tree_size), 0)::int FROM audit_checkpoints) AS covered',
    );
    if (row!.covered === row!.records) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the sealer did not cover the log');
}

async function exportLines(filters: AuditFilters): Promise<string[]> {
  let text = '';
  for await (const part of exportAuditLog(database.owner, { filters, format: 'ndjson', chunk: 1000, block: 1024, ahead: 2 })) text += part.toString();
  return text.slice(0, -1).split('\n');
}

const write = (name: string, lines: string[]) => {
  writeFileSync(path.join(dir, name), lines.join('\n') + '\n');
  return path.join(dir, name);
};

/** The index of the line each of `count` ranges starts with, for `lines` written at `file`. */
async function rangeStarts(file: string, lines: string[], count: number): Promise<number[]> {
  const lineAt = new Map<number, number>();
  let offset = 0;
  lines.forEach((l, i) => {
    lineAt.set(offset, i);
    offset += Buffer.byteLength(l) + 1;
  });
  return (await lineRanges(file, count)).map((r) => lineAt.get(r.start)!);
}

/**
 * The report with `workers` ranges, checked against a single pass (one range, on this thread):
 * the same, field for field. The file must really be cut into that many ranges.
 */
async function verifyBothWays(file: string, workers: number, complete = false): Promise<ExportVerifyReport> {
  assert.equal((await lineRanges(file, workers)).length, workers, `${path.basename(file)} is cut into ${workers} ranges`);
  const single = await verifyExportFile(file, [key], undefined, complete, { workers: 1 });
  const parallel = await verifyExportFile(file, [key], undefined, complete, { workers });
  assert.deepEqual(parallel, single, `${path.basename(file)}: ${workers} ranges against one`);
  return parallel;
}

function assertFails(report: ExportVerifyReport, problem: RegExp, line: number, id?: number): void {
  assert.equal(report.ok, false);
  assert.match(report.problem!, problem);
  assert.equal(report.line, line, `the problem's line: ${report.problem}`);
  assert.equal(report.first_bad_id, id);
}

/** A one-byte edit of a record line: the first character of its sealed form's request id. */
function oneByteEdit(line: string): string {
  const at = line.indexOf('"request_id":"', line.indexOf('"sealed":')) + '"request_id":"'.length;
  return line.slice(0, at) + (line[at] === 'x' ? 'y' : 'x') + line.slice(at + 1);
}

describe('the offline verifier in worker threads', () => {
  test('a genuine export, unfiltered, filtered or --complete, in 2, 3 or 4 ranges: the report of a single pass', async () => {
    const all = write('genuine.ndjson', genuine);
    const some = write('filtered.ndjson', filtered);
    const proven = genuine.length - 1 - PENDING;
    for (const workers of [2, 3, 4]) {
      const report = await verifyBothWays(all, workers);
      assert.deepEqual(report, { ok: true, records_checked: proven, records_without_proof: PENDING, tree_size: proven });
      assert.equal((await verifyBothWays(all, workers, true)).ok, true);
      const fromSome = await verifyBothWays(some, workers);
      assert.equal(fromSome.ok, true, fromSome.problem);
      assert.equal(fromSome.records_checked + fromSome.records_without_proof, filtered.length - 1);
    }
  });

  test('progress: the callback is called with a growing count, the sum of what the workers have checked', async () => {
    const file = write('genuine.ndjson', genuine);
    const counts: number[] = [];
    const report = await verifyExportFile(file, [key], (n) => counts.push(n), false, { workers: 2 });
    assert.equal(report.ok, true);
    assert.ok(counts.length >= 2, `progress was reported ${counts.length} times`);
    for (let i = 1; i < counts.length; i++) assert.ok(counts[i]! > counts[i - 1]!, `progress went from ${counts[i - 1]} to ${counts[i]}`);
    assert.ok(counts.at(-1)! >= 20_000 && counts.at(-1)! <= report.records_checked);
  });

  test('in the second range: one byte changed, a line dropped, two lines swapped: the record and its line in the file', async () => {
    const [, second] = await rangeStarts(write('genuine.ndjson', genuine), genuine, 2);
    // The middle of the second range, far from the records without a proof at its end.
    const m = Math.floor((second! + genuine.length) / 2);
    const id = idAt(genuine, m);

    const oneByte = genuine.map((l, i) => (i === m ? oneByteEdit(l) : l));
    const edited = write('one-byte.ndjson', oneByte);
    assert.ok((await rangeStarts(edited, oneByte, 2))[1]! < m);
    assertFails(await verifyBothWays(edited, 2), new RegExp(`^record ${id}\\b`), m + 1, id);

    const dropped = genuine.filter((_, i) => i !== m);
    const droppedFile = write('dropped.ndjson', dropped);
    assert.ok((await rangeStarts(droppedFile, dropped, 2))[1]! < m);
    assertFails(await verifyBothWays(droppedFile, 2), /is missing from an unfiltered export/, m + 1, idAt(genuine, m + 1));

    const swapped = genuine.map((l, i) => (i === m ? genuine[m + 1]! : i === m + 1 ? genuine[m]! : l));
    const swappedFile = write('swapped.ndjson', swapped);
    assert.ok((await rangeStarts(swappedFile, swapped, 2))[1]! < m);
    assertFails(await verifyBothWays(swappedFile, 2), /is missing from an unfiltered export/, m + 1, idAt(genuine, m + 1));

    // Filtered (seqs with gaps): the swap shows as the second line's seq out of order.
    const [, secondOfSome] = await rangeStarts(write('filtered.ndjson', filtered), filtered, 2);
    const f = Math.floor((secondOfSome! + filtered.length) / 2);
    const swappedSome = filtered.map((l, i) => (i === f ? filtered[f + 1]! : i === f + 1 ? filtered[f]! : l));
    assertFails(await verifyBothWays(write('swapped-filtered.ndjson', swappedSome), 2), /is out of order/, f + 2, idAt(filtered, f));
  });

  test('an edit in each range: the first in the file is reported, also when a later range finds its own sooner', async () => {
    const file = write('genuine.ndjson', genuine);
    const [, second] = await rangeStarts(file, genuine, 2);
    // The second range's edit is on its second line, found long before the first range's, among its last lines.
    const inFirst = second! - 3;
    const inSecond = second! + 1;
    const both = genuine.map((l, i) => (i === inFirst || i === inSecond ? oneByteEdit(l) : l));
    const edited = write('two-edits.ndjson', both);
    assert.deepEqual(await rangeStarts(edited, both, 2), [0, second]);
    assertFails(await verifyBothWays(edited, 2), new RegExp(`^record ${idAt(genuine, inFirst)}\\b`), inFirst + 1, idAt(genuine, inFirst));

    // Three ranges, edits in the second and the third: the second's.
    const [, secondOfThree, third] = await rangeStarts(file, genuine, 3);
    const inSecondOfThree = Math.floor((secondOfThree! + third!) / 2);
    const inThird = third! + 10;
    const three = genuine.map((l, i) => (i === inSecondOfThree || i === inThird ? oneByteEdit(l) : l));
    const id = idAt(genuine, inSecondOfThree);
    assertFails(await verifyBothWays(write('edits-2-and-3.ndjson', three), 3), new RegExp(`^record ${id}\\b`), inSecondOfThree + 1, id);
  });

  /**
   * The edit `make(j)` makes, written so that the second of two ranges starts at line index j,
   * for a j near where the unedited file's second range starts (the line before j is padded).
   */
  async function atBoundary(name: string, base: string[], make: (j: number) => string[]): Promise<{ file: string; j: number }> {
    const [, boundary] = await rangeStarts(write(`${name}-base.ndjson`, base), base, 2);
    for (let j = boundary! - 3; j <= boundary! + 3; j++) {
      const lines = make(j);
      lines[j - 1] += PAD;
      const file = write(`${name}.ndjson`, lines);
      if ((await rangeStarts(file, lines, 2))[1] === j) return { file, j };
    }
    return assert.fail(`${name}: no edit near line ${boundary} starts a range`);
  }

  // Each edit at a range boundary is found on the second range's first line: four tests, not one,
  // because together they took 54–74 s on a slow VM (a test may take 60).
  test('at a range boundary: a dropped line is found on the second range\'s first line', async () => {
    // Unfiltered: seq j - 1 is missing, which only the first range's last seq shows.
    const dropped = await atBoundary('dropped-at-boundary', genuine, (j) => genuine.filter((_, i) => i !== j));
    assertFails(await verifyBothWays(dropped.file, 2), new RegExp(`^seq ${parse(genuine[dropped.j]!).seq} is missing from an unfiltered export`), dropped.j + 1, idAt(genuine, dropped.j + 1));
    // The same, with an edit further on in the second range, which that range finds on its own: the gap comes first.
    const droppedAndEdited = await atBoundary('dropped-and-edited', genuine, (j) => genuine.filter((_, i) => i !== j).map((l, i) => (i === j + 50 ? oneByteEdit(l) : l)));
    assertFails(await verifyBothWays(droppedAndEdited.file, 2), /is missing from an unfiltered export/, droppedAndEdited.j + 1, idAt(genuine, droppedAndEdited.j + 1));
  });

  test('at a range boundary: swapped lines are found on the second range\'s first line', async () => {
    // Filtered: the first range ends with the later seq of a swapped pair.
    const swapped = await atBoundary('swapped-at-boundary', filtered, (j) => filtered.map((l, i) => (i === j - 1 ? filtered[j]! : i === j ? filtered[j - 1]! : l)));
    assertFails(await verifyBothWays(swapped.file, 2), /is out of order/, swapped.j + 1, idAt(filtered, swapped.j - 1));
  });

  test('at a range boundary: a record with a proof after one without is found on the second range\'s first line', async () => {
    // A record without a proof (moved from the end) ends the first range.
    const pendingAt = genuine.length - 1 - PENDING;
    const movedPending = (j: number) => {
      const rest = genuine.filter((_, i) => i !== pendingAt);
      return [...rest.slice(0, j - 1), genuine[pendingAt]!, ...rest.slice(j - 1)];
    };
    const pending = await atBoundary('pending-at-boundary', genuine, movedPending);
    assertFails(await verifyBothWays(pending.file, 2), /a record with a proof follows records without one/, pending.j + 1, idAt(genuine, pending.j - 1));
  });

  test('at a range boundary: a line after a checkpoint line is found on the second range\'s first line', async () => {
    // A copy of the checkpoint line ends the first range.
    const checkpoint = await atBoundary('checkpoint-at-boundary', genuine, (j) => [...genuine.slice(0, j - 1), genuine.at(-1)!, ...genuine.slice(j - 1)]);
    assertFails(await verifyBothWays(checkpoint.file, 2), /a line follows the checkpoint line/, checkpoint.j + 1);
  });

  test('a sealed number beyond a double (canonicalization refuses it) is a reported problem, the same from one thread or two, and leaves no thread behind', async (t) => {
    const file = write('genuine.ndjson', genuine);
    const [, second] = await rangeStarts(file, genuine, 2);
    const m = Math.floor((second! + genuine.length) / 2);
    const entry = parse(genuine[m]!);
    const huge = JSON.stringify({ ...entry, record: { ...entry.record, metadata: { big: { v: 0 } } }, sealed: { ...entry.sealed, metadata: { big: { v: 0 } } } }).replaceAll('{"v":0}', '{"v":1e400}');
    const broken = write('infinite.ndjson', genuine.map((l, i) => (i === m ? huge : l)));
    const threads = () => readdirSync('/proc/self/task').length;
    const before = process.platform === 'linux' ? threads() : 0;
    const one = await verifyExportFile(broken, [key], undefined, false, { workers: 1 });
    const two = await verifyExportFile(broken, [key], undefined, false, { workers: 2 });
    assertFails(one, /its sealed form is not JSON that can be canonicalized/, m + 1, entry.record.id);
    assert.deepEqual(two, one);
    if (process.platform !== 'linux') return t.skip('counts threads in /proc');
    assert.equal(threads(), before, 'a worker thread is still running');
  });
});

describe('moduleWorker', () => {
  test('runs the script beside its caller in the caller\'s form: .js beside compiled code, .ts under tsx', async () => {
    const scripts = mkdtempSync(path.join(tmpdir(), 'teamlog-module-worker-'));
    try {
      writeFileSync(path.join(scripts, 'package.json'), '{"type":"module"}\n'); // as in this project
      writeFileSync(path.join(scripts, 'double.js'), "import { parentPort, workerData } from 'node:worker_threads';\nparentPort.postMessage(['js', workerData * 2]);\n");
      writeFileSync(path.join(scripts, 'double.ts'), "import { parentPort, workerData } from 'node:worker_threads';\nconst n: number = workerData;\nparentPort!.postMessage(['ts', n * 2]);\n");
      for (const form of ['js', 'ts']) {
        const worker = moduleWorker('double', pathToFileURL(path.join(scripts, `caller.${form}`)).href, { workerData: 21 });
        const answer = await new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject));
        await worker.terminate();
        assert.deepEqual(answer, [form, 42]);
      }
    } finally {
      rmSync(scripts, { recursive: true, force: true });
    }
  });
});
