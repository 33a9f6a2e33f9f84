// Audit records are hashed in RFC 8785 canonical form, so an outside verifier in any language
// must produce the same bytes: checked against the RFC's own examples and the reference test
// data, byte for byte in UTF-8.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { canonicalize, fieldsCanonicalizer } from '../src/tlog/jcs.js';

const utf8Hex = (s: string): string => Buffer.from(s, 'utf8').toString('hex');

// cyberphone/json-canonicalization (the RFC author's reference repository), testdata/input/*.json
// and the expected UTF-8 bytes from testdata/outhex/*.txt, at commit 19d51d7f. Inputs are the
// files' JSON text with only the whitespace between tokens shortened.
const REFERENCE: Record<string, [string, string]> = {
  arrays: [
    String.raw`[ 56, { "d": true, "10": null, "1": [ ] } ]`,
    '5b35362c7b2231223a5b5d2c223130223a6e756c6c2c2264223a747275657d5d',
  ],
  french: [
    String.raw`{ "peach": "This sorting order", "péché": "is wrong according to French", "pêche": "but canonicalization MUST", "sin":   "ignore locale" }`,
    '7b227065616368223a225468697320736f7274696e67206f72646572222c2270c3a96368c3a9223a2269732077726f6e67206163636f7264696e6720746f204672656e6368222c2270c3aa636865223a226275742063616e6f6e6963616c697a6174696f6e204d555354222c2273696e223a2269676e6f7265206c6f63616c65227d',
  ],
  structures: [
    String.raw`{ "1": {"f": {"f": "hi","F": 5} ,"\n": 56.0}, "10": { }, "": "empty", "a": { }, "111": [ {"e": "yes","E": "no" } ], "A": { } }`,
    '7b22223a22656d707479222c2231223a7b225c6e223a35362c2266223a7b2246223a352c2266223a226869227d7d2c223130223a7b7d2c22313131223a5b7b2245223a226e6f222c2265223a22796573227d5d2c2241223a7b7d2c2261223a7b7d7d',
  ],
  unicode: [
    String.raw`{ "Unnormalized Unicode":"A\u030a" }`,
    '7b22556e6e6f726d616c697a656420556e69636f6465223a2241cc8a227d',
  ],
  values: [
    String.raw`{ "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false] }`,
    '7b226c69746572616c73223a5b6e756c6c2c747275652c66616c73655d2c226e756d62657273223a5b3333333333333333332e333333333333332c31652b33302c342e352c302e3030322c31652d32375d2c22737472696e67223a22e282ac245c75303030665c6e4127425c225c5c5c5c5c222f227d',
  ],
  weird: [
    String.raw`{ "\u20ac": "Euro Sign", "\r": "Carriage Return", "\u000a": "Newline", "1": "One", "\u0080": "Control\u007f", "\ud83d\ude02": "Smiley", "\u00f6": "Latin Small Letter O With Diaeresis", "\ufb33": "Hebrew Letter Dalet With Dagesh", "</script>": "Browser Challenge" }`,
    '7b225c6e223a224e65776c696e65222c225c72223a2243617272696167652052657475726e222c2231223a224f6e65222c223c2f7363726970743e223a2242726f77736572204368616c6c656e6765222c22c280223a22436f6e74726f6c7f222c22c3b6223a224c6174696e20536d616c6c204c6574746572204f205769746820446961657265736973222c22e282ac223a224575726f205369676e222c22f09f9882223a22536d696c6579222c22efacb3223a22486562726577204c65747465722044616c6574205769746820446167657368227d',
  ],
};

// RFC 8785 Appendix B, "Number Serialization Samples" (IEEE 754 bits → JSON text), taken from
// the RFC's XML source in cyberphone/ietf-json-canon (xmlv3/rfc8785.xml); the last seven are
// the sample lines of the es6testfile in cyberphone/json-canonicalization testdata/README.md.
const NUMBERS: Array<[string, string]> = [
  ['0000000000000000', '0'], ['8000000000000000', '0'], ['0000000000000001', '5e-324'], ['8000000000000001', '-5e-324'],
  ['7fefffffffffffff', '1.7976931348623157e+308'], ['ffefffffffffffff', '-1.7976931348623157e+308'],
  ['4340000000000000', '9007199254740992'], ['c340000000000000', '-9007199254740992'], ['4430000000000000', '295147905179352830000'],
  ['44b52d02c7e14af5', '9.999999999999997e+22'], ['44b52d02c7e14af6', '1e+23'], ['44b52d02c7e14af7', '1.0000000000000001e+23'],
  ['444b1ae4d6e2ef4e', '999999999999999700000'], ['444b1ae4d6e2ef4f', '999999999999999900000'], ['444b1ae4d6e2ef50', '1e+21'],
  ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'], ['3eb0c6f7a0b5ed8d', '0.000001'],
  ['41b3de4355555553', '333333333.3333332'], ['41b3de4355555554', '333333333.33333325'], ['41b3de4355555555', '333333333.3333333'],
  ['41b3de4355555556', '333333333.3333334'], ['41b3de4355555557', '333333333.33333343'],
  ['becbf647612f3696', '-0.0000033333333333333333'], ['43143ff3c1cb0959', '1424953923781206.2'],
  ['4340000000000001', '9007199254740994'], ['4340000000000002', '9007199254740996'], ['444b1ae4d6e2ef50', '1e+21'],
  ['3eb0c6f7a0b5ed8d', '0.000001'], ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'], ['8000000000000000', '0'], ['0', '0'],
];
// Appendix B's rows without a JSON form: NaN and Infinity.
const NOT_NUMBERS = ['7fffffffffffffff', '7ff0000000000000'];

const double = (bits: string): number => Buffer.from(bits.padStart(16, '0'), 'hex').readDoubleBE(0);

test('the reference test data canonicalizes to the expected UTF-8 bytes', () => {
  for (const [name, [input, hex]] of Object.entries(REFERENCE)) {
    assert.equal(utf8Hex(canonicalize(JSON.parse(input))), hex, name);
  }
});

test('the RFC\'s worked example gives the text of §3.2.3 and the bytes of §3.2.4', () => {
  const parsed = JSON.parse(REFERENCE.values![0]);
  const text = canonicalize(parsed);
  assert.equal(text, String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`);
  const bytes = `7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72 75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a
    5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31 65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37
    5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30 30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d`;
  assert.equal(utf8Hex(text), bytes.replace(/\s+/g, ''));
});

test('properties sort by UTF-16 code units, as in the RFC\'s §3.2.3 sorting example', () => {
  const input = String.raw`{ "\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One",
    "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis" }`;
  const values = [...canonicalize(JSON.parse(input)).matchAll(/:"([^"]*)"/g)].map((m) => m[1]);
  assert.deepEqual(values, ['Carriage Return', 'One', 'Control', 'Latin Small Letter O With Diaeresis', 'Euro Sign', 'Emoji: Grinning Face', 'Hebrew Letter Dalet With Dagesh']);
});

test('keys order by code unit, not code point or locale: a surrogate pair sorts below U+E000, "B" below "a", "z" below "é"', () => {
  const value = { '\uE000': 1, '\u{1F600}': 2, a: 3, B: 4, 'é': 5, z: 6, '': 7, aa: 8, 'a\u0000': 9 };
  assert.equal(canonicalize(value), '{"":7,"B":4,"a":3,"a\\u0000":9,"aa":8,"z":6,"é":5,"😀":2,"\uE000":1}');
  // Code point order would put U+E000 (one unit) before U+1F600 (0xD83D 0xDE00).
  assert.equal(canonicalize({ '\u{10000}': 0, '\uFFFF': 1 }), '{"\u{10000}":0,"\uFFFF":1}');
  // Nested objects inside arrays are sorted too; array order is kept.
  assert.equal(canonicalize([{ b: 1, a: [{ d: 0, c: 0 }] }, 2, 1]), '[{"a":[{"c":0,"d":0}],"b":1},2,1]');
  const nullProto = Object.assign(Object.create(null) as Record<string, unknown>, { y: true, x: null });
  assert.equal(canonicalize(nullProto), '{"x":null,"y":true}');
});

test('small and large objects sort alike (the two take different sorting paths)', () => {
  // A comparison written out over code units, independent of the one under test.
  const byCodeUnits = (a: string, b: string): number => {
    for (let i = 0; i < Math.min(a.length, b.length); i++) if (a.charCodeAt(i) !== b.charCodeAt(i)) return a.charCodeAt(i) - b.charCodeAt(i);
    return a.length - b.length;
  };
  const pool = ['a', 'B', 'é', 'z', '\u0000', '\uFFFD', '\uE000', '\u{1F600}', '\u{10000}', '_', '~', 'ß'];
  let seed = 7;
  const pick = () => pool[(seed = (seed * 48271) % 2147483647) % pool.length]!;
  for (const count of [3, 10, 24, 25, 200]) {
    const keys = new Set<string>();
    while (keys.size < count) keys.add(`k${pick()}${pick()}${pick()}`);
    const value = Object.fromEntries([...keys].map((k, i) => [k, i]));
    const want = `{${[...keys].sort(byCodeUnits).map((k) => `${JSON.stringify(k)}:${value[k]}`).join(',')}}`;
    assert.equal(canonicalize(value), want, `${count} keys`);
  }
});

test('numbers serialize as in RFC 8785 Appendix B, and NaN and Infinity are refused', () => {
  for (const [bits, want] of NUMBERS) assert.equal(canonicalize(double(bits)), want, bits);
  for (const bits of NOT_NUMBERS) assert.throws(() => canonicalize(double(bits)), TypeError, bits);
  assert.throws(() => canonicalize(-Infinity), TypeError);
  assert.equal(canonicalize([-0, 1.0, 1e21, 1e-7, 123456789012345680000]), '[0,1,1e+21,1e-7,123456789012345680000]');
});

test('strings escape only what RFC 8785 §3.2.2.2 names, with lowercase hex, and everything else goes out as is', () => {
  const named: Record<number, string> = { 8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r' };
  let all = '';
  let want = '"';
  for (let c = 0; c < 0x10000; c++) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    const ch = String.fromCharCode(c);
    all += ch;
    if (c < 0x20) want += named[c] ?? `\\u${c.toString(16).padStart(4, '0')}`;
    else if (ch === '"' || ch === '\\') want += `\\${ch}`;
    else want += ch;
  }
  want += '"';
  assert.equal(canonicalize(all), want);
  assert.equal(canonicalize('\u{1F600}\u{10FFFF}'), '"\u{1F600}\u{10FFFF}"');
  // A backslash followed by "ud" is text, not an escape, and must not be mistaken for one.
  assert.equal(canonicalize('\\ud800'), '"\\\\ud800"');
});

test('lone surrogates are refused in values and in keys, as RFC 8785 §3.2.2.2 requires', () => {
  for (const s of ['\uD800', 'a\uDFFF', '\uDE00\uD83D', 'x\uD83D']) {
    assert.throws(() => canonicalize(s), TypeError, JSON.stringify(s));
    assert.throws(() => canonicalize({ [s]: 1 }), TypeError, JSON.stringify(s));
    assert.throws(() => canonicalize([{ a: [s] }]), TypeError, JSON.stringify(s));
  }
});

test('anything that is not a JSON value is refused with a TypeError, however deep it sits', () => {
  class Point {
    constructor(public x = 1) {}
  }
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;
  const cyclicArray: unknown[] = [];
  cyclicArray.push(cyclicArray);
  const rejected: Array<[string, unknown]> = [
    ['undefined', undefined], ['a function', () => 1], ['a bigint', 1n], ['a symbol', Symbol('s')], ['NaN', NaN],
    ['a Date', new Date(0)], ['a Map', new Map()], ['a Set', new Set()], ['a Buffer', Buffer.from('x')], ['a typed array', new Uint8Array(1)],
    ['a class instance', new Point()], ['a boxed string', new String('s')], ['a RegExp', /x/],
    ['an undefined property', { a: undefined }], ['an undefined element', [undefined]], ['a hole', [, 1]], // eslint-disable-line no-sparse-arrays
    ['a nested bigint', { a: [{ b: 2n }] }], ['a nested NaN', [[[NaN]]]], ['a cyclic object', cyclic], ['a cyclic array', cyclicArray],
  ];
  for (const [what, value] of rejected) assert.throws(() => canonicalize(value), TypeError, what);
});

test('canonical text parses back to an equal value and is a fixed point', () => {
  const value = { z: [1, 'two', { c: null, b: false, a: 0.5 }], a: { '\n': '\u2028', é: -1e-7 }, m: [] as unknown[], e: {} };
  const text = canonicalize(value);
  assert.deepEqual(JSON.parse(text), value);
  assert.equal(canonicalize(JSON.parse(text)), text);
  assert.equal(text, '{"a":{"\\n":"\u2028","é":-1e-7},"e":{},"m":[],"z":[1,"two",{"a":0.5,"b":false,"c":null}]}');
});

test('a canonicalizer of fixed keys gives canonicalize() of the object holding just those keys, and fails where it fails', () => {
  const keys = ['id', 'b', 'a', 'é', 'B', '\u20ac', 'z'] as const;
  const pick = fieldsCanonicalizer(keys);
  const values = [{ id: 1, b: 'x', a: null, é: [1, { y: 2, x: 1 }], B: true, '\u20ac': -0, z: 'line\nbreak', extra: 'left out' }, { id: 2, b: '', a: { k: 'v' }, é: 1e21, B: false, '\u20ac': 0.5, z: 'é' }];
  for (const v of values) {
    const only = Object.fromEntries(keys.map((k) => [k, v[k]]));
    assert.equal(pick(v), canonicalize(only));
  }
  assert.throws(() => pick({ id: 1, b: 'x', a: null, é: 1, B: true, '\u20ac': 1 } as never), TypeError, 'a missing key is undefined');
  assert.throws(() => pick({ ...values[0]!, a: '\ud800' }), TypeError);
});
