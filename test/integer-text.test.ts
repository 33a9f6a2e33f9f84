// integerText: String(n) for safe integers, without V8's number-to-string cache (it is what the
// sealer, the verifier and the export write ids and seqs with, so a wrong digit is a wrong leaf).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { canonicalize } from '../src/tlog/jcs.js';
import { integerText } from '../src/tlog/integer-text.js';
import { OutputBuffer } from '../src/modules/audit/evidence/export.buffer.js';

const EDGES = [0, -0, 1, 9, 10, 99, 100, 999, 1000, 1001, 1010, 100_000, 999_999, 1_000_000, 1_000_001, 10_203_040, 2 ** 31, 2 ** 32 + 7, 10 ** 15, Number.MAX_SAFE_INTEGER];

test('integerText is String(n) for every safe integer: group boundaries, zeros inside, both signs, the largest', () => {
  for (const n of [...EDGES, ...EDGES.map((e) => -e)]) assert.equal(integerText(n), String(n), `${n}`);
  let seed = 12345;
  for (let i = 0; i < 20_000; i++) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    const n = Math.floor((seed / 2 ** 31) * 10 ** (1 + (i % 16))) * (i % 3 === 0 ? -1 : 1);
    assert.equal(integerText(n), String(n));
  }
});

test('canonicalize writes integers with it and every other number as before; OutputBuffer.integer writes the same digits', () => {
  assert.equal(canonicalize({ a: [0, -0, 7, -1234567, Number.MAX_SAFE_INTEGER, 1.5, -0.25, 1e21, 2 ** 53, 1e-7] }), '{"a":[0,0,7,-1234567,9007199254740991,1.5,-0.25,1e+21,9007199254740992,1e-7]}');
  const out = new OutputBuffer(64);
  for (const n of [0, 42, 1_000_000_007, Number.MAX_SAFE_INTEGER]) {
    out.integer(n);
    out.byte(0x2c);
  }
  assert.equal(out.take()!.toString('latin1'), '0,42,1000000007,9007199254740991,');
});
