// Offline proofs (tlog/proof-bundle.ts), C2SP tlog-proof `c2sp.org/tlog-proof@v1`: the layout of
// the spec's example and of transparency-dev/formats' vectors, proofs of real trees checked with
// nothing but the entry and a policy, and each way a proof can be wrong.
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { cosignCheckpoint, cosigner, formatCosignatureVerifierKey } from '../src/tlog/cosignature.js';
import { leafHash } from '../src/tlog/merkle.js';
import { keptTree } from './helpers/tlog-vectors.js';
import { parsePolicy } from '../src/tlog/policy.js';
import { ProofError, TLOG_PROOF_HEADER, formatTlogProof, parseTlogProof, verifyTlogProof, type TlogProof } from '../src/tlog/proof-bundle.js';
import { formatCheckpoint, formatVerifierKey, noteSigner, signNote } from '../src/tlog/signed-note.js';

const log = noteSigner('example.com/teamlog', generateKeyPairSync('ed25519').privateKey);
const w1 = cosigner('w1.example', generateKeyPairSync('ed25519').privateKey);
const w2 = cosigner('w2.example', generateKeyPairSync('ed25519').privateKey);
const LOG_VKEY = formatVerifierKey(log.name, log.publicKeyRaw);
// The quorum issue 40's tests use: two witnesses, both needed.
const POLICY = parsePolicy(`log ${LOG_VKEY}
witness w1 ${formatCosignatureVerifierKey(w1)}
witness w2 ${formatCosignatureVerifierKey(w2)}
group both 2 w1 w2
quorum both
`);

/** A tree of `size` entries, every node kept, and its checkpoint signed by the log and cosigned by both witnesses. */
function loggedTree(size: number) {
  const entries = Array.from({ length: size }, (_, i) => Buffer.from(JSON.stringify({ seq: i, action: 'task.update' })));
  const tree = keptTree(entries);
  const text = formatCheckpoint({ origin: log.name, treeSize: size, rootHash: tree.root, extensions: [] });
  const note = signNote(text, log) + cosignCheckpoint(text, w1, 1700000000) + cosignCheckpoint(text, w2, 1700000001);
  const proof = (index: number): TlogProof => ({
    extra: entries[index]!,
    index,
    inclusionPath: tree.inclusionPath(index),
    checkpoint: note,
  });
  return { entries, text, note, proof };
}

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const sha = (s: string) => createHash('sha256').update(s).digest();

function refuses(text: string | Uint8Array, line: number | undefined, message: RegExp): void {
  assert.throws(() => parseTlogProof(text), (err: unknown) => {
    assert.ok(err instanceof ProofError, `expected a ProofError, got ${String(err)}`);
    assert.equal(err.line, line, err.message);
    assert.match(err.message, message);
    return true;
  });
}

const tree = loggedTree(13);

test('a proof is the header, extra, index, the inclusion hashes, a blank line and the cosigned checkpoint', () => {
  const proof = tree.proof(5);
  assert.equal(proof.inclusionPath.length, 4);
  assert.equal(
    formatTlogProof(proof),
    `c2sp.org/tlog-proof@v1\nextra ${b64(tree.entries[5]!)}\nindex 5\n${proof.inclusionPath.map((h) => `${b64(h)}\n`).join('')}\n${tree.note}`,
  );
});

test('the layouts of transparency-dev/formats\' vectors, with a real signed checkpoint in place of theirs', () => {
  // proof/tlog_proof_test.go, TestMarshal: hashes SHA-256("hash1") and SHA-256("hash2"), extra "extra information".
  const [h1, h2] = [sha('hash1'), sha('hash2')];
  assert.equal(formatTlogProof({ index: 5, inclusionPath: [h1, h2], checkpoint: tree.note }), `c2sp.org/tlog-proof@v1\nindex 5\n${b64(h1)}\n${b64(h2)}\n\n${tree.note}`);
  assert.equal(
    formatTlogProof({ extra: Buffer.from('extra information'), index: 10, inclusionPath: [h1], checkpoint: tree.note }),
    `c2sp.org/tlog-proof@v1\nextra ZXh0cmEgaW5mb3JtYXRpb24=\nindex 10\n${b64(h1)}\n\n${tree.note}`,
  );
  assert.equal(formatTlogProof({ index: 0, inclusionPath: [], checkpoint: tree.note }), `c2sp.org/tlog-proof@v1\nindex 0\n\n${tree.note}`);
});

test('the spec\'s example proof reads: its extra, its index 73894 and its five hashes', () => {
  // C2SP/C2SP tlog-proof.md, the opening example; its signature lines are elided ("[...]"), so a real note stands in for its checkpoint.
  const head = `c2sp.org/tlog-proof@v1
extra YWdlLXYxLjIuMS1kYXJ3aW4tYXJtNjQudGFyLmd6kYXJ3aW4tYXJ
index 73894
gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=
B95lDa8R83lS8n0eG+o0buTxRKQTYFi//1U8anccXmA=
EKNzoDWG8LGC0Yp9o+sv3qllpMP9uHQ9B20KNL+Q1zs=
RoopEkOdqkYqMB4MJXrbt/hMjOxsVn0IrWjpz1ZMMes=
AHCioX9nLjsrse6YhjRRmk1WUEirVOLLRoOQ6vfO5vk=
`;
  const proof = parseTlogProof(`${head}\n${tree.note}`);
  assert.equal(proof.index, 73894);
  assert.equal(proof.extra?.subarray(0, 30).toString('latin1'), 'age-v1.2.1-darwin-arm64.tar.gz');
  assert.equal(proof.extra?.length, 39);
  assert.deepEqual(proof.inclusionPath.map(b64), head.split('\n').slice(3, 8));
  assert.equal(proof.checkpoint, tree.note);
  assert.equal(formatTlogProof(proof), `${head}\n${tree.note}`, 'written back byte for byte');
});

test('a proof round-trips through its text, as a string and as bytes, and verifies with the entry and the policy alone', () => {
  for (const index of [0, 5, 12]) {
    const text = formatTlogProof(tree.proof(index));
    const parsed = parseTlogProof(Buffer.from(text, 'utf8'));
    assert.deepEqual(parsed, tree.proof(index));
    assert.deepEqual(parseTlogProof(text), parsed);
    const verdict = verifyTlogProof(parsed, { entry: parsed.extra! }, POLICY);
    assert.ok(verdict.ok, verdict.ok ? '' : verdict.problem);
    assert.equal(verdict.index, index);
    assert.equal(verdict.checkpoint.treeSize, 13);
    assert.deepEqual(verdict.cosignatures, [{ witness: 'w1', timestamp: 1700000000 }, { witness: 'w2', timestamp: 1700000001 }]);
  }
});

test('a proof of the only entry of a tree has no inclusion hash, and a leaf hash may be given instead of the entry', () => {
  const single = loggedTree(1);
  const text = formatTlogProof({ index: 0, inclusionPath: [], checkpoint: single.note });
  assert.equal(text, `${TLOG_PROOF_HEADER}\nindex 0\n\n${single.note}`);
  const verdict = verifyTlogProof(parseTlogProof(text), { leafHash: leafHash(single.entries[0]!) }, POLICY);
  assert.ok(verdict.ok, verdict.ok ? '' : verdict.problem);
});

test('a changed entry, index, hash or root hash is refused', () => {
  const proof = tree.proof(5);
  const problem = (p: TlogProof, entry: Uint8Array = tree.entries[5]!) => {
    const verdict = verifyTlogProof(p, { entry }, POLICY);
    return verdict.ok ? 'ok' : verdict.problem;
  };
  assert.equal(problem(proof), 'ok');
  const changed = Buffer.from(tree.entries[5]!);
  changed[changed.length - 3]! ^= 0x01;
  assert.equal(problem(proof, changed), 'the inclusion path does not lead from entry 5 to the checkpoint\'s root hash');
  assert.match(problem({ ...proof, index: 4 }), /does not lead from entry 4/);
  assert.equal(problem({ ...proof, index: 13 }), 'index 13 is not in a tree of 13 entries');
  const flipped = proof.inclusionPath.map((h) => Buffer.from(h));
  flipped[2]![0]! ^= 0x80;
  assert.match(problem({ ...proof, inclusionPath: flipped }), /does not lead from entry 5/);
  assert.match(problem({ ...proof, inclusionPath: proof.inclusionPath.slice(0, 3) }), /does not lead from entry 5/);
  assert.match(problem({ ...proof, inclusionPath: [...proof.inclusionPath].reverse() }), /does not lead from entry 5/);
  // Another root in the note: the log's signature no longer covers it.
  const otherRoot = proof.checkpoint.replace(/\n[A-Za-z0-9+/]{43}=\n/, `\n${b64(sha('other'))}\n`);
  assert.notEqual(otherRoot, proof.checkpoint);
  assert.match(problem({ ...proof, checkpoint: otherRoot }), /the log's signature does not verify/);
});

test('a missing witness, a stranger\'s cosignature or a wrong log key fails the policy, naming what is wrong', () => {
  const proof = tree.proof(5);
  const withoutW2 = proof.checkpoint.split('\n').filter((l) => !l.startsWith('— w2.example ')).join('\n');
  const missing = verifyTlogProof({ ...proof, checkpoint: withoutW2 }, { entry: tree.entries[5]! }, POLICY);
  assert.equal(missing.ok, false);
  assert.equal(missing.ok ? '' : missing.problem, 'the quorum "both" is not met: group both has 1 of the 2 it needs (of 2); no cosignature from w2');
  assert.deepEqual(missing.ok ? [] : missing.quorum?.missing, ['w2']);

  const stranger = cosigner('w2.example', generateKeyPairSync('ed25519').privateKey);
  const strangers = `${withoutW2}${cosignCheckpoint(tree.text, stranger, 1700000001)}`;
  const notCounted = verifyTlogProof({ ...proof, checkpoint: strangers }, { entry: tree.entries[5]! }, POLICY);
  assert.match(notCounted.ok ? '' : notCounted.problem, /no cosignature from w2$/, 'a line by another key of the same name is ignored');

  const otherLog = noteSigner(log.name, generateKeyPairSync('ed25519').privateKey);
  const policy = parsePolicy(`log ${formatVerifierKey(otherLog.name, otherLog.publicKeyRaw)}\nquorum none\n`);
  const wrongKey = verifyTlogProof(proof, { entry: tree.entries[5]! }, policy);
  assert.match(wrongKey.ok ? '' : wrongKey.problem, /not signed by a log of that name/);
});

test('a malformed proof is refused, with its line', () => {
  // The refused inputs of transparency-dev/formats proof/tlog_proof_test.go, TestUnmarshalErrors, with a real note as the checkpoint.
  const note = tree.note;
  refuses(`wrong-header\nindex 0\n\n${note}`, 1, /the first line must be "c2sp\.org\/tlog-proof@v1"/);
  refuses(`c2sp.org/tlog-proof@v1\nextra !!notbase64!!\nindex 0\n\n${note}`, 2, /extra data is not standard base64/);
  refuses(`c2sp.org/tlog-proof@v1\n\n\n${note}`, 2, /expected "index <n>"/);
  refuses(`c2sp.org/tlog-proof@v1\nindex notanumber\n\n${note}`, 2, /expected "index <n>"/);
  refuses(`c2sp.org/tlog-proof@v1\nindex -5\n\n${note}`, 2, /expected "index <n>"/);
  refuses(`c2sp.org/tlog-proof@v1\nindex 0\n!!notbase64!!\n\n${note}`, 3, /32-byte hash in standard base64/);
  refuses(`c2sp.org/tlog-proof@v1\nindex 0\n${b64(Buffer.alloc(64))}\n\n${note}`, 3, /32-byte hash/);
  // And what the spec's grammar rules out besides.
  refuses(`c2sp.org/tlog-proof@v1\nindex 05\n\n${note}`, 2, /without leading zeros/);
  refuses(`c2sp.org/tlog-proof@v1\nindex 9007199254740992\n\n${note}`, 2, /too large/);
  refuses(`c2sp.org/tlog-proof@v1\nindex 1\nextra AAAA\n\n${note}`, 3, /32-byte hash/);
  refuses(`c2sp.org/tlog-proof@v1\nindex 1\n${b64(sha('a')).replace('=', '')}\n\n${note}`, 3, /standard base64/);
  // Without its blank line, the checkpoint's first line is read as a hash.
  refuses(`c2sp.org/tlog-proof@v1\nindex 1\n${note}`, 3, /32-byte hash/);
  refuses(`c2sp.org/tlog-proof@v1\nindex 1\n\n${tree.text}`, undefined, /not a signed note/);
  refuses(`c2sp.org/tlog-proof@v1\nindex 1\n`, undefined, /no blank line before the checkpoint/);
  refuses(Buffer.concat([Buffer.from(`c2sp.org/tlog-proof@v1\nextra \xff\n`, 'latin1'), Buffer.from(`index 1\n\n${note}`)]), undefined, /not valid UTF-8/);
  assert.throws(() => formatTlogProof({ index: -1, inclusionPath: [], checkpoint: note }), ProofError);
  assert.throws(() => formatTlogProof({ index: 1, inclusionPath: [Buffer.alloc(31)], checkpoint: note }), ProofError);
  assert.throws(() => formatTlogProof({ index: 1, inclusionPath: [], checkpoint: tree.text }), /not a signed note/);
});
