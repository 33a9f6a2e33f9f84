// Witness cosignatures (tlog/cosignature.ts), C2SP tlog-cosignature `cosignature/v1` with Ed25519,
// against a real checkpoint cosigned by witnesses of the public witness network, the spec's own
// example, the vectors of transparency-dev/formats, and tampered copies of each.
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync, verify } from 'node:crypto';
import { test } from 'node:test';
import {
  COSIGNATURE_ED25519, checkCosignatures, cosignCheckpoint, cosignatureKeyHash, cosignatureMessage, cosignatureTimestamp, cosignatureVerifier,
  cosigner, formatCosignatureVerifierKey, parseCosignatureVerifierKey, verifyCosignature, type Cosignature, formatCosignerKey, parseCosignerKey,
} from '../src/tlog/cosignature.js';
import { splitNote } from '../src/tlog/note-format.js';
import { REAL_LOG_VKEY, REAL_NOTE, REAL_TEXT, REAL_TIMESTAMP, REAL_WITNESSES, WIT1_SKEY, WIT1_VKEY, goPrivateKey } from './helpers/tlog-vectors.js';
import { NoteError, formatCheckpoint, noteSigner, noteVerifier, openNote, parseVerifierKey, signNote } from '../src/tlog/signed-note.js';

// From C2SP/C2SP tlog-cosignature.md: the checkpoint of its opening example (its keys are not
// published) and the signed message of "Ed25519 signed message".
const SPEC_TEXT = 'example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n';
const SPEC_COSIGNATURE = '— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==';
const SPEC_MESSAGE = 'cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n';

function lineOf(note: string, name: string): Cosignature {
  const line = splitNote(note).lines.find((l) => l.name === name);
  assert.ok(line, `a line by ${name}`);
  return line;
}

const CHECKPOINT = formatCheckpoint({ origin: 'example.com/teamlog', treeSize: 42, rootHash: createHash('sha256').update('root').digest(), extensions: [] });
const witnessKey = generateKeyPairSync('ed25519').privateKey;
const witness = cosigner('witness.example/w1', witnessKey);

test('a real checkpoint\'s cosignatures from the witness network verify, with the timestamp they carry', () => {
  for (const vkey of [REAL_WITNESSES.remora, REAL_WITNESSES['little-garden']]) {
    const v = parseCosignatureVerifierKey(vkey);
    assert.equal(formatCosignatureVerifierKey(v), vkey, 'the vkey is written back the same');
    assert.deepEqual(verifyCosignature(REAL_TEXT, lineOf(REAL_NOTE, v.name), v), { ok: true, timestamp: REAL_TIMESTAMP });
  }
});

test('the log\'s note key opens the cosigned note and hands the cosignature lines back unverified', () => {
  const opened = openNote(REAL_NOTE, [parseVerifierKey(REAL_LOG_VKEY)]);
  assert.equal(opened.text, REAL_TEXT);
  assert.deepEqual(opened.signatures.map((s) => [s.name, s.keyHash.toString('hex'), s.verifiedBy !== undefined]), [
    ['arche2025h1.staging.ct.transparency.dev', 'cd333cb1', false],
    ['arche2025h1.staging.ct.transparency.dev', 'ba2f06c0', true],
    ['transparency.dev/DEV:witness-little-garden', 'd8042a87', false],
    ['witness1.smartit.nu/witness1', 'a48c820f', false],
    ['remora.n621.de', 'da77ade7', false],
    ['witness.stagemole.eu', '67f7aea0', false],
  ]);
  const checks = checkCosignatures(opened.text, opened.signatures, [parseCosignatureVerifierKey(REAL_WITNESSES.remora), parseCosignatureVerifierKey(REAL_WITNESSES['little-garden'])]);
  assert.deepEqual(checks.map((c) => [c.verifier.name, c.timestamp, c.problems]), [
    ['remora.n621.de', REAL_TIMESTAMP, []],
    ['transparency.dev/DEV:witness-little-garden', REAL_TIMESTAMP, []],
  ]);
});

test('a real cosignature no longer verifies once the checkpoint, its timestamp or its signature changes', () => {
  const remora = parseCosignatureVerifierKey(REAL_WITNESSES.remora);
  const line = lineOf(REAL_NOTE, 'remora.n621.de');
  const resized = REAL_TEXT.replace('1432088532', '1432088533');
  assert.equal(verifyCosignature(resized, line, remora).ok, false);
  const later = Buffer.from(line.signature);
  later[7]! ^= 0x01; // the timestamp's last byte: one second later
  assert.deepEqual(verifyCosignature(REAL_TEXT, { ...line, signature: later }, remora), { ok: false, reason: 'bad-signature', problem: 'the cosignature by remora.n621.de+da77ade7 does not verify' });
  const flipped = Buffer.from(line.signature);
  flipped[40]! ^= 0x80;
  assert.equal(verifyCosignature(REAL_TEXT, { ...line, signature: flipped }, remora).ok, false);
});

test('the spec\'s example: its cosignature carries key ID 8d66cf3f and time 1679315147, and its signed message is built byte for byte', () => {
  const line = lineOf(`${SPEC_TEXT}\n${SPEC_COSIGNATURE}\n`, 'witness.example.com/w1');
  assert.equal(Buffer.from(line.keyHash).toString('hex'), '8d66cf3f');
  assert.equal(cosignatureTimestamp(line.signature), 1679315147);
  assert.equal(Buffer.from(cosignatureMessage(SPEC_TEXT, 1679315147)).toString('utf8'), SPEC_MESSAGE);
});

test('transparency-dev/formats\' timestamp vectors: 1727964367 read from a cosignature, none from a plain note signature', () => {
  // note/note_cosigv1_test.go, TestCoSigV1Timestamp ("works", "wrong type of signature").
  const cosig = Buffer.from('ZGhGuQAAAABm/qTPeyKXD+R2rzyQsxPiP8mXum7qq/iF0u4vanlqJyocWODBt97w9uL+8qT7S5gxEHWWOworDcFiEBYJXORmnFBOBA==', 'base64');
  const plain = Buffer.from('eQjRQm6eSKzFoiYalgwCPXu2y3ijtg68is9M46JKxuZB+dRfTmeQeDBoXnvxZx2ugnkyV+MUMLXpWs1hPb/W/4xkNQY=', 'base64');
  assert.equal(cosignatureTimestamp(cosig.subarray(4)), 1727964367);
  assert.equal(cosignatureTimestamp(plain.subarray(4)), undefined);
});

test('a cosigner\'s vkey is read only with type 0x04 and a key ID computed over 0x04', () => {
  // transparency-dev/formats note/note_cosigv1_test.go, TestCoSigV1NewVerifier's refused keys.
  assert.throws(() => parseCosignatureVerifierKey('bananas.sigstore.dev+12344556'), NoteError);
  assert.throws(() => parseCosignatureVerifierKey('rekor.sigstore.dev+12345678+THIS_IS_NOT_BASE64!'), NoteError);
  assert.throws(() => parseCosignatureVerifierKey('rekor.sigstore.dev+12345678+AwEB'), /unsupported cosignature key type 0x03/);
  assert.throws(() => parseCosignatureVerifierKey(REAL_WITNESSES.remora.replace('da77ade7', '00000000')), /key hash does not match/);
  // A log's note key is not a cosigner's, though Go's formats converts one silently.
  assert.throws(() => parseCosignatureVerifierKey(WIT1_VKEY), /0x01 is a log's note key/);
  assert.throws(() => parseCosignatureVerifierKey(`x+00000000+${Buffer.concat([Buffer.of(0x06), Buffer.alloc(1312)]).toString('base64')}`), /ML-DSA-44 cosignatures \(type 0x06\) are not supported yet/);
  assert.throws(() => parseCosignatureVerifierKey(`x+00000000+${Buffer.concat([Buffer.of(0x04), Buffer.alloc(31)]).toString('base64')}`), /not 32 bytes/);
});

test('a Go note key cosigns under the key ID of type 0x04, not its note key ID', () => {
  const { key } = goPrivateKey(WIT1_SKEY);
  const c = cosigner('Wit1', key);
  const noteKey = parseVerifierKey(WIT1_VKEY);
  assert.equal(noteKey.keyHash.toString('hex'), '55ee4561');
  const expected = createHash('sha256').update(Buffer.concat([Buffer.from('Wit1\n'), Buffer.of(0x04), c.publicKeyRaw])).digest().subarray(0, 4);
  assert.deepEqual(c.keyHash, expected);
  assert.notDeepEqual(c.keyHash, noteKey.keyHash);
  assert.equal(formatCosignatureVerifierKey(c), `Wit1+${expected.toString('hex')}+${Buffer.concat([Buffer.of(0x04), c.publicKeyRaw]).toString('base64')}`);
  const keyBytes = (vkey: string) => Buffer.from(vkey.slice(vkey.indexOf('+', vkey.indexOf('+') + 1) + 1), 'base64');
  assert.deepEqual(keyBytes(formatCosignatureVerifierKey(c)).subarray(1), keyBytes(WIT1_VKEY).subarray(1), 'the same Ed25519 key after the type byte');
});

test('a cosignature line is key ID ‖ big-endian timestamp ‖ Ed25519 signature over the spec\'s message', () => {
  const line = cosignCheckpoint(CHECKPOINT, witness, 1700000000);
  const m = /^— witness\.example\/w1 ([A-Za-z0-9+/=]+)\n$/.exec(line);
  assert.ok(m, line);
  const bytes = Buffer.from(m[1]!, 'base64');
  assert.equal(bytes.length, 4 + 8 + 64);
  assert.deepEqual(bytes.subarray(0, 4), cosignatureKeyHash('witness.example/w1', witness.publicKeyRaw, COSIGNATURE_ED25519));
  assert.equal(bytes.readBigUInt64BE(4), 1700000000n);
  // Checked with node:crypto alone, from the spec's text, not through the module.
  const message = Buffer.from(`cosignature/v1\ntime 1700000000\n${CHECKPOINT}`);
  assert.ok(verify(null, message, witness.publicKey, bytes.subarray(12)));
});

test('a cosigned note round-trips: signed by the log, cosigned, opened, and each cosignature found', () => {
  const log = noteSigner('example.com/teamlog', generateKeyPairSync('ed25519').privateKey);
  const other = cosigner('witness.example/w2', generateKeyPairSync('ed25519').privateKey);
  const note = signNote(CHECKPOINT, log) + cosignCheckpoint(CHECKPOINT, witness, 1700000000) + cosignCheckpoint(CHECKPOINT, other, 1700000005);
  const opened = openNote(note, [noteVerifier(log.name, log.privateKey)]);
  assert.equal(opened.signatures.filter((s) => s.verifiedBy).length, 1, 'the log\'s line verifies as the log\'s');
  const checks = checkCosignatures(opened.text, opened.signatures, [witness, other, cosignatureVerifier('witness.example/w3', generateKeyPairSync('ed25519').publicKey)]);
  assert.deepEqual(checks.map((c) => [c.verifier.name, c.timestamp, c.problems.length]), [
    ['witness.example/w1', 1700000000, 0],
    ['witness.example/w2', 1700000005, 0],
    ['witness.example/w3', undefined, 0],
  ]);
});

test('a line by another key is not this cosigner\'s: another name, another key ID, or the log\'s own signature', () => {
  const line = lineOf(`${CHECKPOINT}\n${cosignCheckpoint(CHECKPOINT, witness, 1700000000)}`, witness.name);
  const impostor = cosignatureVerifier(witness.name, generateKeyPairSync('ed25519').publicKey);
  assert.equal(verifyCosignature(CHECKPOINT, line, impostor).ok, false);
  assert.equal((verifyCosignature(CHECKPOINT, line, impostor) as { reason: string }).reason, 'other-key');
  assert.equal((verifyCosignature(CHECKPOINT, { ...line, name: 'witness.example/other' }, witness) as { reason: string }).reason, 'other-key');
  // The same key signing as a log (type 0x01) has another key ID, so its line is not a cosignature.
  const asLog = noteSigner(witness.name, witnessKey);
  const logLine = lineOf(signNote(CHECKPOINT, asLog), witness.name);
  assert.equal((verifyCosignature(CHECKPOINT, logLine, witness) as { reason: string }).reason, 'other-key');
});

test('a forged key ID with a wrong key, a truncated line and a future date are each refused with their reason', () => {
  const line = lineOf(`${CHECKPOINT}\n${cosignCheckpoint(CHECKPOINT, witness, 1700000000)}`, witness.name);
  const forger = cosigner(witness.name, generateKeyPairSync('ed25519').privateKey);
  const forged = lineOf(`${CHECKPOINT}\n${cosignCheckpoint(CHECKPOINT, forger, 1700000000)}`, witness.name);
  assert.equal((verifyCosignature(CHECKPOINT, { ...forged, keyHash: witness.keyHash }, witness) as { reason: string }).reason, 'bad-signature');
  assert.equal((verifyCosignature(CHECKPOINT, { ...line, signature: line.signature.subarray(0, 71) }, witness) as { reason: string }).reason, 'malformed');
  assert.deepEqual(verifyCosignature(CHECKPOINT, line, witness, 1699999999), {
    ok: false, reason: 'future-timestamp', problem: `the cosignature by witness.example/w1+${witness.keyHash.toString('hex')} is dated 1700000000, after 1699999999`,
  });
  assert.deepEqual(verifyCosignature(CHECKPOINT, line, witness, 1700000000), { ok: true, timestamp: 1700000000 });
  const checks = checkCosignatures(CHECKPOINT, [{ ...forged, keyHash: witness.keyHash }, line], [witness]);
  assert.equal(checks[0]!.timestamp, 1700000000, 'the valid line counts');
  assert.equal(checks[0]!.problems.length, 1, 'the forged one is reported');
});

test('only checkpoints are cosigned, at whole non-negative seconds, by private keys', () => {
  assert.throws(() => cosignCheckpoint('not a checkpoint\n', witness, 1), /malformed checkpoint/);
  assert.throws(() => cosignCheckpoint(CHECKPOINT.slice(0, -1), witness, 1), /must end with a newline/);
  assert.throws(() => cosignCheckpoint(CHECKPOINT, witness, -1), /whole number of seconds/);
  assert.throws(() => cosignCheckpoint(CHECKPOINT, witness, 1.5), /whole number of seconds/);
  assert.throws(() => cosigner('w', generateKeyPairSync('ed25519').publicKey), /needs a private key/);
  assert.throws(() => cosigner('bad name', witnessKey), /invalid key name/);
  const verifierFromPrivate = cosignatureVerifier('w', witnessKey);
  assert.equal(verifierFromPrivate.publicKey.type, 'public', 'a verifier never keeps the private key');
});

test('a witness key as one line (PRIVATE+KEY+<name>+<key ID>+<base64>, Go\'s note signer key form) reads back as the same cosigner, a "+" in its base64 included', () => {
  let withPlus: string | undefined;
  for (let i = 0; i < 500 && withPlus === undefined; i++) {
    const c = cosigner('witness.example/w1', generateKeyPairSync('ed25519').privateKey);
    const line = formatCosignerKey(c);
    const back = parseCosignerKey(`${line}\n`);
    assert.equal(back.name, c.name);
    assert.ok(back.publicKeyRaw.equals(c.publicKeyRaw));
    assert.ok(Buffer.from(back.keyHash).equals(Buffer.from(c.keyHash)));
    if (line.split('+').length > 5) withPlus = line;
  }
  assert.ok(withPlus, 'a key whose base64 holds a "+"');
  assert.throws(() => parseCosignerKey(withPlus!.replace(/\+[0-9a-f]{8}\+/, '+00000000+')), /key ID/);
  assert.throws(() => parseCosignerKey('PRIVATE+KEY+w+0011aabb+AQ=='), /malformed witness key/);
});
