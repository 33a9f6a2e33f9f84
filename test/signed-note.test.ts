// Signed notes and checkpoints (tlog/signed-note.ts) against the published vectors
// of Go's golang.org/x/mod/sumdb/note and of the C2SP specs, plus a check written from the
// spec with node:crypto alone, so the module cannot agree only with itself.
import assert from 'node:assert/strict';
import { createHash, createPublicKey, generateKeyPairSync, verify, type KeyObject } from 'node:crypto';
import { test } from 'node:test';
import {
  NoteError, ed25519PublicKeyFromRaw, ed25519PublicKeyRaw, formatCheckpoint, formatVerifierKey,
  generateEd25519PrivateKeyPem, keyHash, loadEd25519PrivateKey, noteSigner, noteVerifier, openNote,
  parseCheckpoint, parseVerifierKey, publicKeyPem, signNote, signText, type NoteVerifier,
} from '../src/tlog/signed-note.js';
import { goPrivateKey } from './helpers/tlog-vectors.js';

// From golang/mod, sumdb/note/note_test.go (TestNewVerifier, TestNewSigner, TestSign, TestOpen).
const PETER_SKEY = 'PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz';
const PETER_VKEY = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';
const ENOCH_VKEY = 'EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop';
const GO_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const PETER_SIG = '— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n';
const ENOCH_SIG = '— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n';
const PETER_NOTE = `${GO_TEXT}\n${PETER_SIG}`;

// From C2SP/C2SP signed-note.md, "Verifier keys" > "Example" (added in commit 72cc8fe).
const SPEC_VKEY = 'example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k';
const SPEC_NOTE = 'This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n';
// From C2SP/C2SP signed-note.md, the opening example (its key is not published).
const SPEC_POEM_TEXT = 'Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di sole:\n\ned è subito sera.\n';
const SPEC_POEM = `${SPEC_POEM_TEXT}\n— quasimodo.example/salvatore NnugSzTjtVAewIS+Z/iJhUPeFDkO/5QQ2i5ddnGITLlC+EhfLW9oJKONrMouFSQU0xMcXxj99ihAQwaqP3ZekRwNtIc=\n`;
// From C2SP/C2SP tlog-checkpoint.md, the opening example (its key is not published either).
const SPEC_CHECKPOINT_TEXT = 'example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n';
const SPEC_CHECKPOINT = `${SPEC_CHECKPOINT_TEXT}\n— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n`;

// Go's tests slice byte strings; the em dash is 3 bytes in UTF-8, 1 unit in a JS string.
function insertAtByte(s: string, at: number, insert: string): string {
  const b = Buffer.from(s, 'utf8');
  return Buffer.concat([b.subarray(0, at), Buffer.from(insert), b.subarray(at)]).toString('utf8');
}

function refuses(fn: () => unknown, message?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof NoteError, `expected a NoteError, got ${String(err)}`);
    if (message) assert.match(err.message, message);
    return true;
  });
}

const peter = parseVerifierKey(PETER_VKEY);
const enoch = parseVerifierKey(ENOCH_VKEY);

test('Go\'s verifier keys parse to their published key hashes and format back to the same strings', () => {
  assert.equal(peter.name, 'PeterNeumann');
  assert.equal(peter.keyHash.toString('hex'), 'c74f20a3');
  assert.equal(enoch.keyHash.toString('hex'), 'af0cfe78');
  assert.equal(formatVerifierKey('PeterNeumann', ed25519PublicKeyRaw(peter.publicKey)), PETER_VKEY);
  assert.equal(formatVerifierKey('EnochRoot', ed25519PublicKeyRaw(enoch.publicKey)), ENOCH_VKEY);
  assert.equal(keyHash('PeterNeumann', ed25519PublicKeyRaw(peter.publicKey)).toString('hex'), 'c74f20a3');
});

test('every substring and every one-character change of Go\'s verifier key is refused, as in TestNewVerifier', () => {
  for (let i = 0; i <= PETER_VKEY.length; i++) {
    for (let j = i + 1; j <= PETER_VKEY.length; j++) {
      if (i !== 0 || j !== PETER_VKEY.length) refuses(() => parseVerifierKey(PETER_VKEY.slice(i, j)));
    }
  }
  for (let i = 0; i < PETER_VKEY.length; i++) {
    const mangled = PETER_VKEY.slice(0, i) + String.fromCharCode(PETER_VKEY.charCodeAt(i) + 1) + PETER_VKEY.slice(i + 1);
    refuses(() => parseVerifierKey(mangled));
  }
  // Wrong key length and unknown algorithm, each with a hash adjusted to match.
  refuses(() => parseVerifierKey('PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY=='), /malformed verifier key/);
  refuses(() => parseVerifierKey('PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW'), /unsupported verifier key type 0x65/);
});

test('Go\'s signed note opens under its verifier key, and Enoch\'s cosignature only under his', () => {
  const opened = openNote(PETER_NOTE, [peter]);
  assert.equal(opened.text, GO_TEXT);
  assert.equal(opened.signatures.length, 1);
  assert.equal(opened.signatures[0]!.verifiedBy, peter);
  assert.equal(opened.signatures[0]!.name, 'PeterNeumann');
  assert.equal(opened.signatures[0]!.keyHash.toString('hex'), 'c74f20a3');
  assert.equal(opened.signatures[0]!.signature.length, 64);

  const both = `${GO_TEXT}\n${PETER_SIG}${ENOCH_SIG}`;
  const one = openNote(both, [peter]);
  assert.deepEqual(one.signatures.map((s) => [s.name, s.verifiedBy?.name]), [['PeterNeumann', 'PeterNeumann'], ['EnochRoot', undefined]]);
  const two = openNote(both, [enoch, peter]);
  assert.deepEqual(two.signatures.map((s) => s.verifiedBy?.name), ['PeterNeumann', 'EnochRoot']);
  const none = openNote(both, []);
  assert.deepEqual(none.signatures.map((s) => s.verifiedBy), [undefined, undefined]);
});

test('signing Go\'s text with Go\'s private key seed gives Go\'s signed note byte for byte', () => {
  const { name, hash, key } = goPrivateKey(PETER_SKEY);
  const signer = noteSigner(name, key);
  assert.equal(signer.keyHash.toString('hex'), hash);
  assert.deepEqual(signer.publicKeyRaw, ed25519PublicKeyRaw(peter.publicKey));
  assert.equal(signNote(GO_TEXT, signer), PETER_NOTE);
  const line = Buffer.from(PETER_SIG.slice(2, -1).split(' ')[1]!, 'base64');
  assert.deepEqual(signText(GO_TEXT, signer), line.subarray(4));

  // Re-signing replaces the signer's own earlier (here corrupted) signature, as Go's Sign does.
  const corrupted = Buffer.from(line);
  corrupted[10]! ^= 1;
  const stale = `${GO_TEXT}\n— PeterNeumann ${corrupted.toString('base64')}\n`;
  assert.equal(signNote(stale, signer), PETER_NOTE);
  // And appends after someone else's.
  assert.equal(signNote(`${GO_TEXT}\n${ENOCH_SIG}`, signer), `${GO_TEXT}\n${ENOCH_SIG}${PETER_SIG}`);
});

test('Go\'s refusals: a corrupted signature, too many signatures, and each malformed message of TestOpen', () => {
  refuses(() => openNote(`${GO_TEXT}\n${insertAtByte(PETER_SIG, 60, 'ABCD')}`, [peter]), /^invalid signature for key PeterNeumann\+c74f20a3$/);
  refuses(() => openNote(`${GO_TEXT}\n${PETER_SIG.repeat(101)}`, [peter]), /more than 100/);
  assert.equal(openNote(`${GO_TEXT}\n${PETER_SIG.repeat(100)}`, [peter]).signatures.length, 1);

  const bad: Array<string | Buffer> = [
    GO_TEXT,
    `${GO_TEXT}\n`,
    `${GO_TEXT}\n${PETER_SIG.slice(0, -1)}`,
    `\x01${PETER_NOTE}`,
    Buffer.concat([Buffer.of(0xff), Buffer.from(PETER_NOTE)]),
    `${GO_TEXT}\n— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=`,
    `${PETER_NOTE}Unexpected line.\n`,
  ];
  for (const msg of bad) refuses(() => openNote(msg, [peter]), /^malformed note/);
});

test('repeated lines count once, and an invalid signature from an unknown key is ignored, as in TestOpen', () => {
  const enochABCD = insertAtByte(ENOCH_SIG, 60, 'ABCD');
  const opened = openNote(`${GO_TEXT}\n${PETER_SIG}${PETER_SIG}${ENOCH_SIG}${ENOCH_SIG}${enochABCD}`, [peter]);
  assert.deepEqual(opened.signatures.map((s) => [s.name, s.verifiedBy !== undefined]),
    [['PeterNeumann', true], ['EnochRoot', false], ['EnochRoot', false]]);
});

test('a signature that shares only the name or only the key hash with a known key is ignored, not verified', () => {
  const misnamed = openNote(`${GO_TEXT}\n${PETER_SIG.replace('PeterNeumann', 'CarmenSandiego')}`, [peter]);
  assert.equal(misnamed.signatures[0]!.verifiedBy, undefined);
  const rehashed = openNote(`${GO_TEXT}\n${PETER_SIG.replace('x08g', 'xxxx')}`, [peter]);
  assert.equal(rehashed.signatures[0]!.verifiedBy, undefined);
});

test('the signed-note spec\'s verifier key example verifies its note', () => {
  const v = parseVerifierKey(SPEC_VKEY);
  assert.equal(v.keyHash.toString('hex'), '530d903a');
  const opened = openNote(SPEC_NOTE, [v]);
  assert.equal(opened.text, 'This is an example message.\n');
  assert.equal(opened.signatures[0]!.verifiedBy, v);
  refuses(() => openNote(SPEC_NOTE.replace('example message', 'example massage'), [v]), /^invalid signature/);
});

test('the spec\'s opening note splits at its last blank line, keeping the blank line inside the text', () => {
  const opened = openNote(Buffer.from(SPEC_POEM, 'utf8'), []);
  assert.equal(opened.text, SPEC_POEM_TEXT);
  assert.equal(opened.signatures[0]!.name, 'quasimodo.example/salvatore');
  assert.equal(opened.signatures[0]!.keyHash.toString('hex'), '367ba04b');
});

test('the tlog-checkpoint spec\'s example parses and formats back to the same text', () => {
  const opened = openNote(SPEC_CHECKPOINT, []);
  assert.equal(opened.text, SPEC_CHECKPOINT_TEXT);
  assert.equal(opened.signatures[0]!.keyHash.toString('hex'), '033de0ae');
  const c = parseCheckpoint(opened.text);
  assert.equal(c.origin, 'example.com/behind-the-sofa');
  assert.equal(c.treeSize, 20852163);
  assert.equal(c.rootHash.toString('hex'), '0ac5186a91863e8e1d90c808014aa89bf5da8e3ee1d9f07630f0378f68f1ab62');
  assert.deepEqual(c.extensions, []);
  assert.equal(formatCheckpoint(c), SPEC_CHECKPOINT_TEXT);
});

test('a note from signNote checks out against the spec computed here with node:crypto alone', () => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const name = 'teamlog.example/audit';
  const text = 'teamlog.example/audit\n7\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\nœuvre — ünïcode\n';
  const note = signNote(text, noteSigner(name, privateKey));

  const split = note.lastIndexOf('\n\n');
  assert.equal(note.slice(0, split + 1), text);
  const line = note.slice(split + 2);
  assert.match(line, /^\u2014 [^ ]+ [A-Za-z0-9+/]+=*\n$/);
  const [sigName, b64] = line.slice(2, -1).split(' ') as [string, string];
  assert.equal(sigName, name);
  const bytes = Buffer.from(b64, 'base64');
  assert.equal(bytes.length, 4 + 64);
  // The last 32 bytes of an Ed25519 SPKI DER are the raw public key (RFC 8410).
  const raw = publicKey.export({ type: 'spki', format: 'der' }).subarray(-32);
  const id = createHash('sha256').update(Buffer.concat([Buffer.from(`${name}\n`), Buffer.of(0x01), raw])).digest().subarray(0, 4);
  assert.deepEqual(bytes.subarray(0, 4), id);
  assert.ok(verify(null, Buffer.from(text, 'utf8'), publicKey, bytes.subarray(4)));
  assert.equal(formatVerifierKey(name, raw), `${name}+${id.toString('hex')}+${Buffer.concat([Buffer.of(1), raw]).toString('base64')}`);
  assert.deepEqual(ed25519PublicKeyRaw(privateKey), raw);
  assert.ok(ed25519PublicKeyFromRaw(raw).equals(publicKey));
});

test('a checkpoint survives format, sign, cosign and open, and reads back as the same checkpoint', () => {
  const log = noteSigner('teamlog.example/audit', generateKeyPairSync('ed25519').privateKey);
  const witness = noteSigner('witness.example/w1', generateKeyPairSync('ed25519').privateKey);
  const checkpoint = {
    origin: 'teamlog.example/audit', treeSize: 1234,
    rootHash: createHash('sha256').update('root').digest(), extensions: ['— not a signature', 'x'],
  };
  const text = formatCheckpoint(checkpoint);
  assert.equal(text, `teamlog.example/audit\n1234\n${checkpoint.rootHash.toString('base64')}\n— not a signature\nx\n`);
  const signed = signNote(signNote(text, log), witness);
  const logV = noteVerifier(log.name, createPublicKey(log.privateKey));
  const witnessV = parseVerifierKey(formatVerifierKey(witness.name, witness.publicKeyRaw));
  const opened = openNote(signed, [witnessV, logV]);
  assert.equal(opened.text, text);
  assert.deepEqual(opened.signatures.map((s) => s.verifiedBy?.name), [log.name, witness.name]);
  assert.deepEqual(parseCheckpoint(opened.text), checkpoint);
  // Signing again by the log replaces its signature rather than adding a second one.
  assert.equal(openNote(signNote(signed, log), [logV]).signatures.length, 2);
});

test('a tampered text, a wrong key, a truncated signature and a malformed layout are all refused', () => {
  const signer = noteSigner('teamlog.example/audit', generateKeyPairSync('ed25519').privateKey);
  const v = noteVerifier(signer.name, signer.privateKey);
  const text = formatCheckpoint({ origin: 'teamlog.example/audit', treeSize: 99, rootHash: Buffer.alloc(32, 7), extensions: [] });
  const note = signNote(text, signer);
  assert.equal(openNote(note, [v]).signatures[0]!.verifiedBy, v);

  for (const at of [0, text.indexOf('99'), text.length - 3]) {
    const flipped = note.slice(0, at) + String.fromCharCode(note.charCodeAt(at) ^ 1) + note.slice(at + 1);
    refuses(() => openNote(flipped, [v]), /^invalid signature/);
  }
  // Another key under the same name has another key hash: the signature is simply not its.
  const other = noteVerifier(signer.name, generateKeyPairSync('ed25519').publicKey);
  assert.equal(openNote(note, [other]).signatures[0]!.verifiedBy, undefined);
  // A verifier claiming the signer's name and hash with another key must fail, not skip.
  const impostor: NoteVerifier = { ...v, publicKey: other.publicKey };
  refuses(() => openNote(note, [impostor]), /^invalid signature/);
  refuses(() => openNote(note, [v, impostor]), /^ambiguous key/);
  assert.equal(openNote(note, [v, { ...v }]).signatures.length, 1);

  const b64 = note.slice(note.lastIndexOf(' ') + 1, -1);
  refuses(() => openNote(note.replace(b64, b64.slice(0, -4)), [v]), /^invalid signature/); // 60-byte signature
  refuses(() => openNote(note.replace(b64, b64.slice(0, -1)), [v]), /^malformed note/); // broken base64
  refuses(() => openNote(note.replace(b64, b64.replace(/=$/, '')), [v]), /^malformed note/); // unpadded
  refuses(() => openNote(note.replace('\n\n', '\n'), [v]), /no blank line/);
  refuses(() => openNote(note.replace('\u2014 ', '- '), [v]), /em dash/);
  refuses(() => openNote(note.replace('\u2014 ', '\u2013 '), [v]), /em dash/);
  refuses(() => openNote(note.replace('\u2014 ', '\u2014'), [v]), /em dash/);
  refuses(() => openNote(note.replace(`${signer.name} `, `${signer.name}  `), [v]), /^malformed note/);
  refuses(() => openNote(note + note, [v]), /^invalid signature/); // second note appended
  refuses(() => openNote(`${note}\n`, [v]), /^malformed note/);
  refuses(() => openNote(`${note.slice(0, -1)}x`, [v]), /end with a newline/);
  refuses(() => openNote(`${note}- trailer\n`, [v]), /em dash/);
});

test('invalid UTF-8 and control characters other than newline are refused wherever the spec forbids them', () => {
  const signer = noteSigner('a', generateKeyPairSync('ed25519').privateKey);
  const v = noteVerifier('a', signer.privateKey);
  const note = signNote('hello\n', signer);
  refuses(() => openNote(Buffer.concat([Buffer.from('hel'), Buffer.of(0xc3), Buffer.from(note.slice(3))]), [v]), /UTF-8/);
  refuses(() => openNote(Buffer.concat([Buffer.from(note), Buffer.of(0xed, 0xa0, 0x80)]), [v]), /UTF-8/); // encoded surrogate
  refuses(() => openNote(`\uD800${note}`, [v]), /UTF-8/);
  for (const c of ['\x00', '\t', '\r', '\x1b', '\x1f']) {
    refuses(() => openNote(`hel${c}${note.slice(3)}`, [v]), /control character/);
    refuses(() => openNote(`${note.slice(0, -1)}${c}\n`, [v]), /^malformed note/);
    refuses(() => signNote(`hel${c}lo\n`, signer), /control character/);
    refuses(() => signText(`hel${c}lo\n`, signer), /control character/);
  }
  refuses(() => signNote('no final newline', signer), /end with a newline/);
  refuses(() => signNote('lone \uDC00 surrogate\n', signer), /UTF-8/);
  // U+FFFD and a byte order mark are valid UTF-8 and are signed as they are.
  const odd = '\uFEFFreplacement \uFFFD\n';
  assert.equal(openNote(Buffer.from(signNote(odd, signer)), [v]).text, odd);
});

test('key names with spaces, "+" or nothing at all are refused when signing or verifying', () => {
  const { privateKey } = generateKeyPairSync('ed25519');
  for (const name of ['', 'a b', 'a+b', 'a\u00a0b', 'a\u2003b', 'a\u0085b', 'a\u2028b', 'a\nb']) {
    refuses(() => noteSigner(name, privateKey), /invalid key name/);
    refuses(() => noteVerifier(name, privateKey), /invalid key name/);
    refuses(() => formatVerifierKey(name, Buffer.alloc(32)), /invalid key name/);
  }
  refuses(() => noteSigner('a', generateKeyPairSync('x25519').privateKey), /Ed25519/);
  refuses(() => noteSigner('a', createPublicKey(privateKey)), /private key/);
  refuses(() => ed25519PublicKeyFromRaw(Buffer.alloc(31)), /32 bytes/);
  const raw = ed25519PublicKeyRaw(privateKey);
  const vkey = formatVerifierKey('a', raw);
  refuses(() => parseVerifierKey(vkey.replace('+A', '+Ag')), /malformed verifier key/);
  const ecdsa = Buffer.concat([Buffer.of(0x02), raw]);
  const ecdsaHash = createHash('sha256').update(Buffer.concat([Buffer.from('a\n'), ecdsa])).digest().subarray(0, 4).toString('hex');
  refuses(() => parseVerifierKey(`a+${ecdsaHash}+${ecdsa.toString('base64')}`), /unsupported verifier key type 0x02/);
  refuses(() => parseVerifierKey(PETER_VKEY.replace('c74f20a3', 'C74F20A3')), /malformed verifier key/); // the spec's hex is lowercase
});

test('parseCheckpoint refuses missing lines, malformed sizes and roots, an empty origin and empty extension lines', () => {
  const root = Buffer.alloc(32, 0xab).toString('base64');
  const ok = `log\n5\n${root}\n`;
  assert.equal(parseCheckpoint(ok).treeSize, 5);
  assert.equal(parseCheckpoint(`log\n0\n${root}\n`).treeSize, 0);
  assert.equal(parseCheckpoint(`log\n9007199254740991\n${root}\n`).treeSize, Number.MAX_SAFE_INTEGER);
  const bad: Array<[string, RegExp]> = [
    ['', /end with a newline/],
    ['log\n5\n', /needs an origin/],
    [`log\n${root}\n`, /needs an origin/],
    [`log\n5\n${root}`, /end with a newline/],
    [`\n5\n${root}\n`, /origin is empty/],
    [`log\n05\n${root}\n`, /leading zeros/],
    [`log\n00\n${root}\n`, /leading zeros/],
    ...['-1', '+5', '5.0', '1e3', ' 5', '5 ', '0x5', '', '５'].map((s): [string, RegExp] => [`log\n${s}\n${root}\n`, /tree size/]),
    [`log\n9007199254740992\n${root}\n`, /too large/],
    [`log\n5\n${Buffer.alloc(31).toString('base64')}\n`, /root hash/],
    [`log\n5\n${Buffer.alloc(33).toString('base64')}\n`, /root hash/],
    [`log\n5\n${root.replace('=', '')}\n`, /root hash/],
    [`log\n5\n${Buffer.alloc(32, 0xff).toString('base64url')}=\n`, /root hash/],
    [`log\n5\n${root.slice(0, 42)}r=\n`, /root hash/], // non-canonical final character
    [`log\n5\n${Buffer.alloc(32).toString('hex')}\n`, /root hash/],
    [`log\n5\n ${root}\n`, /root hash/],
    [`${ok}\n`, /extension lines must be non-empty/],
    [`${ok}ext\n\nmore\n`, /extension lines must be non-empty/],
    [`log\r\n5\n${root}\n`, /control character/],
  ];
  for (const [text, message] of bad) refuses(() => parseCheckpoint(text), message);
});

test('formatCheckpoint refuses what parseCheckpoint would', () => {
  const c = { origin: 'log', treeSize: 1, rootHash: Buffer.alloc(32), extensions: [] as string[] };
  refuses(() => formatCheckpoint({ ...c, origin: '' }), /origin is empty/);
  refuses(() => formatCheckpoint({ ...c, origin: 'a\nb' }), /newline/);
  for (const treeSize of [-1, 1.5, Number.NaN, 2 ** 53]) refuses(() => formatCheckpoint({ ...c, treeSize }), /tree size/);
  refuses(() => formatCheckpoint({ ...c, rootHash: Buffer.alloc(31) }), /32 bytes/);
  refuses(() => formatCheckpoint({ ...c, extensions: ['ok', ''] }), /extension line 2 is empty/);
  refuses(() => formatCheckpoint({ ...c, extensions: ['a\nb'] }), /newline/);
});

test('key files: a generated PKCS#8 PEM loads and signs, other key types are refused by name', () => {
  const pem = generateEd25519PrivateKeyPem();
  assert.match(pem, /^-----BEGIN PRIVATE KEY-----\n/);
  const key = loadEd25519PrivateKey(pem);
  const spki = publicKeyPem(key);
  assert.match(spki, /^-----BEGIN PUBLIC KEY-----\n/);
  const v = noteVerifier('k', createPublicKey(spki));
  assert.ok(openNote(signNote('x\n', noteSigner('k', key)), [v]).signatures[0]!.verifiedBy);

  const pkcs8 = (k: KeyObject) => k.export({ type: 'pkcs8', format: 'pem' }).toString();
  refuses(() => loadEd25519PrivateKey(pkcs8(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey)), /expected an Ed25519 private key, got ec/);
  refuses(() => loadEd25519PrivateKey(pkcs8(generateKeyPairSync('x25519').privateKey)), /expected an Ed25519 private key, got x25519/);
  refuses(() => loadEd25519PrivateKey(spki), /cannot read the private key/);
  refuses(() => loadEd25519PrivateKey('not a key'), /cannot read the private key/);
});
