// Trust policies (tlog/policy.ts), C2SP tlog-policy: the spec's example, the parser cases of
// transparency-dev/formats, quorums over nested groups, and a real checkpoint cosigned by witnesses
// of the public witness network checked against policies it meets and policies it does not.
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { cosignCheckpoint, cosigner, formatCosignatureVerifierKey, type Cosigner } from '../src/tlog/cosignature.js';
import {
  PolicyError, QUORUM_NONE, describeUnmetQuorum, evaluateQuorum, formatPolicy, parsePolicy, verifyCheckpointWithPolicy,
} from '../src/tlog/policy.js';
import { formatCheckpoint, formatVerifierKey, noteSigner, noteVerifier, signNote, type NoteSigner } from '../src/tlog/signed-note.js';
import { REAL_LOG_VKEY, REAL_NOTE, REAL_TIMESTAMP, REAL_WITNESSES, WIT1_VKEY } from './helpers/tlog-vectors.js';

// The real checkpoint and its witnesses' keys (helpers/tlog-vectors.ts), as a policy's witness lines.
const realWitnessLines = Object.entries(REAL_WITNESSES).map(([name, vkey]) => `witness ${name} ${vkey}`).join('\n');

function newWitness(name: string): { cosigner: Cosigner; vkey: string } {
  const c = cosigner(name, generateKeyPairSync('ed25519').privateKey);
  return { cosigner: c, vkey: formatCosignatureVerifierKey(c) };
}
const w = Object.fromEntries(['X1', 'X2', 'X3', 'Y1', 'Y2', 'Y3'].map((n) => [n, newWitness(`${n.toLowerCase()}.example`)])) as Record<string, { cosigner: Cosigner; vkey: string }>;
const logSigner: NoteSigner = noteSigner('example.com/teamlog', generateKeyPairSync('ed25519').privateKey);
const LOG_VKEY = formatVerifierKey(logSigner.name, logSigner.publicKeyRaw);

// C2SP/C2SP tlog-policy.md, "Example policy", with real keys in place of its elided <vkey>s.
const SPEC_EXAMPLE = `log ${LOG_VKEY}

witness X1 ${w.X1!.vkey}
witness X2 ${w.X2!.vkey}
witness X3 ${w.X3!.vkey}
group X-witnesses 2 X1 X2 X3

witness Y1 ${w.Y1!.vkey}
witness Y2 ${w.Y2!.vkey}
witness Y3 ${w.Y3!.vkey}
group Y-witnesses any Y1 Y2 Y3

group X-and-Y all X-witnesses Y-witnesses
quorum X-and-Y
`;

function refuses(text: string, line: number | undefined, message: RegExp): void {
  assert.throws(() => parsePolicy(text), (err: unknown) => {
    assert.ok(err instanceof PolicyError, `expected a PolicyError, got ${String(err)}`);
    assert.equal(err.line, line, err.message);
    assert.match(err.message, message);
    return true;
  });
}

test('the spec\'s example policy reads as one log, six witnesses and two levels of groups', () => {
  const policy = parsePolicy(SPEC_EXAMPLE);
  assert.deepEqual(policy.logs.map((l) => [l.verifier.name, l.vkey, l.url]), [['example.com/teamlog', LOG_VKEY, undefined]]);
  assert.deepEqual(policy.witnesses.map((x) => [x.name, x.verifier.name, x.vkey]), ['X1', 'X2', 'X3', 'Y1', 'Y2', 'Y3'].map((n) => [n, `${n.toLowerCase()}.example`, w[n]!.vkey]));
  assert.deepEqual(policy.groups, [
    { name: 'X-witnesses', threshold: 2, members: ['X1', 'X2', 'X3'] },
    { name: 'Y-witnesses', threshold: 1, members: ['Y1', 'Y2', 'Y3'] },
    { name: 'X-and-Y', threshold: 2, members: ['X-witnesses', 'Y-witnesses'] },
  ]);
  assert.equal(policy.quorum, 'X-and-Y');
});

test('the spec example\'s quorum needs two X witnesses and one Y witness, and names what is missing', () => {
  const policy = parsePolicy(SPEC_EXAMPLE);
  assert.deepEqual(evaluateQuorum(policy, ['X1', 'X3', 'Y2']), {
    met: true, satisfied: ['X1', 'X3', 'X-witnesses', 'Y2', 'Y-witnesses', 'X-and-Y'], unmet: [], missing: [],
  });
  const short = evaluateQuorum(policy, ['X1', 'Y1', 'Y2', 'Y3']);
  assert.equal(short.met, false);
  assert.deepEqual(short.unmet, [{ name: 'X-witnesses', threshold: 2, have: 1, of: 3 }, { name: 'X-and-Y', threshold: 2, have: 1, of: 2 }]);
  assert.deepEqual(short.missing, ['X2', 'X3'], 'the Y witnesses are not missing: their group is witnessed');
  assert.equal(describeUnmetQuorum(short), 'group X-witnesses has 1 of the 2 it needs (of 3); group X-and-Y has 1 of the 2 it needs (of 2); no cosignature from X2, X3');
  assert.deepEqual(evaluateQuorum(policy, ['X1', 'X2']).missing, ['Y1', 'Y2', 'Y3']);
  assert.deepEqual(evaluateQuorum(policy, ['X1', 'X2', 'X-witnesses', 'Y-witnesses', 'unknown']).missing, ['Y1', 'Y2', 'Y3'], 'only witnesses\' names count');
});

test('"quorum none" is met without any cosignature, and a single witness can be the quorum', () => {
  assert.deepEqual(evaluateQuorum(parsePolicy('quorum none\n'), []), { met: true, satisfied: [], unmet: [], missing: [] });
  assert.equal(parsePolicy('quorum none\n').quorum, QUORUM_NONE);
  const single = parsePolicy(`witness X1 ${w.X1!.vkey}\nquorum X1\n`);
  assert.equal(evaluateQuorum(single, ['X1']).met, true);
  assert.deepEqual(evaluateQuorum(single, []).missing, ['X1']);
});

test('blank lines, comments, tabs, optional URLs, a missing last newline and opaque names are read as the spec says', () => {
  // After transparency-dev/formats policy/tlog_policy_test.go, TestUnmarshal ("whitespace and comments", "keywords other than none are valid names").
  const policy = parsePolicy(`\n# comment\n\t # another comment\n\twitness \t all  ${w.X1!.vkey}   https://w1.example.com/  \n  witness any ${w.X2!.vkey}\nwitness K ${w.X3!.vkey}\nwitness \u212a ${w.Y1!.vkey}\ngroup group 2 all any\n\n  quorum\tgroup`);
  assert.deepEqual(policy.witnesses.map((x) => [x.name, x.url]), [['all', 'https://w1.example.com/'], ['any', undefined], ['K', undefined], ['\u212a', undefined]]);
  assert.deepEqual(policy.groups, [{ name: 'group', threshold: 2, members: ['all', 'any'] }]);
  assert.equal(policy.quorum, 'group');
});

test('a malformed policy is refused with the line that is wrong', () => {
  // The refused inputs of transparency-dev/formats policy/tlog_policy_test.go, TestUnmarshal_Errors, with real keys.
  const [a, b] = [w.X1!.vkey, w.X2!.vkey];
  refuses('quorum none\n\x01', 2, /control character U\+0001/);
  refuses('quorum none\r\n', 1, /control character U\+000d/);
  refuses('quorum none\n\x7f\n', 2, /control character U\+007f/);
  refuses('quibble w1\nquorum none\n', 1, /unknown keyword "quibble"/);
  refuses(`witness w1 ${a} https://w1.example.com/ # comment\nquorum w1\n`, 1, /expected "witness <name> <vkey> \[<url>\]"/);
  refuses('log\nquorum none\n', 1, /expected "log <vkey> \[<url>\]"/);
  refuses('log garbage\nquorum none\n', 1, /invalid log vkey/);
  refuses(`log ${a}\nquorum none\n`, 1, /invalid log vkey: unsupported verifier key type 0x04/);
  refuses(`log ${LOG_VKEY}\nlog ${LOG_VKEY} https://log.example.com/\nquorum none\n`, 2, /duplicate log/);
  refuses('witness w1\nquorum none\n', 1, /expected "witness/);
  refuses(`witness w1 ${WIT1_VKEY}\nquorum w1\n`, 1, /invalid witness vkey: unsupported cosignature key type 0x01: 0x01 is a log's note key/);
  refuses(`witness none ${a}\nquorum none\n`, 1, /"none" is reserved/);
  refuses(`witness w1 ${a}\nwitness w1 ${b}\nquorum w1\n`, 2, /"w1" is already defined/);
  refuses(`witness w1 ${a}\ngroup w1 any w1\nquorum w1\n`, 2, /"w1" is already defined/);
  refuses(`witness w1 ${a}\ngroup g1 1\nquorum w1\n`, 2, /at least one member/);
  refuses(`witness w1 ${a}\ngroup none any w1\nquorum none\n`, 2, /"none" is reserved/);
  refuses(`witness w1 ${a}\ngroup g1 0 w1\nquorum g1\n`, 2, /threshold "0" must be any, all or a decimal from 1 to 1/);
  refuses(`witness w1 ${a}\ngroup g1 -1 w1\nquorum g1\n`, 2, /threshold "-1"/);
  refuses(`witness w1 ${a}\ngroup g1 2 w1\nquorum g1\n`, 2, /threshold "2"/);
  refuses(`witness w1 ${a}\nwitness w2 ${b}\ngroup g1 01 w1 w2\nquorum g1\n`, 3, /threshold "01"/);
  refuses(`witness w1 ${a}\ngroup g1 any w2\nquorum g1\n`, 2, /names "w2", which no earlier line defines/);
  refuses(`group g1 any w1\nwitness w1 ${a}\nquorum g1\n`, 1, /names "w1", which no earlier line defines/);
  refuses(`witness w1 ${a}\ngroup g1 any none w1\nquorum g1\n`, 2, /"none" cannot be a group member/);
  refuses(`witness w1 ${a}\ngroup g1 all w1 w1\nquorum g1\n`, 2, /"w1" is already a group member/);
  refuses(`witness w1 ${a}\nwitness w2 ${b}\ngroup g1 any w1 w2\ngroup g2 any w1\nquorum g1\n`, 4, /"w1" is already a group member/);
  refuses(`witness w1 ${a}\n`, undefined, /no quorum line/);
  refuses(`witness w1 ${a}\nquorum w1\nquorum w1\n`, 3, /a second quorum line \(the first is line 2\)/);
  refuses('quorum unknown\n', 1, /quorum "unknown" names no witness or group/);
  refuses(`quorum w1\nwitness w1 ${a}\n`, 1, /quorum "w1" names no witness or group/);
  refuses('quorum\n', 1, /expected "quorum <name>"/);
  refuses('quorum none extra\n', 1, /expected "quorum <name>"/);
});

test('two witnesses with one public key are refused, whatever their names and key IDs', () => {
  // After transparency-dev/formats policy/tlog_policy_test.go, TestUnmarshal_DuplicateWitnessKeys.
  const impostor = formatCosignatureVerifierKey({ ...w.X1!.cosigner, name: 'impostor.example.com' });
  assert.notEqual(impostor, w.X1!.vkey);
  refuses(`witness w1 ${w.X1!.vkey}\nwitness w2 ${impostor}\nquorum w1\n`, 2, /duplicate witness: "w2" has the public key of an earlier witness/);
});

test('a witness vkey whose key ID does not match its key is refused', () => {
  const vkey = w.X1!.vkey.replace(/\+[0-9a-f]{8}\+/, '+00000000+');
  refuses(`witness w1 ${vkey}\nquorum w1\n`, 1, /invalid witness vkey: verifier key hash does not match/);
});

test('a policy written by formatPolicy reads back the same', () => {
  const policy = parsePolicy(`# A policy.\nlog ${LOG_VKEY} https://log.example.com/\n${SPEC_EXAMPLE.split('\n').slice(1).join('\n')}`);
  const text = formatPolicy(policy);
  assert.match(text, /^log \S+ https:\/\/log\.example\.com\/\nwitness X1 /);
  assert.match(text, /\ngroup Y-witnesses 1 Y1 Y2 Y3\ngroup X-and-Y 2 X-witnesses Y-witnesses\nquorum X-and-Y\n$/);
  assert.deepEqual(
    formatPolicy(parsePolicy(text)),
    text,
  );
  assert.deepEqual(parsePolicy(text).groups, policy.groups);
});

test('a real checkpoint meets a policy of three of its four witnesses, each cosignature verified with its timestamp', () => {
  const policy = parsePolicy(`log ${REAL_LOG_VKEY}\n${realWitnessLines}\ngroup network 3 remora little-garden stagemole smartit\nquorum network\n`);
  const verdict = verifyCheckpointWithPolicy(REAL_NOTE, policy);
  assert.ok(verdict.ok, verdict.ok ? '' : verdict.problem);
  assert.equal(verdict.checkpoint.treeSize, 1432088532);
  assert.equal(verdict.log.name, 'arche2025h1.staging.ct.transparency.dev');
  assert.deepEqual(verdict.cosignatures, Object.keys(REAL_WITNESSES).map((witness) => ({ witness, timestamp: REAL_TIMESTAMP })));
});

test('the same checkpoint fails a policy that also asks for a witness that did not cosign, naming it', () => {
  const policy = parsePolicy(`log ${REAL_LOG_VKEY}\n${realWitnessLines}\nwitness teamlog ${w.X1!.vkey}\ngroup everyone all remora little-garden stagemole smartit teamlog\nquorum everyone\n`);
  const verdict = verifyCheckpointWithPolicy(REAL_NOTE, policy);
  assert.equal(verdict.ok, false);
  assert.equal(verdict.ok ? '' : verdict.problem, 'the quorum "everyone" is not met: group everyone has 4 of the 5 it needs (of 5); no cosignature from teamlog');
});

test('a checkpoint is refused when a policy witness\'s cosignature is tampered with or dated after the verifier\'s clock', () => {
  const policy = parsePolicy(`log ${REAL_LOG_VKEY}\n${realWitnessLines}\ngroup network any remora little-garden stagemole smartit\nquorum network\n`);
  const tampered = REAL_NOTE.replace('2net5wAAAABqEiEgPlfF3V06', '2net5wAAAABqEiEgPlfF3V07');
  const verdict = verifyCheckpointWithPolicy(tampered, policy);
  assert.equal(verdict.ok, false);
  assert.match(verdict.ok ? '' : verdict.problem, /^invalid cosignature: the cosignature by remora\.n621\.de\+da77ade7 does not verify$/);
  const early = verifyCheckpointWithPolicy(REAL_NOTE, policy, { notAfter: REAL_TIMESTAMP - 1 });
  assert.match(early.ok ? '' : early.problem, /is dated 1779573024, after 1779573023/);
  assert.equal(verifyCheckpointWithPolicy(REAL_NOTE, policy, { notAfter: REAL_TIMESTAMP }).ok, true);
});

test('a checkpoint is refused unless a policy log whose key name is its origin signed it', () => {
  const quorumNone = (logLines: string) => parsePolicy(`${logLines}quorum none\n`);
  assert.equal(verifyCheckpointWithPolicy(REAL_NOTE, quorumNone(`log ${REAL_LOG_VKEY}\n`)).ok, true);
  const unsigned = verifyCheckpointWithPolicy(REAL_NOTE, quorumNone(`log ${LOG_VKEY}\n`));
  assert.match(unsigned.ok ? '' : unsigned.problem, /not signed by a log of that name/);
  const none = verifyCheckpointWithPolicy(REAL_NOTE, quorumNone(''));
  assert.equal(none.ok ? '' : none.problem, 'the policy names no log, and none was given');
  const badLog = verifyCheckpointWithPolicy(REAL_NOTE.replace('ui8GwCF1+kWq', 'ui8GwCF1+kWr'), quorumNone(`log ${REAL_LOG_VKEY}\n`));
  assert.match(badLog.ok ? '' : badLog.problem, /the log's signature does not verify/);

  // A log whose key name is not the checkpoint's origin cannot vouch for it, even with a valid signature.
  const checkpoint = formatCheckpoint({ origin: 'example.com/other-log', treeSize: 1, rootHash: createHash('sha256').update('x').digest(), extensions: [] });
  const misnamed = verifyCheckpointWithPolicy(signNote(checkpoint, logSigner), quorumNone(`log ${LOG_VKEY}\n`));
  assert.match(misnamed.ok ? '' : misnamed.problem, /origin "example\.com\/other-log" is not signed by a log of that name/);
});

test('a policy without logs is used with the log known from context, and cosignatures made here meet its quorum', () => {
  const checkpoint = formatCheckpoint({ origin: logSigner.name, treeSize: 7, rootHash: createHash('sha256').update('r').digest(), extensions: [] });
  const note = signNote(checkpoint, logSigner) + cosignCheckpoint(checkpoint, w.X2!.cosigner, 1700000000) + cosignCheckpoint(checkpoint, w.Y3!.cosigner, 1700000001);
  const policy = parsePolicy(SPEC_EXAMPLE.split('\n').slice(1).join('\n'));
  assert.equal(policy.logs.length, 0);
  const short = verifyCheckpointWithPolicy(note, policy, { logs: [noteVerifier(logSigner.name, logSigner.privateKey)] });
  assert.match(short.ok ? '' : short.problem, /group X-witnesses has 1 of the 2 it needs \(of 3\); group X-and-Y has 1 of the 2 it needs \(of 2\); no cosignature from X1, X3$/);
  const met = verifyCheckpointWithPolicy(note + cosignCheckpoint(checkpoint, w.X3!.cosigner, 1700000002), policy, { logs: [noteVerifier(logSigner.name, logSigner.privateKey)] });
  assert.ok(met.ok, met.ok ? '' : met.problem);
  assert.deepEqual(met.cosignatures, [{ witness: 'X2', timestamp: 1700000000 }, { witness: 'X3', timestamp: 1700000002 }, { witness: 'Y3', timestamp: 1700000001 }]);
});
