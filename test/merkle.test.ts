// The audit log's Merkle tree must be RFC 6962's to the byte, or outside verifiers (and our own
// older proofs) stop agreeing with it. Checked against the Certificate Transparency vectors, a
// from-the-definition reference on every small tree, and index arithmetic past 2^32.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  EMPTY_ROOT, InclusionChecker, TreeBuilder, consistencyProof, consistencyProofNodes, frontierNodes, inclusionProof, inclusionProofNodes,
  leafHash, nodeHash, nodeHashBase64, rootHash, rootNodes, verifyConsistency, verifyInclusion,
  type Hash, type NodeKey, type NodeSource,
} from '../src/tlog/merkle.js';

const hex = (h: string): Buffer => Buffer.from(h, 'hex');

// transparency-dev/merkle, testonly/constants.go: LeafInputs, NodeHashes (per level), RootHashes
// (by size, from 0); the same data as the Certificate Transparency merkle_tree_test vectors.
const LEAF_INPUTS = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'].map(hex);
const NODE_HASHES = [
  ['6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d', '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
    '0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7', '07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7',
    'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b', '4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658',
    'b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f', '46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1'],
  ['fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125', '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
    '0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a', 'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0'],
  ['d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7', '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4'],
  ['5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328'],
];
const ROOTS = [
  'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125', 'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7', '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef', 'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
].map(hex);

// transparency-dev/merkle, proof/verify_test.go: inclusionProofs (its leaf numbers are 1-based;
// here they are 0-based indexes) and consistencyProofs over the leaves above.
const INCLUSION_VECTORS: Array<{ index: number; size: number; proof: string[] }> = [
  { index: 0, size: 8, proof: ['96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7', '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e', '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4'] },
  { index: 5, size: 8, proof: ['bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b', 'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0', 'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7'] },
  { index: 2, size: 3, proof: ['fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125'] },
  { index: 1, size: 5, proof: ['6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d', '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e', 'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b'] },
  { index: 0, size: 1, proof: [] },
];
const CONSISTENCY_VECTORS: Array<{ from: number; to: number; proof: string[] }> = [
  { from: 1, to: 1, proof: [] },
  { from: 1, to: 8, proof: ['96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7', '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e', '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4'] },
  { from: 6, to: 8, proof: ['0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a', 'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0', 'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7'] },
  { from: 2, to: 5, proof: ['5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e', 'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b'] },
  { from: 6, to: 7, proof: ['0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a', 'b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f', 'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7'] },
];

// transparency-dev/merkle, proof/proof_test.go (TestInclusion, TestConsistency): which stored
// nodes each proof is made of, as [level, index]; the ones it calls "rehash" are combined into
// one proof element, which is why only the set of keys is compared.
const INCLUSION_NODE_VECTORS: Array<[number, number, Array<[number, number]>]> = [
  [0, 1, []], [0, 2, [[0, 1]]], [1, 2, [[0, 0]]], [1, 3, [[0, 0], [0, 2]]],
  [0, 7, [[0, 1], [1, 1], [0, 6], [1, 2]]], [2, 7, [[0, 3], [1, 0], [0, 6], [1, 2]]],
  [4, 7, [[0, 5], [0, 6], [2, 0]]], [6, 7, [[1, 2], [2, 0]]], [3, 5, [[0, 2], [1, 0], [0, 4]]],
  [4, 6, [[0, 5], [2, 0]]], [10, 15, [[0, 11], [1, 4], [0, 14], [1, 6], [3, 0]]],
  [24, 31, [[0, 25], [1, 13], [0, 30], [1, 14], [3, 2], [4, 0]]],
  [81, 95, [[0, 80], [1, 41], [2, 21], [0, 94], [1, 46], [2, 22], [4, 4], [6, 0]]],
];
const CONSISTENCY_NODE_VECTORS: Array<[number, number, Array<[number, number]>]> = [
  [1, 2, [[0, 1]]], [1, 4, [[0, 1], [1, 1]]], [1, 6, [[0, 1], [1, 1], [1, 2]]], [2, 3, [[0, 2]]],
  [2, 8, [[1, 1], [2, 1]]], [3, 7, [[0, 2], [0, 3], [1, 0], [0, 6], [1, 2]]], [4, 7, [[0, 6], [1, 2]]],
  [5, 7, [[0, 4], [0, 5], [0, 6], [2, 0]]], [6, 7, [[1, 2], [0, 6], [2, 0]]], [7, 8, [[0, 6], [0, 7], [1, 2], [2, 0]]],
  [1, 1, []], [8, 8, []], [2, 4, [[1, 1]]], [3, 5, [[0, 2], [0, 3], [1, 0], [0, 4]]], [4, 6, [[1, 2]]],
  [1, 7, [[0, 1], [1, 1], [0, 6], [1, 2]]], [10, 15, [[1, 4], [1, 5], [0, 14], [1, 6], [3, 0]]],
  [24, 31, [[3, 2], [0, 30], [1, 14], [2, 6], [4, 0]]],
  [81, 95, [[0, 80], [0, 81], [1, 41], [2, 21], [0, 94], [1, 46], [2, 22], [4, 4], [6, 0]]],
];

const id = (k: NodeKey): string => `${k.level}:${k.index}`;
const sortedIds = (keys: NodeKey[]): string[] => keys.map(id).sort();

/** Every node a tree of these leaves stores: what TreeBuilder.append returns, plus the leaves. */
function storeOf(leafHashes: Hash[]): { get: NodeSource; builder: TreeBuilder; roots: Hash[] } {
  const nodes = new Map<string, Hash>();
  const builder = new TreeBuilder();
  const roots = [builder.root()];
  for (const [i, leaf] of leafHashes.entries()) {
    nodes.set(id({ level: 0, index: i }), leaf);
    for (const { key, hash } of builder.append(leaf)) nodes.set(id(key), hash);
    roots.push(builder.root());
  }
  const get: NodeSource = (key) => {
    const h = nodes.get(id(key));
    if (!h) throw new Error(`no node ${id(key)}`);
    return h;
  };
  return { get, builder, roots };
}

/** Calls `run` with a lookup that records what it reads. */
function reads(get: NodeSource, run: (get: NodeSource) => unknown): string[] {
  const seen: NodeKey[] = [];
  run((key) => {
    seen.push(key);
    return get(key);
  });
  return sortedIds(seen);
}

// RFC 6962 §2.1 read literally, over D = all leaves; memoized because every prefix tree of D
// shares its subranges. Generic so that it also builds symbolic trees (see claimsAlike).
function reference<T>(d: T[], node: (a: T, b: T) => T) {
  const memo = new Map<string, T>();
  const split = (n: number) => 2 ** Math.ceil(Math.log2(n) - 1);
  const mth = (a: number, b: number): T => {
    if (b - a === 1) return d[a]!;
    const key = `${a}:${b}`;
    let h = memo.get(key);
    if (h === undefined) memo.set(key, (h = node(mth(a, a + split(b - a)), mth(a + split(b - a), b))));
    return h;
  };
  const path = (m: number, a: number, b: number): T[] => {
    if (b - a === 1) return [];
    const k = split(b - a);
    return m < k ? [...path(m, a, a + k), mth(a + k, b)] : [...path(m - k, a + k, b), mth(a, a + k)];
  };
  const subproof = (m: number, a: number, b: number, whole: boolean): T[] => {
    if (m === b - a) return whole ? [] : [mth(a, b)];
    const k = split(b - a);
    return m <= k ? [...subproof(m, a, a + k, whole), mth(a + k, b)] : [...subproof(m - k, a + k, b, false), mth(a, a + k)];
  };
  return { mth, path, proof: (m: number, n: number) => (m === 0 || m === n ? [] : subproof(m, 0, n, true)) };
}

/**
 * RFC 6962 does not bind the size into the root: a proof also verifies under other (index, size)
 * or (from, to) claims whose definition combines the same proof elements into the same roots
 * (leaf 0 of 3 and leaf 0 of 4 both hash [leaf, p0] then [·, p1]). Built on symbolic trees,
 * this says whether a wrong claim is such a twin of the right one, so the tampering checks can
 * demand a rejection everywhere else and an acceptance there.
 */
function claimsAlike(maxSize: number) {
  const sym = reference(Array.from({ length: maxSize }, (_, i) => `<${i}>`), (a, b) => `(${a} ${b})`);
  const named = (text: string, parts: string[]) => parts.reduce((t, part, i) => t.split(part).join(`#${i}`), text);
  const inclusionShape = (m: number, n: number) => {
    if (m < 0 || m >= n) return null;
    const proof = sym.path(m, 0, n);
    return `${proof.length}|${named(sym.mth(0, n), proof).split(`<${m}>`).join('#leaf')}`;
  };
  const consistencyShape = (from: number, to: number) => {
    if (from < 1 || from >= to) return null; // a non-empty proof never verifies these
    const proof = sym.proof(from, to);
    let old = named(sym.mth(0, from), proof);
    let next = named(sym.mth(0, to), proof);
    if (old.includes('<')) [next, old] = [next.split(old).join('#old'), '#old']; // not in the proof: the verifier's own
    return { length: proof.length, old, next };
  };
  return {
    inclusion: (m: number, n: number, m2: number, n2: number) => inclusionShape(m2, n2) !== null && inclusionShape(m2, n2) === inclusionShape(m, n),
    consistency: (from: number, to: number, from2: number, to2: number) => {
      const right = consistencyShape(from, to)!;
      const wrong = consistencyShape(from2, to2);
      if (!wrong || wrong.length !== right.length) return false;
      const asOld = (t: string) => t.split('#old').join(right.old); // #old is the old root the verifier is given
      return asOld(wrong.old) === right.old && asOld(wrong.next) === right.next;
    },
  };
}

const vectorLeaves = LEAF_INPUTS.map((x) => leafHash(x));
const vectors = storeOf(vectorLeaves);

test('leaf and node hashes use the RFC 6962 domain prefixes, and the empty tree hashes to SHA-256 of nothing', () => {
  assert.deepEqual(vectorLeaves, NODE_HASHES[0]!.map(hex));
  assert.deepEqual(nodeHash(vectorLeaves[0]!, vectorLeaves[1]!), hex(NODE_HASHES[1]![0]!));
  assert.deepEqual(EMPTY_ROOT, ROOTS[0]);
  assert.deepEqual(leafHash('a'), leafHash(Buffer.from('a')));
  assert.deepEqual(leafHash('é'), leafHash(Buffer.from([0xc3, 0xa9])));
});

test('nodeHashBase64 (the export\'s, in base64 from end to end) gives the published level-1..3 nodes from the published leaves', () => {
  const b64 = (h: string) => hex(h).toString('base64');
  for (let level = 1; level < NODE_HASHES.length; level++) {
    NODE_HASHES[level]!.forEach((node, i) => {
      const [left, right] = [NODE_HASHES[level - 1]![2 * i]!, NODE_HASHES[level - 1]![2 * i + 1]!];
      assert.equal(nodeHashBase64(b64(left), b64(right)), b64(node), `level ${level}, node ${i}`);
    });
  }
});

test('the root of every size 0..8 of the published tree matches, computed both from stored nodes and by the builder', () => {
  for (let size = 0; size <= 8; size++) {
    assert.deepEqual(rootHash(size, vectors.get), ROOTS[size], `size ${size}`);
    assert.deepEqual(vectors.roots[size], ROOTS[size], `builder at size ${size}`);
  }
  // The builder hands back exactly the published interior nodes, each once.
  const completed = new TreeBuilder();
  const got: string[][] = [[], [], [], []];
  for (const leaf of vectorLeaves) for (const { key, hash } of completed.append(leaf)) got[key.level]![key.index] = hash.toString('hex');
  assert.deepEqual(got.slice(1), NODE_HASHES.slice(1));
});

test('the published inclusion proofs are generated from stored nodes and verify; corrupted ones do not', () => {
  for (const { index, size, proof } of INCLUSION_VECTORS) {
    const want = proof.map(hex);
    const label = `leaf ${index} of ${size}`;
    assert.deepEqual(inclusionProof(index, size, vectors.get), want, label);
    assert.equal(verifyInclusion(vectorLeaves[index]!, index, size, want, ROOTS[size]!), true, label);
    assert.equal(verifyInclusion(vectorLeaves[index]!, index, size, want, ROOTS[size - 1]!), false, label);
    assert.equal(verifyInclusion(leafHash('WrongLeaf'), index, size, want, ROOTS[size]!), false, label);
    assert.equal(verifyInclusion(vectorLeaves[index]!, index, size, [...want, ROOTS[size]!], ROOTS[size]!), false, label);
    assert.equal(verifyInclusion(vectorLeaves[index]!, index, size * 2, want, ROOTS[size]!), false, label);
  }
});

test('the published consistency proofs are generated from stored nodes and verify; corrupted ones do not', () => {
  for (const { from, to, proof } of CONSISTENCY_VECTORS) {
    const want = proof.map(hex);
    const label = `${from} → ${to}`;
    assert.deepEqual(consistencyProof(from, to, vectors.get), want, label);
    assert.equal(verifyConsistency(from, to, ROOTS[from]!, ROOTS[to]!, want), true, label);
    if (from === to) continue;
    assert.equal(verifyConsistency(from, to, ROOTS[to]!, ROOTS[from]!, want), false, label);
    assert.equal(verifyConsistency(from, to, ROOTS[from]!, ROOTS[to]!, []), false, label);
    assert.equal(verifyConsistency(from, to, ROOTS[from]!, ROOTS[to]!, [want[0]!, ...want]), false, label);
    assert.equal(verifyConsistency(from - 1, to, ROOTS[from]!, ROOTS[to]!, want), false, label);
  }
});

test('proofs are made of exactly the stored nodes the published selection names, and of what the *Nodes functions list', () => {
  const leaves = Array.from({ length: 95 }, (_, i) => leafHash(`leaf ${i}`));
  const { get } = storeOf(leaves);
  const pairs = (v: Array<[number, number]>) => v.map(([level, index]) => `${level}:${index}`).sort();
  for (const [index, size, want] of INCLUSION_NODE_VECTORS) {
    assert.deepEqual(sortedIds(inclusionProofNodes(index, size)), pairs(want), `leaf ${index} of ${size}`);
    assert.deepEqual(reads(get, (g) => inclusionProof(index, size, g)), pairs(want), `leaf ${index} of ${size}`);
  }
  for (const [from, to, want] of CONSISTENCY_NODE_VECTORS) {
    assert.deepEqual(sortedIds(consistencyProofNodes(from, to)), pairs(want), `${from} → ${to}`);
    assert.deepEqual(reads(get, (g) => consistencyProof(from, to, g)), pairs(want), `${from} → ${to}`);
  }
});

test('for every tree of 1..70 leaves, every inclusion and consistency proof equals RFC 6962 read literally, verifies, and fails when tampered with', () => {
  const MAX = 70;
  const leaves = Array.from({ length: MAX }, (_, i) => leafHash(`entry ${i}`));
  const { get, roots } = storeOf(leaves);
  const ref = reference(leaves, nodeHash);
  const alike = claimsAlike(2 * MAX);
  const twins = { inclusion: 0, consistency: 0, rejected: 0 };
  const flipped = (proof: Hash[], i: number) => proof.map((h, j) => (j === i ? Buffer.from(h).fill(h[0]! ^ 1, 0, 1) : h));
  for (let size = 1; size <= MAX; size++) {
    const root = roots[size]!;
    assert.deepEqual(root, ref.mth(0, size), `root of ${size}`);
    assert.deepEqual(rootHash(size, get), root, `root of ${size}`);
    assert.deepEqual(reads(get, (g) => rootHash(size, g)), sortedIds(rootNodes(size)));
    for (let index = 0; index < size; index++) {
      const label = `leaf ${index} of ${size}`;
      const proof = inclusionProof(index, size, get);
      assert.deepEqual(proof, ref.path(index, 0, size), label);
      assert.deepEqual(reads(get, (g) => inclusionProof(index, size, g)), sortedIds(inclusionProofNodes(index, size)), label);
      const leaf = leaves[index]!;
      assert.equal(verifyInclusion(leaf, index, size, proof, root), true, label);
      for (let i = 0; i < proof.length; i++) assert.equal(verifyInclusion(leaf, index, size, flipped(proof, i), root), false, `${label}, byte flipped in ${i}`);
      if (proof.length > 0) assert.equal(verifyInclusion(leaf, index, size, proof.slice(0, -1), root), false, `${label}, dropped`);
      assert.equal(verifyInclusion(leaf, index, size, [...proof, root], root), false, `${label}, extended`);
      for (const [i, n] of [[index + 1, size], [index - 1, size], [index, size + 1], [index, size - 1], [index, size * 2]] as const) {
        const twin = alike.inclusion(index, size, i, n);
        assert.equal(verifyInclusion(leaf, i, n, proof, root), twin, `${label}, claimed as leaf ${i} of ${n}`);
        if (twin) twins.inclusion++;
        else twins.rejected++;
      }
    }
    for (let from = 0; from <= size; from++) {
      const label = `${from} → ${size}`;
      const proof = consistencyProof(from, size, get);
      assert.deepEqual(proof, ref.proof(from, size), label);
      assert.deepEqual(reads(get, (g) => consistencyProof(from, size, g)), sortedIds(consistencyProofNodes(from, size)), label);
      const old = roots[from]!;
      assert.equal(verifyConsistency(from, size, old, root, proof), true, label);
      if (from === 0 || from === size) continue;
      for (let i = 0; i < proof.length; i++) assert.equal(verifyConsistency(from, size, old, root, flipped(proof, i)), false, `${label}, byte flipped in ${i}`);
      assert.equal(verifyConsistency(from, size, old, root, proof.slice(0, -1)), false, `${label}, dropped`);
      assert.equal(verifyConsistency(from, size, old, root, [...proof, root]), false, `${label}, extended`);
      for (const [f, t] of [[from - 1, size], [from + 1, size], [from, size + 1], [from, size - 1], [from, size * 2]] as const) {
        const twin = alike.consistency(from, size, f, t);
        assert.equal(verifyConsistency(f, t, old, root, proof), twin, `${label}, claimed as ${f} → ${t}`);
        if (twin) twins.consistency++;
        else twins.rejected++;
      }
      assert.equal(verifyConsistency(from, size, roots[from - 1]!, root, proof), false, `${label}, wrong old root`);
    }
  }
  // Both outcomes occur, so the model above is not vacuous either way.
  assert.ok(twins.inclusion > 0 && twins.consistency > 0 && twins.rejected > twins.inclusion + twins.consistency, JSON.stringify(twins));
});

test('the checker of many leaves in order answers as verifyInclusion does, for genuine, tampered and misplaced proofs, on every tree of 1..70 leaves', () => {
  const MAX = 70;
  const leaves = Array.from({ length: MAX }, (_, i) => leafHash(`entry ${i}`));
  const { get, roots } = storeOf(leaves);
  const b64 = (proof: Hash[]) => proof.map((h) => h.toString('base64'));
  let compared = 0;
  for (let size = 1; size <= MAX; size++) {
    const root = roots[size]!;
    const checker = new InclusionChecker(size, root);
    for (let index = 0; index < size; index++) {
      const proof = inclusionProof(index, size, get);
      const leaf = leaves[index]!;
      // Each variant right after the previous leaf's genuine proof was accepted, so that the
      // checker has a state to meet: a tampered entry anywhere, above the meeting point too,
      // must still fail.
      const variants: Array<[string, Buffer, number, Hash[]]> = [
        ...proof.map((_, i): [string, Buffer, number, Hash[]] => [`entry ${i} flipped`, leaf, index, proof.map((h, j) => (j === i ? Buffer.from(h).fill(h[0]! ^ 1, 0, 1) : h))]),
        ['another leaf', leaves[(index + 1) % MAX]!, index, proof],
        ['claimed one later', leaf, index + 1, proof],
        ['the previous proof', leaf, index, index > 0 ? inclusionProof(index - 1, size, get) : proof.slice(0, -1)],
        ['dropped', leaf, index, proof.slice(0, -1)],
      ];
      for (const [what, l, i, p] of variants) {
        assert.equal(checker.verify(l, i, b64(p)), verifyInclusion(l, i, size, p, root), `leaf ${index} of ${size}: ${what}`);
        compared++;
      }
      assert.equal(checker.verify(leaf, index, b64(proof)), true, `leaf ${index} of ${size}`);
    }
    assert.equal(checker.verify(leaves[0]!, 0, ['bm90IDMyIGJ5dGVz']), false, 'an entry that is not 32 bytes');
  }
  assert.ok(compared > 10_000, String(compared));
});

test('trivial proofs: the empty tree is consistent with any tree only under the empty root, and a tree with itself only under one root', () => {
  assert.equal(verifyConsistency(0, 5, EMPTY_ROOT, ROOTS[5]!, []), true);
  assert.equal(verifyConsistency(0, 5, ROOTS[1]!, ROOTS[5]!, []), false);
  assert.equal(verifyConsistency(0, 5, EMPTY_ROOT, ROOTS[5]!, [ROOTS[1]!]), false);
  assert.equal(verifyConsistency(5, 5, ROOTS[5]!, ROOTS[5]!, []), true);
  assert.equal(verifyConsistency(5, 5, ROOTS[5]!, ROOTS[6]!, []), false);
  assert.equal(verifyConsistency(6, 5, ROOTS[6]!, ROOTS[5]!, []), false);
  assert.equal(verifyInclusion(vectorLeaves[0]!, 0, 0, [], EMPTY_ROOT), false);
  assert.equal(verifyInclusion(vectorLeaves[0]!, 0, 1, [], vectorLeaves[0]!), true);
  assert.equal(verifyInclusion(vectorLeaves[0]!, 0, 1, [], Buffer.alloc(0)), false);
  assert.deepEqual(consistencyProof(0, 8, vectors.get), []);
  assert.deepEqual(consistencyProofNodes(0, 8), []);
  assert.deepEqual(rootHash(0, vectors.get), EMPTY_ROOT);
  assert.throws(() => inclusionProofNodes(8, 8), RangeError);
  assert.throws(() => consistencyProofNodes(9, 8), RangeError);
  assert.throws(() => frontierNodes(-1), RangeError);
  assert.throws(() => frontierNodes(2 ** 53), RangeError);
});

test('a builder restarted from any (size, frontier) reaches the same roots and completes the same nodes as one built from scratch', () => {
  const leaves = Array.from({ length: 70 }, (_, i) => leafHash(`entry ${i}`));
  const scratch = new TreeBuilder();
  const snapshots: Array<{ size: number; frontier: Hash[] }> = [];
  const completedAt: string[] = [];
  const roots: Hash[] = [];
  for (const leaf of leaves) {
    snapshots.push({ size: scratch.size, frontier: scratch.frontier() });
    completedAt.push(scratch.append(leaf).map(({ key, hash }) => `${id(key)}=${hash.toString('hex')}`).join());
    roots.push(scratch.root());
  }
  const { get } = storeOf(leaves);
  for (const { size, frontier } of snapshots) {
    assert.deepEqual(frontier, frontierNodes(size).map(get), `frontier at ${size}`);
    const restarted = new TreeBuilder(size, frontier);
    assert.equal(restarted.size, size);
    for (let i = size; i < leaves.length; i++) {
      const completed = restarted.append(leaves[i]!).map(({ key, hash }) => `${id(key)}=${hash.toString('hex')}`).join();
      assert.equal(completed, completedAt[i], `restarted at ${size}, leaf ${i}`);
      assert.deepEqual(restarted.root(), roots[i], `restarted at ${size}, size ${i + 1}`);
    }
  }
  assert.throws(() => new TreeBuilder(5, [ROOTS[4]!]), RangeError);
  assert.throws(() => new TreeBuilder(1, [Buffer.alloc(31)]), TypeError);
});

test('index arithmetic holds past 2^32 and up to 2^53 - 1, where 32-bit bitwise operators would wrap', () => {
  assert.deepEqual(frontierNodes(2 ** 40 + 5), [{ level: 40, index: 0 }, { level: 2, index: 2 ** 38 }, { level: 0, index: 2 ** 40 + 4 }]);
  assert.deepEqual(frontierNodes(2 ** 33), [{ level: 33, index: 0 }]);
  assert.equal(frontierNodes(2 ** 53 - 1).length, 53);

  // 2^41 + 7 leaves: a perfect left half holding the leaf (41 siblings) and a 7-leaf right edge
  // (4 + 2 + 1) that makes up the last proof element.
  const index = 2 ** 40 + 3;
  const size = 2 ** 41 + 7;
  const keys = inclusionProofNodes(index, size);
  assert.equal(keys.length, 44);
  for (let level = 0; level < 41; level++) {
    const mine = Math.floor(index / 2 ** level);
    assert.deepEqual(keys[level], { level, index: mine % 2 === 0 ? mine + 1 : mine - 1 });
  }
  assert.deepEqual(keys.slice(41), [{ level: 2, index: 2 ** 39 }, { level: 1, index: 2 ** 40 + 2 }, { level: 0, index: 2 ** 41 + 6 }]);

  // A tree whose leaves are all equal has a subtree hash per level, so proofs over huge sizes
  // can be generated from real hashes and verified.
  const perLevel = [leafHash('same')];
  for (let l = 1; l <= 53; l++) perLevel.push(nodeHash(perLevel[l - 1]!, perLevel[l - 1]!));
  const get: NodeSource = ({ level }) => perLevel[level]!;
  const cases: Array<[number, number]> = [[index, size], [2 ** 53 - 2, 2 ** 53 - 1], [2 ** 32, 2 ** 32 + 1], [0, 2 ** 52 + 2 ** 31 + 3]];
  for (const [i, n] of cases) {
    const proof = inclusionProof(i, n, get);
    assert.equal(verifyInclusion(perLevel[0]!, i, n, proof, rootHash(n, get)), true, `leaf ${i} of ${n}`);
    assert.deepEqual(reads(get, (g) => inclusionProof(i, n, g)), sortedIds(inclusionProofNodes(i, n)));
  }
  const pairs: Array<[number, number]> = [[2 ** 40 + 5, size], [2 ** 32 + 1, 2 ** 53 - 1], [3, 2 ** 33], [2 ** 52 - 1, 2 ** 52]];
  for (const [from, to] of pairs) {
    const proof = consistencyProof(from, to, get);
    assert.equal(verifyConsistency(from, to, rootHash(from, get), rootHash(to, get), proof), true, `${from} → ${to}`);
    assert.deepEqual(reads(get, (g) => consistencyProof(from, to, g)), sortedIds(consistencyProofNodes(from, to)));
  }
  const big = new TreeBuilder(2 ** 53 - 2, frontierNodes(2 ** 53 - 2).map(get));
  big.append(perLevel[0]!);
  assert.deepEqual(big.root(), rootHash(2 ** 53 - 1, get));
  assert.throws(() => big.append(perLevel[0]!), RangeError);
});
