// The runtime-neutral modules of src/tlog/ (bytes.ts, merkle-path.ts, note-format.ts), which the
// audit console bundles and checks a record with through Web Crypto (web/console/verify.ts), used
// here as the page uses them, with Node's Web Crypto (the same API as the browser's), and held to
// the answers of the Node side (merkle.ts, signed-note.ts) and to the published vectors.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeBase64Strict, encodeBase64, fromHex, toHex } from '../src/tlog/bytes.js';
import { inclusionPathSides, leafHashWith, rootFromInclusionPath } from '../src/tlog/merkle-path.js';
import { TreeBuilder, inclusionProof, leafHash, verifyInclusion, type Hash, type NodeKey } from '../src/tlog/merkle.js';
import { NoteError, parseCheckpoint, signaturesBy, signedMessage, splitNote, verifierKeyWith } from '../src/tlog/note-format.js';
import { ed25519PublicKeyRaw, openNote, parseVerifierKey } from '../src/tlog/signed-note.js';

const subtle = globalThis.crypto.subtle;
const sha256 = async (data: Uint8Array<ArrayBuffer>): Promise<Uint8Array> => new Uint8Array(await subtle.digest('SHA-256', data));

async function ed25519Verify(publicKey: Uint8Array, signature: Uint8Array, message: Uint8Array): Promise<boolean> {
  const key = await subtle.importKey('raw', new Uint8Array(publicKey), { name: 'Ed25519' }, false, ['verify']);
  return subtle.verify({ name: 'Ed25519' }, key, new Uint8Array(signature), new Uint8Array(message));
}

// The published vectors test/signed-note.test.ts reads: Go's sumdb/note tests, and the examples
// of the C2SP signed-note and tlog-checkpoint specifications.
const PETER_VKEY = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';
const ENOCH_VKEY = 'EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop';
const GO_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const PETER_SIG = '— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n';
const ENOCH_SIG = '— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n';
const SPEC_VKEY = 'example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k';
const SPEC_NOTE = 'This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n';
const SPEC_CHECKPOINT_TEXT = 'example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n';

/** What the console does with a note and a published key: every line by the key verifies, and there is one. */
async function consoleAccepts(noteText: string, vkey: string): Promise<boolean> {
  const key = await verifierKeyWith(sha256, vkey);
  const note = splitNote(noteText);
  const lines = signaturesBy(note, key.name, key.keyHash);
  if (lines.length === 0) return false;
  for (const s of lines) if (!(await ed25519Verify(key.publicKey, s.signature, signedMessage(note.text)))) return false;
  return true;
}

/** What signed-note.ts's openNote says of the same: true when the key's signature verified. */
function nodeAccepts(noteText: string, vkey: string): boolean {
  try {
    return openNote(noteText, [parseVerifierKey(vkey)]).signatures.some((s) => s.verifiedBy);
  } catch (err) {
    if (err instanceof NoteError) return false;
    throw err;
  }
}

test('strict base64 reads and writes what Buffer does, and refuses every other spelling', () => {
  for (let n = 0; n <= 70; n++) {
    const bytes = Buffer.from(Array.from({ length: n }, (_, i) => (i * 37 + n * 11) % 256));
    const text = bytes.toString('base64');
    assert.equal(encodeBase64(bytes), text);
    assert.deepEqual(Buffer.from(decodeBase64Strict(text)!), bytes, text);
  }
  const root = Buffer.alloc(32, 0xab).toString('base64');
  for (const bad of [root.replace('=', ''), Buffer.alloc(32, 0xff).toString('base64url'), `${root.slice(0, 42)}r=`, ` ${root}`, `${root}\n`, 'AB==', 'AAB=', 'A===', 'AA=A', 'AAAA\nAAAA']) {
    assert.equal(decodeBase64Strict(bad), undefined, JSON.stringify(bad));
  }
  assert.deepEqual(decodeBase64Strict(''), new Uint8Array(0));
  assert.equal(decodeBase64Strict(42 as unknown as string), undefined);
  assert.equal(toHex(fromHex('c74f20a3')!), 'c74f20a3');
  for (const bad of ['C74F20A3', 'c74f20a', 'c74f20ag']) assert.equal(fromHex(bad), undefined, bad);
});

test('the inclusion check over Web Crypto (merkle-path.ts) reaches merkle.ts\'s roots on every leaf of every tree of 1..40 leaves, and fails where verifyInclusion fails', async () => {
  const MAX = 40;
  const leaves = Array.from({ length: MAX }, (_, i) => leafHash(`entry ${i}`));
  const nodes = new Map<string, Hash>();
  const id = (k: NodeKey) => `${k.level}:${k.index}`;
  const builder = new TreeBuilder();
  const roots: Hash[] = [builder.root()];
  leaves.forEach((leaf, index) => {
    nodes.set(id({ level: 0, index }), leaf);
    for (const { key, hash } of builder.append(leaf)) nodes.set(id(key), hash);
    roots.push(builder.root());
  });
  const get = (k: NodeKey) => nodes.get(id(k))!;
  for (let size = 1; size <= MAX; size++) {
    const root = roots[size]!;
    /** Whether the console's check accepts the path, asserted to be verifyInclusion's answer. */
    const agrees = async (leaf: Hash, index: number, claimedSize: number, path: Hash[], what: string) => {
      const reached = await rootFromInclusionPath(sha256, leaf, index, claimedSize, path);
      const accepted = reached !== undefined && Buffer.from(reached).equals(root);
      assert.equal(accepted, verifyInclusion(leaf, index, claimedSize, path, root), `${what}: leaf ${index} of ${size}`);
      return accepted;
    };
    for (let index = 0; index < size; index++) {
      const leaf = leaves[index]!;
      const proof = inclusionProof(index, size, get);
      assert.equal(await agrees(leaf, index, size, proof, 'genuine'), true);
      await agrees(leaf, index + 1, size, proof, 'claimed one later');
      await agrees(leaf, index, size + 1, proof, 'claimed in a larger tree');
      await agrees(leaves[(index + 1) % MAX]!, index, size, proof, 'another leaf');
      await agrees(leaf, index, size, proof.slice(0, -1), 'dropped');
      await agrees(leaf, index, size, [...proof, root], 'extended');
      if (proof.length > 0) assert.equal(await agrees(leaf, index, size, proof.map((h, i) => (i === 0 ? Buffer.from(h).fill(h[0]! ^ 1, 0, 1) : h)), 'entry flipped'), false);
    }
  }
  assert.equal(await rootFromInclusionPath(sha256, leaves[0]!, 0, 2, [Buffer.alloc(31)]), undefined, 'an entry that is not 32 bytes');
  assert.equal(await rootFromInclusionPath(sha256, leaves[0]!, -1, 2, [leaves[1]!]), undefined);
  assert.deepEqual(Buffer.from(await leafHashWith(sha256, Buffer.from('entry 7'))), leafHash('entry 7'));
});

test('the shape of a path (inclusionPathSides) past 2^32: defined for the proof\'s own length alone', () => {
  const h = Buffer.alloc(32, 1);
  for (const [index, size] of [[2 ** 40 + 5, 2 ** 41], [2 ** 32 + 1, 2 ** 53 - 1], [3, 2 ** 33], [2 ** 52 - 1, 2 ** 52], [2 ** 53 - 2, 2 ** 53 - 1]] as const) {
    const length = inclusionProof(index, size, () => h).length;
    assert.equal(inclusionPathSides(index, size, length)?.length, length, `${index} of ${size}`);
    assert.equal(inclusionPathSides(index, size, length - 1), undefined);
    assert.equal(inclusionPathSides(index, size, length + 1), undefined);
  }
  assert.equal(inclusionPathSides(5, 5, 3), undefined);
  assert.equal(inclusionPathSides(0, 2 ** 53, 53), undefined);
});

test('verifier keys read with Web Crypto\'s SHA-256 (verifierKeyWith) are the keys parseVerifierKey reads, and each of its refusals is one here', async () => {
  for (const [vkey, hash] of [[PETER_VKEY, 'c74f20a3'], [ENOCH_VKEY, 'af0cfe78'], [SPEC_VKEY, '530d903a']] as const) {
    const key = await verifierKeyWith(sha256, vkey);
    const node = parseVerifierKey(vkey);
    assert.equal(toHex(key.keyHash), hash);
    assert.equal(key.name, node.name);
    assert.deepEqual(Buffer.from(key.publicKey), ed25519PublicKeyRaw(node.publicKey));
  }
  const refusedHere = async (vkey: string) => verifierKeyWith(sha256, vkey).then(() => false, (err: unknown) => err instanceof NoteError);
  const variants = [
    ...Array.from({ length: PETER_VKEY.length }, (_, i) => PETER_VKEY.slice(0, i) + String.fromCharCode(PETER_VKEY.charCodeAt(i) + 1) + PETER_VKEY.slice(i + 1)),
    ...Array.from({ length: PETER_VKEY.length }, (_, i) => PETER_VKEY.slice(0, i)),
    ...Array.from({ length: PETER_VKEY.length }, (_, i) => PETER_VKEY.slice(i + 1)),
    'PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==',
    'PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW',
  ];
  for (const vkey of variants) {
    assert.throws(() => parseVerifierKey(vkey), NoteError, vkey);
    assert.equal(await refusedHere(vkey), true, vkey);
  }
  await assert.rejects(verifierKeyWith(sha256, 'PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW'), /unsupported verifier key type 0x65/);
});

test('the console\'s signature check (note-format.ts and Web Crypto\'s Ed25519) accepts Go\'s and the spec\'s notes and refuses what openNote refuses', async () => {
  const peterNote = `${GO_TEXT}\n${PETER_SIG}`;
  const cases: Array<[string, string, string]> = [
    ['Go\'s note', peterNote, PETER_VKEY],
    ['Go\'s note, cosigned', `${GO_TEXT}\n${PETER_SIG}${ENOCH_SIG}`, ENOCH_VKEY],
    ['the spec\'s note', SPEC_NOTE, SPEC_VKEY],
    ['a changed text', SPEC_NOTE.replace('example message', 'example massage'), SPEC_VKEY],
    ['a changed signature', peterNote.replace('x08go/ZJ', 'x08go/ZK'), PETER_VKEY],
    ['another key\'s note', peterNote, ENOCH_VKEY],
    ['a second, bad line by the same key', `${peterNote}${PETER_SIG.replace('IAQx', 'IAQy')}`, PETER_VKEY],
  ];
  const answers: boolean[] = [];
  for (const [what, note, vkey] of cases) {
    const here = await consoleAccepts(note, vkey);
    assert.equal(here, nodeAccepts(note, vkey), what);
    answers.push(here);
  }
  assert.deepEqual(answers, [true, true, true, false, false, false, false]);

  for (const bad of [GO_TEXT, `${GO_TEXT}\n`, `\x01${peterNote}`, `${peterNote}Unexpected line.\n`, `${GO_TEXT}\n${PETER_SIG.repeat(101)}`]) {
    assert.throws(() => splitNote(bad), /^NoteError: malformed note/, JSON.stringify(bad.slice(0, 40)));
  }
  const c = parseCheckpoint(SPEC_CHECKPOINT_TEXT);
  assert.deepEqual([c.origin, c.treeSize, toHex(c.rootHash), c.extensions], ['example.com/behind-the-sofa', 20852163, '0ac5186a91863e8e1d90c808014aa89bf5da8e3ee1d9f07630f0378f68f1ab62', []]);
});
