// Teamlog's signed notes and witness cosignatures (tlog/signed-note.ts, tlog/cosignature.ts) held
// to Go's golang.org/x/mod/sumdb/note, the package most transparency-log tools build on, and to
// a C2SP tlog-cosignature `cosignature/v1` check written in Go from the spec (test/go/main.go):
// a checkpoint signed by a log key and cosigned by witness keys made with our code opens with
// note.Open, the log's vkey verifies it, the cosignature lines come back as (unverified)
// signatures, and the Go check verifies each cosignature. The Go check is first held to a real
// checkpoint cosigned by witnesses of the public witness network, so that it cannot agree only
// with us. Skipped, saying why, when Go or Debian's golang-golang-x-mod-dev is not installed
// (.ci/run installs both).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cosignCheckpoint, cosigner, formatCosignatureVerifierKey } from '../src/tlog/cosignature.js';
import { formatCheckpoint, formatVerifierKey, noteSigner, noteVerifier, openNote, signNote } from '../src/tlog/signed-note.js';
import { ROOT } from './helpers/paths.js';
import { REAL_LOG_VKEY, REAL_NOTE, REAL_TEXT, REAL_TIMESTAMP, REAL_WITNESSES, WIT1_SKEY, WIT1_VKEY, goPrivateKey } from './helpers/tlog-vectors.js';

const GO_SOURCE = path.join(ROOT, 'test', 'go');
const NOTE_PACKAGE = path.join('src', 'golang.org', 'x', 'mod', 'sumdb', 'note', 'note.go');

/** Where Go finds golang.org/x/mod without the network: Debian's GOPATH, then the user's own. */
function goPath(): { gopath: string } | { skip: string } {
  const version = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (version.error || version.status !== 0) return { skip: 'go is not installed (Debian package golang-go; .ci/run installs it)' };
  const own = spawnSync('go', ['env', 'GOPATH'], { encoding: 'utf8' }).stdout?.trim() ?? '';
  const entries = ['/usr/share/gocode', ...own.split(path.delimiter)].filter((p) => p !== '');
  if (!entries.some((p) => existsSync(path.join(p, NOTE_PACKAGE)))) {
    return { skip: `golang.org/x/mod/sumdb/note is not in ${entries.join(path.delimiter)} (Debian package golang-golang-x-mod-dev; .ci/run installs it)` };
  }
  return { gopath: entries.join(path.delimiter) };
}

const go = goPath();
const skip = 'skip' in go ? go.skip : false;

interface GoSignature { name: string; hash: string; base64: string }
interface GoReport {
  text?: string;
  sigs: GoSignature[];
  unverified_sigs: GoSignature[];
  cosignatures: Array<{ name: string; hash: string; time: number; valid: boolean; error?: string }>;
  error?: string;
  error_type?: string;
}

describe('notes and cosignatures, read by Go\'s golang.org/x/mod/sumdb/note', () => {
  let dir = '';
  let binary = '';

  before(() => {
    if (!('gopath' in go)) return;
    dir = mkdtempSync(path.join(tmpdir(), 'teamlog-go-'));
    binary = path.join(dir, 'notecheck');
    // GOPATH mode: Debian ships x/mod as GOPATH source, and no module download may happen here.
    const built = spawnSync('go', ['build', '-o', binary, '.'], {
      cwd: GO_SOURCE,
      encoding: 'utf8',
      env: { ...process.env, GO111MODULE: 'off', GOPATH: go.gopath, GOFLAGS: '', GOPROXY: 'off', GOTOOLCHAIN: 'local' },
    });
    assert.equal(built.status, 0, `go build test/go:\n${built.stdout}${built.stderr}`);
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The Go program on a note, with the log and witness vkeys given. */
  function goOpen(note: string, keys: { logs: string[]; witnesses?: string[] }): GoReport {
    const args = [...keys.logs.flatMap((k) => ['-log', k]), ...(keys.witnesses ?? []).flatMap((k) => ['-witness', k])];
    const run = spawnSync(binary, args, { input: note, encoding: 'utf8' });
    assert.ok(run.status === 0 || run.status === 1, `notecheck exited ${run.status}: ${run.stderr}`);
    return JSON.parse(run.stdout) as GoReport;
  }

  // Our log's key and two witnesses' keys, made with our code, and a checkpoint as the service
  // writes it: origin, size, root, then the time and prev extension lines.
  const log = noteSigner('teamlog.example/audit', generateKeyPairSync('ed25519').privateKey);
  const logVkey = formatVerifierKey(log.name, log.publicKeyRaw);
  const w1 = cosigner('witness.example/w1', generateKeyPairSync('ed25519').privateKey);
  const w2 = cosigner('witness.example/w2', generateKeyPairSync('ed25519').privateKey);
  const text = formatCheckpoint({
    origin: log.name,
    treeSize: 1234,
    rootHash: createHash('sha256').update('a root').digest(),
    extensions: ['time 2026-11-29T05:00:00.000Z', `prev ${createHash('sha256').update('the previous note').digest('base64')}`],
  });
  const cosigned = signNote(text, log) + cosignCheckpoint(text, w1, 1790000000) + cosignCheckpoint(text, w2, 1790000007);
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

  test('the Go cosignature/v1 check, written from the spec, verifies a real checkpoint of the witness network', { skip }, () => {
    const report = goOpen(REAL_NOTE, { logs: [REAL_LOG_VKEY], witnesses: [REAL_WITNESSES.remora, REAL_WITNESSES['little-garden'], REAL_WITNESSES.stagemole, REAL_WITNESSES.smartit] });
    assert.equal(report.error, undefined);
    assert.equal(report.text, REAL_TEXT);
    assert.deepEqual(report.sigs.map((s) => [s.name, s.hash]), [['arche2025h1.staging.ct.transparency.dev', 'ba2f06c0']]);
    assert.equal(report.cosignatures.length, 4);
    for (const c of report.cosignatures) assert.deepEqual([c.valid, c.time, c.error], [true, REAL_TIMESTAMP, undefined], c.name);
  });

  test('our cosigned checkpoint opens with note.Open; the log\'s vkey verifies it; the cosignatures are carried as unverified signatures', { skip }, () => {
    const report = goOpen(cosigned, { logs: [logVkey] });
    assert.equal(report.error, undefined, report.error);
    assert.equal(report.text, text, 'Go reads the same note text');
    assert.deepEqual(report.sigs.map((s) => [s.name, s.hash]), [[log.name, hex(log.keyHash)]]);
    // Byte for byte the lines we wrote, in the order we wrote them.
    const ours = cosigned.split('\n').filter((l) => l.startsWith('— ')).map((l) => l.slice('— '.length).split(' ')[1]);
    assert.deepEqual(report.sigs[0]!.base64, ours[0]);
    assert.deepEqual(report.unverified_sigs.map((s) => [s.name, s.hash, s.base64]), [
      [w1.name, hex(w1.keyHash), ours[1]],
      [w2.name, hex(w2.keyHash), ours[2]],
    ]);
  });

  test('the Go cosignature/v1 check verifies both our witnesses\' cosignatures, with their timestamps', { skip }, () => {
    const report = goOpen(cosigned, { logs: [logVkey], witnesses: [formatCosignatureVerifierKey(w1), formatCosignatureVerifierKey(w2)] });
    assert.deepEqual(report.cosignatures.map((c) => [c.name, c.hash, c.time, c.valid]), [
      [w1.name, hex(w1.keyHash), 1790000000, true],
      [w2.name, hex(w2.keyHash), 1790000007, true],
    ]);
  });

  test('Go refuses what no longer holds: another root, a cosignature with one bit changed, a note with no signature it knows', { skip }, () => {
    const reRooted = cosigned.replace(text.split('\n')[2]!, createHash('sha256').update('another root').digest('base64'));
    const refused = goOpen(reRooted, { logs: [logVkey] });
    assert.equal(refused.error_type, '*note.InvalidSignatureError', refused.error);

    // One bit of w1's Ed25519 signature (the last byte of its line's bytes) flipped.
    const line = cosigned.split('\n').find((l) => l.startsWith(`— ${w1.name} `))!;
    const bytes = Buffer.from(line.split(' ')[2]!, 'base64');
    const last = bytes.length - 1;
    bytes[last] = bytes[last]! ^ 1;
    const forged = cosigned.replace(line, `— ${w1.name} ${bytes.toString('base64')}`);
    const report = goOpen(forged, { logs: [logVkey], witnesses: [formatCosignatureVerifierKey(w1), formatCosignatureVerifierKey(w2)] });
    assert.equal(report.error, undefined, 'the log\'s own signature still verifies');
    assert.deepEqual(report.cosignatures.map((c) => [c.name, c.valid]), [[w1.name, false], [w2.name, true]]);

    // Only the witnesses' keys given: Go's Open wants a signature by a key it knows, and a
    // cosignature key (type 0x04) is not a note key.
    const unknown = goOpen(cosigned, { logs: [] });
    assert.equal(unknown.error_type, '*note.UnverifiedNoteError', unknown.error);
  });

  test('note.Sign with Go\'s own key writes byte for byte what our signNote writes, and our openNote verifies it', { skip }, () => {
    const run = spawnSync(binary, ['-sign', WIT1_SKEY], { input: text, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    const { name, key } = goPrivateKey(WIT1_SKEY);
    assert.equal(run.stdout, signNote(text, noteSigner(name, key)), 'Ed25519 is deterministic: the same note');
    const opened = openNote(run.stdout, [noteVerifier(name, key)]);
    assert.equal(opened.signatures[0]?.verifiedBy?.name, name);
    assert.equal(formatVerifierKey(name, noteSigner(name, key).publicKeyRaw), WIT1_VKEY);
  });
});
