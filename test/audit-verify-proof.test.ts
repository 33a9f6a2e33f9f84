// `teamlog audit verify-proof` (src/cli/audit-verify-proof.ts), the real CLI as a child process,
// on c2sp.org/tlog-proof@v1 files built here with src/tlog's code: a real log key, real witness
// keys, a small RFC 6962 tree of records in their sealed form's JCS. No database, no network:
// the command gets nothing but the two files. Exit codes (docs/operations.md, "The command
// line"): 0 the proof verifies, 1 it does not (naming why, and the missing witnesses), 2 an input
// file that cannot be read or a policy that does not parse, 3 an inclusion it could not check.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { cosignCheckpoint, cosigner, formatCosignatureVerifierKey } from '../src/tlog/cosignature.js';
import { canonicalize } from '../src/tlog/jcs.js';
import { keptTree } from './helpers/tlog-vectors.js';
import { formatTlogProof, type TlogProof } from '../src/tlog/proof-bundle.js';
import { formatCheckpoint, formatVerifierKey, noteSigner, signNote } from '../src/tlog/signed-note.js';
import { runTeamlog } from './helpers/cli.js';

const dir = mkdtempSync(path.join(tmpdir(), 'teamlog-verify-proof-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const log = noteSigner('teamlog.example/audit', generateKeyPairSync('ed25519').privateKey);
const w1 = cosigner('witness.example/w1', generateKeyPairSync('ed25519').privateKey);
const w2 = cosigner('witness.example/w2', generateKeyPairSync('ed25519').privateKey);
const now = Math.floor(Date.now() / 1000);

/** A tlog-policy file: our log, both witnesses, and the quorum line(s) given. */
function policyFile(name: string, quorum: string, logVkey = formatVerifierKey(log.name, log.publicKeyRaw)): string {
  const file = path.join(dir, name);
  writeFileSync(file, `log ${logVkey}\nwitness w1 ${formatCosignatureVerifierKey(w1)}\nwitness w2 ${formatCosignatureVerifierKey(w2)}\n${quorum}\n`);
  return file;
}
const BOTH = policyFile('both.policy', 'group both 2 w1 w2\nquorum both');

// Seven records as the log seals them: the JCS of each one's sealed form is its entry.
const records = Array.from({ length: 7 }, (_, seq) => ({
  id: 100 + seq, actor_id: 1, action: seq === 3 ? 'CREATE_TASK' : 'LOGIN_SUCCESS', resource_type: seq === 3 ? 'TASK' : 'USER', resource_id: seq,
  timestamp: `2026-11-29T05:00:0${seq}.000Z`, result: 'SUCCESS', metadata: {}, ip: '192.0.2.1', user_agent: 'test', request_id: `req-${seq}`,
}));
const entries = records.map((r) => Buffer.from(canonicalize(r)));
const tree = keptTree(entries);
const text = formatCheckpoint({ origin: log.name, treeSize: entries.length, rootHash: tree.root, extensions: ['time 2026-11-29T05:00:10.000Z'] });
const w1Line = cosignCheckpoint(text, w1, now - 60);
const w2Line = cosignCheckpoint(text, w2, now - 30);

/** The proof of record `seq` (index = its seq, extra = its entry), with changes a test asks for, written to a file. */
function proofFile(name: string, seq: number, change: Partial<TlogProof> = {}): string {
  const proof: TlogProof = {
    extra: entries[seq]!,
    index: seq,
    inclusionPath: tree.inclusionPath(seq),
    checkpoint: signNote(text, log) + w1Line + w2Line,
    ...change,
  };
  const file = path.join(dir, name);
  writeFileSync(file, formatTlogProof(proof));
  return file;
}

const verifyProof = (...args: string[]) => runTeamlog(['audit', 'verify-proof', ...args], {});

test('a valid proof exits 0, naming the record, the log\'s signature, both witnesses and the quorum', async () => {
  const r = await verifyProof(proofFile('valid.tlog-proof', 3), '--policy', BOTH);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^log signature: verified \(teamlog\.example\/audit\+[0-9a-f]{8}\)$/m);
  assert.match(r.stdout, /^witness w1: cosigned at \d{4}-\d\d-\d\dT/m);
  assert.match(r.stdout, /^witness w2: cosigned at /m);
  assert.match(r.stdout, /^quorum both: met$/m);
  assert.match(r.stdout, /^OK: record 103 \(CREATE_TASK at 2026-11-29T05:00:03\.000Z\) is entry 3 of teamlog\.example\/audit's checkpoint of 7 entries, cosigned by w1, w2 \(quorum both met\)$/m);
  assert.equal(r.stderr, '');
});

test('a tampered entry exits 1: its leaf no longer leads to the signed root', async () => {
  const changed = Buffer.from(canonicalize({ ...records[3], action: 'DELETE_TASK' }));
  const r = await verifyProof(proofFile('tampered.tlog-proof', 3, { extra: changed }), '--policy', BOTH);
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stderr, /verification FAILED: the inclusion path does not lead from entry 3 to the checkpoint's root hash/);
  assert.doesNotMatch(r.stdout, /^OK/m);
});

test('a wrong index exits 1, and so does an index beyond the tree', async () => {
  const wrong = await verifyProof(proofFile('wrong-index.tlog-proof', 3, { index: 2 }), '--policy', BOTH);
  assert.equal(wrong.code, 1, wrong.stdout);
  assert.match(wrong.stderr, /verification FAILED: the inclusion path does not lead from entry 2/);
  const beyond = await verifyProof(proofFile('beyond.tlog-proof', 3, { index: 7 }), '--policy', BOTH);
  assert.equal(beyond.code, 1, beyond.stdout);
  assert.match(beyond.stderr, /index 7 is not in a tree of 7 entries/);
});

test('a forged cosignature exits 1, naming the witness whose cosignature is invalid', async () => {
  const line = w2Line.trimEnd();
  const bytes = Buffer.from(line.split(' ')[2]!, 'base64');
  const last = bytes.length - 1;
  bytes[last] = bytes[last]! ^ 1;
  const forged = `— ${w2.name} ${bytes.toString('base64')}\n`;
  const r = await verifyProof(proofFile('forged.tlog-proof', 3, { checkpoint: signNote(text, log) + w1Line + forged }), '--policy', BOTH);
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stdout, /^witness w1: cosigned at /m);
  assert.match(r.stdout, /^witness w2: INVALID \(the cosignature by witness\.example\/w2\+[0-9a-f]{8} does not verify\)$/m);
  assert.match(r.stderr, /verification FAILED: invalid cosignature: the cosignature by witness\.example\/w2/);
});

test('a quorum of 2 of 2 with one cosignature exits 1, naming the missing witness; 1 of 2 passes', async () => {
  const one = proofFile('one-cosignature.tlog-proof', 3, { checkpoint: signNote(text, log) + w1Line });
  const r = await verifyProof(one, '--policy', BOTH);
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stdout, /^witness w2: missing \(no cosignature\)$/m);
  assert.match(r.stdout, /^quorum both: NOT met \(group both has 1 of the 2 it needs \(of 2\); no cosignature from w2\)$/m);
  assert.match(r.stderr, /verification FAILED: the quorum "both" is not met: .*no cosignature from w2$/m);

  const either = await verifyProof(one, '--policy', policyFile('either.policy', 'group either 1 w1 w2\nquorum either'));
  assert.equal(either.code, 0, either.stderr);
  assert.match(either.stdout, /cosigned by w1 \(quorum either met\)$/m);
});

test('a checkpoint signed by a key the policy does not name exits 1', async () => {
  const other = noteSigner(log.name, generateKeyPairSync('ed25519').privateKey);
  const r = await verifyProof(proofFile('valid.tlog-proof', 3), '--policy', policyFile('other-log.policy', 'quorum none', formatVerifierKey(other.name, other.publicKeyRaw)));
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stderr, /verification FAILED: the checkpoint of origin "teamlog\.example\/audit" is not signed by a log of that name/);
});

test('a malformed proof exits 1; a file that cannot be read, a policy that does not parse, or no --policy exit 2; no entry, 3', async () => {
  const malformed = path.join(dir, 'malformed.tlog-proof');
  writeFileSync(malformed, 'c2sp.org/tlog-proof@v2\nindex 0\n\n');
  const bad = await verifyProof(malformed, '--policy', BOTH);
  assert.equal(bad.code, 1, bad.stdout);
  assert.match(bad.stderr, /verification FAILED: malformed tlog proof, line 1/);

  const missing = await verifyProof(path.join(dir, 'no-such.tlog-proof'), '--policy', BOTH);
  assert.equal(missing.code, 2, missing.stdout);
  assert.match(missing.stderr, /cannot read the proof .*no-such\.tlog-proof: ENOENT/);

  const unparsable = path.join(dir, 'bad.policy');
  writeFileSync(unparsable, 'witness w1 not-a-vkey\nquorum w1\n');
  const policy = await verifyProof(proofFile('valid.tlog-proof', 3), '--policy', unparsable);
  assert.equal(policy.code, 2, policy.stdout);
  assert.match(policy.stderr, /bad\.policy: policy line 1: invalid witness vkey/);

  const noPolicy = await verifyProof(proofFile('valid.tlog-proof', 3));
  assert.equal(noPolicy.code, 2, noPolicy.stdout);
  assert.match(noPolicy.stderr, /--policy is required/);

  // A proof with no entry: its checkpoint is checked, its inclusion cannot be.
  const noEntry = await verifyProof(proofFile('no-entry.tlog-proof', 3, { extra: undefined }), '--policy', BOTH);
  assert.equal(noEntry.code, 3, noEntry.stderr);
  assert.match(noEntry.stderr, /could not check: the inclusion of entry 3: .* carries no entry/);
  assert.doesNotMatch(noEntry.stderr, /FAILED/);
});

test('--help says what is checked and the exit codes, within 100 columns', async () => {
  const r = await verifyProof('--help');
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /Usage: teamlog audit verify-proof <file\.tlog-proof> --policy <policy>/);
  assert.match(r.stdout, /Exit code 0/);
  for (const line of r.stdout.split('\n')) assert.ok(line.length <= 100, `over 100 columns: ${line}`);
});
