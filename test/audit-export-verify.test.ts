// The offline verifier (`teamlog audit verify --file`, verifyExportFile) on edited exports: a
// byte changed, a line dropped, swapped or added, the wrong key, a stripped checkpoint; and what
// a filtered export cannot show (docs/audit-integrity.md §7). The genuine exports it edits are
// made over HTTP from the log that audit-export.test.ts exports too (helpers/audit-export.ts).
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { ed25519PublicKeyRaw, formatVerifierKey, parseVerifierKey, publicKeyPem, type NoteVerifier } from '../src/tlog/signed-note.js';
import { verifyExportFile } from '../src/modules/audit/evidence/export.verifier.js';
import { fetchExport, openExportLog, projectWindow, togetherQuery, type CheckpointLine, type RecordLine } from './helpers/audit-export.js';
import { useCliDatabase } from './helpers/cli.js';
import { TEST_SIGNING_KEY } from './helpers/server.js';

const world = useCliDatabase({ prefix: 'teamlog-export-verify-', env: { AUDIT_SIGNING_KEY: TEST_SIGNING_KEY } });
const { runCli } = world;
const file = (name: string) => path.join(world.dataDir, name);

describe('the offline verifier refuses an edited export', () => {
  let genuine: string;
  let filtered: string;
  let key: NoteVerifier;
  let origin: string;

  // The genuine exports (key.pem beside them): unfiltered, and filtered as the HTTP tests' "together" export.
  before(async () => {
    const log = await openExportLog(world);
    try {
      genuine = (await fetchExport(log.server, log.admin)).text;
      const { t1 } = await projectWindow(log);
      filtered = (await fetchExport(log.server, log.admin, togetherQuery(log.admin.id, t1))).text;
      key = parseVerifierKey(log.verifierKey);
      origin = log.origin;
    } finally {
      await log.close();
    }
    writeFileSync(file('http-all.ndjson'), genuine);
    writeFileSync(file('http-filtered.ndjson'), filtered);
  });

  const lines = (text: string) => text.slice(0, -1).split('\n');
  const write = (name: string, ls: string[]) => {
    writeFileSync(file(name), ls.join('\n') + '\n');
    return file(name);
  };
  /** A record line with a proof, from the middle of the export. */
  const middle = (ls: string[]) => {
    const proven = ls.map((l, i) => [l, i] as const).filter(([l]) => l.includes('"seq":') && !l.includes('"seq":null') && l.startsWith('{"type":"record"'));
    return proven[Math.floor(proven.length / 2)]!;
  };

  test('via the CLI: one byte changed in a record line, a dropped line, or the wrong key (PEM or verifier key): exit 1, naming the problem', async () => {
    const ls = lines(genuine);
    const [line, at] = middle(ls);
    const id = (JSON.parse(line) as RecordLine).record.id;
    // One byte of the sealed form: the first character of its request id.
    const sealedAt = line.indexOf('"request_id":"', line.indexOf('"sealed":')) + '"request_id":"'.length;
    const edited = line.slice(0, sealedAt) + (line[sealedAt] === 'x' ? 'y' : 'x') + line.slice(sealedAt + 1);
    assert.equal(edited.length, line.length);
    const oneByte = write('one-byte.ndjson', ls.map((l, i) => (i === at ? edited : l)));
    const dropped = write('dropped.ndjson', ls.filter((_, i) => i !== at));
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(file('wrong.pem'), publicKeyPem(privateKey));
    const wrongVerifier = formatVerifierKey(origin, ed25519PublicKeyRaw(privateKey));

    const [a, b, c, d] = await Promise.all([
      runCli(['audit', 'verify', '--file', oneByte, '--public-key', file('key.pem')]),
      runCli(['audit', 'verify', '--file', dropped, '--public-key', file('key.pem')]),
      runCli(['audit', 'verify', '--file', file('http-all.ndjson'), '--public-key', file('wrong.pem')]),
      runCli(['audit', 'verify', '--file', file('http-all.ndjson'), '--verifier-key', wrongVerifier]),
    ]);
    assert.equal(a.code, 1, a.stdout + a.stderr);
    assert.match(a.stderr, new RegExp(`verification FAILED: record ${id}\\b.*\\(first bad record: ${id}, line ${at + 1}\\)`));
    assert.equal(b.code, 1, b.stdout + b.stderr);
    assert.match(b.stderr, /verification FAILED: seq \d+ is missing from an unfiltered export: a line was removed/);
    for (const r of [c, d]) {
      assert.equal(r.code, 1, r.stdout + r.stderr);
      assert.match(r.stderr, /verification FAILED: the checkpoint: it is not signed by the expected key/);
      assert.equal(r.stdout, '');
    }
  });

  test('via the engine: an edit anywhere (the API form, the proof, the checkpoint note), lines swapped, duplicated, added after the checkpoint, or the checkpoint missing', async () => {
    const ls = lines(genuine);
    const [line, at] = middle(ls);
    const entry = JSON.parse(line) as RecordLine;
    const id = entry.record.id;
    const check = async (name: string, edited: string[], problem: RegExp, firstBadId?: number) => {
      const report = await verifyExportFile(write(`${name}.ndjson`, edited), [key]);
      assert.equal(report.ok, false, `${name} went unnoticed`);
      assert.match(report.problem!, problem, name);
      if (firstBadId !== undefined) assert.equal(report.first_bad_id, firstBadId, name);
    };
    const replace = (l: string) => ls.map((x, i) => (i === at ? l : x));

    assert.equal((await verifyExportFile(file('http-all.ndjson'), [key])).ok, true);
    const sealedToo = { ...entry.record, action: 'LOGOUT' };
    await check('record-and-sealed', replace(JSON.stringify({ ...entry, record: sealedToo, sealed: sealedToo })), new RegExp(`record ${id} does not match its leaf hash`), id);
    await check('api-form', replace(JSON.stringify({ ...entry, record: { ...entry.record, action: 'LOGOUT' } })), /record and its sealed form differ in action/, id);
    const path0 = Buffer.from(entry.audit_path![0]!, 'base64');
    path0[0] = path0[0]! ^ 1;
    await check('proof', replace(JSON.stringify({ ...entry, audit_path: [path0.toString('base64'), ...entry.audit_path!.slice(1)] })), /inclusion proof does not lead to the checkpoint's root/, id);
    const trailer = JSON.parse(ls[ls.length - 1]!) as CheckpointLine & { root_hash: string };
    const forgedNote = trailer.note!.replace(`\n${trailer.tree_size}\n`, `\n${trailer.tree_size + 1}\n`);
    await check('note', [...ls.slice(0, -1), JSON.stringify({ ...trailer, note: forgedNote, tree_size: trailer.tree_size + 1 })], /the checkpoint: its signature does not verify/);
    await check('swapped', ls.map((x, i) => (i === at ? ls[at + 1]! : i === at + 1 ? ls[at]! : x)), /out of order|is missing/);
    await check('duplicated', [...ls.slice(0, at + 1), ls[at]!, ...ls.slice(at + 1)], /out of order/);
    await check('after-checkpoint', [...ls, ls[at]!], /the last line is not the export's checkpoint line|follows the checkpoint/);
    await check('no-checkpoint', ls.slice(0, -1), /checkpoint line/);
    // A filtered export: a dropped line shows in its count.
    const fl = lines(filtered);
    await check('filtered-dropped', fl.filter((_, i) => i !== 1), /says it holds \d+ records, but has \d+/);
  });

  test('a signed checkpoint is required: an export stripped of it, its records passed off as not yet covered, does not verify', async () => {
    // The downgrade an editor of a file would try: no checkpoint to hold the records to, every
    // record "not covered yet" (no proof to check), one of them changed.
    const ls = lines(genuine);
    const [, at] = middle(ls);
    const records = ls.slice(0, -1).map((l, i) => {
      const e = JSON.parse(l) as RecordLine;
      const changed = i === at ? { ...e.record, action: 'LOGOUT' } : e.record;
      return JSON.stringify({ ...e, record: changed, sealed: i === at ? changed : e.sealed, seq: null, leaf_hash: null, audit_path: null });
    });
    const trailer = JSON.parse(ls[ls.length - 1]!) as CheckpointLine;
    const stripped = JSON.stringify({ type: 'checkpoint', tree_size: 0, note: null, export: { ...trailer.export, records_with_proof: 0, records_without_proof: records.length } });
    const report = await verifyExportFile(write('stripped.ndjson', [...records, stripped]), [key]);
    assert.equal(report.ok, false, 'an export with no signed checkpoint verified: nothing in it was checked against the key');
    assert.match(report.problem!, /checkpoint/);
  });

  test('what a filtered export cannot show (docs/audit-integrity.md §7): a record left out, when its count is edited to match', async () => {
    const fl = lines(filtered);
    const trailer = JSON.parse(fl[fl.length - 1]!) as CheckpointLine;
    const edited = [...fl.slice(1, -1), JSON.stringify({ ...trailer, export: { ...trailer.export, records: trailer.export.records - 1, records_with_proof: trailer.export.records_with_proof - 1 } })];
    const report = await verifyExportFile(write('filtered-left-out.ndjson', edited), [key]);
    assert.equal(report.ok, true, report.problem);
  });

  test('--complete: a full export whose unsigned trailer is edited to look filtered still fails when a line is dropped', async () => {
    const ls = lines(genuine);
    const trailer = JSON.parse(ls[ls.length - 1]!) as CheckpointLine;
    const [, at] = middle(ls);
    const edited = [...ls.slice(0, at), ...ls.slice(at + 1, -1), JSON.stringify({ ...trailer, export: { ...trailer.export, filters: { actor_id: 1 }, records: trailer.export.records - 1, records_with_proof: trailer.export.records_with_proof - 1 } })];
    const path_ = write('disguised.ndjson', edited);
    assert.equal((await verifyExportFile(path_, [key])).ok, true, 'without --complete the disguise holds (the trailer is not signed)');
    const complete = await verifyExportFile(path_, [key], undefined, true);
    assert.equal(complete.ok, false);
    assert.match(complete.problem!, /missing|removed/);
  });
});
