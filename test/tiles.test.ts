// The audit tree as C2SP tlog-tiles (tlog/tiles.ts): paths to the spec's letter,
// every root and proof computed through tiles equal to merkle.ts's over all nodes, the
// sealer's right edge equal to a from-the-definition tree at every size, and a client written
// from the spec alone (helpers/tlog-reader.ts) reading what tiles.ts produces.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  EMPTY_ROOT, TreeBuilder, consistencyProof, consistencyProofNodes, inclusionProof, inclusionProofNodes, leafHash, nodeHash, rootHash,
  rootNodes, verifyInclusion as merkleVerifyInclusion, type Hash, type NodeKey, type NodeSource,
} from '../src/tlog/merkle.js';
import {
  HASH_BYTES, RightEdge, TILE_WIDTH, decodeEntryBundle, encodeEntryBundle, formatTileIndex, parseTileIndex, parseTilePath, rightEdgeWidths,
  subtreeHash, tileKey, tileNodeSource, tilePath, tileRoot, tileWidthAt, tilesForNodes,
} from '../src/tlog/tiles.js';
import { TlogReader, encodeIndex, parseCheckpointNote, verifyInclusion } from './helpers/tlog-reader.js';

const N = 70_000; // the spec's example size: three tile levels, level 1 with a full tile
const entry = (i: number): Buffer => Buffer.from(`entry ${i}`);

/** Every complete node of the tree of N leaves, level by level, from the definition (no tiles). */
const LEVELS: Hash[][] = [Array.from({ length: N }, (_, i) => leafHash(entry(i)))];
while (LEVELS[LEVELS.length - 1]!.length > 1) {
  const below = LEVELS[LEVELS.length - 1]!;
  LEVELS.push(Array.from({ length: Math.floor(below.length / 2) }, (_, i) => nodeHash(below[2 * i]!, below[2 * i + 1]!)));
}
const allNodes: NodeSource = ({ level, index }) => {
  const h = LEVELS[level]?.[index];
  if (!h) throw new Error(`no node ${level}:${index}`);
  return h;
};
const LEVEL_BUFS = new Map<number, Buffer>();
/** Tile (level, index) cut to `width` entries, straight from the tree's level 8·level. */
function refTile(level: number, index: number, width: number): Buffer {
  let buf = LEVEL_BUFS.get(level);
  if (!buf) LEVEL_BUFS.set(level, (buf = Buffer.concat(LEVELS[8 * level]!)));
  const t = buf.subarray(index * TILE_WIDTH * HASH_BYTES, (index * TILE_WIDTH + width) * HASH_BYTES);
  assert.equal(t.length, width * HASH_BYTES, `reference tile ${level}/${index} has ${width} entries`);
  return t;
}
const refRoot = (size: number): Hash => rootHash(size, allNodes);

test('tile index paths: the spec examples, round trips and refusals', () => {
  const table: Array<[number, string]> = [
    [0, '000'], [5, '005'], [67, '067'], [999, '999'], [1000, 'x001/000'], [1234067, 'x001/x234/067'], [123456789, 'x123/x456/789'],
    [1_000_000, 'x001/x000/000'], [Number.MAX_SAFE_INTEGER, 'x009/x007/x199/x254/x740/991'],
  ];
  for (const [n, path] of table) {
    assert.equal(formatTileIndex(n), path);
    assert.equal(encodeIndex(n), path, 'the test-side reader writes the same path');
    assert.equal(parseTileIndex(path), n);
  }
  for (let n = 0; n < 3000; n += 7) assert.equal(parseTileIndex(formatTileIndex(n)), n);
  for (let i = 0; i < 200; i++) {
    const n = Math.floor(Math.random() * Number.MAX_SAFE_INTEGER);
    assert.equal(parseTileIndex(formatTileIndex(n)), n);
  }
  const refused = [
    '', '5', '05', '0005', 'x005', 'x05/003', 'x000/005', 'x000/x001/000', '001/000', 'x001/x000', 'x001/000/', '/000', 'X001/000',
    'x001/-01', 'x1234/000', ' 005', '005 ', '1e3', 'x009/x007/x199/x254/x740/992', 'x001/x000/x000/x000/x000/x000/000', '０００',
  ];
  for (const path of refused) assert.equal(parseTileIndex(path), undefined, JSON.stringify(path));
  for (const bad of [-1, 1.5, Number.MAX_SAFE_INTEGER + 1, NaN]) assert.throws(() => formatTileIndex(bad), RangeError);
});

test('tile paths: tile/<L>/<N>[.p/<W>] and tile/entries/…, strict both ways', () => {
  assert.equal(tilePath(0, 1067, 5), 'tile/0/x001/067.p/5');
  assert.equal(tilePath(0, 1234067), 'tile/0/x001/x234/067');
  assert.equal(tilePath(2, 0, 1), 'tile/2/000.p/1');
  assert.equal(tilePath('entries', 0), 'tile/entries/000');
  assert.equal(tilePath('entries', 273, 112), 'tile/entries/273.p/112');
  assert.equal(tilePath(63, 7, 255), 'tile/63/007.p/255');
  for (const [level, index, width] of [[0, 0, 256], [1, 1000, 1], [63, Number.MAX_SAFE_INTEGER, 255], ['entries', 12, 256]] as const) {
    assert.deepEqual(parseTilePath(tilePath(level, index, width)), { level, index, width });
  }
  for (const [level, width] of [[64, 256], [-1, 256], [1.5, 256], [0, 0], [0, 257], [0, 2.5]] as const) {
    assert.throws(() => tilePath(level, 0, width), RangeError);
  }
  const refused = [
    'tile/0/000.p/256', 'tile/0/000.p/0', 'tile/0/000.p/05', 'tile/0/000.p/', 'tile/0/000.p/1000', 'tile/64/000', 'tile/00/000', 'tile/01/000',
    'tile/-1/000', 'tile/8/0/000', 'tile/data/000', 'tile/0/000/', 'tiles/0/000', '/tile/0/000', 'tile/0', 'tile/0/', 'tile/entries/000.p/300',
    'tile/0/x05/003', 'tile/0/000.p/5/', 'tile/0/000.P/5',
  ];
  for (const path of refused) assert.equal(parseTilePath(path), undefined, path);
});

test('which tiles a tree has: the spec example of 70,000 leaves, and 256', () => {
  assert.deepEqual(rightEdgeWidths(70_000), [{ level: 0, index: 273, width: 112 }, { level: 1, index: 1, width: 17 }, { level: 2, index: 0, width: 1 }]);
  assert.deepEqual(rightEdgeWidths(256), [{ level: 0, index: 1, width: 0 }, { level: 1, index: 0, width: 1 }]);
  assert.deepEqual(rightEdgeWidths(65_536), [{ level: 0, index: 256, width: 0 }, { level: 1, index: 1, width: 0 }, { level: 2, index: 0, width: 1 }]);
  assert.deepEqual(rightEdgeWidths(0), []);
  assert.deepEqual([tileWidthAt(70_000, 0, 272), tileWidthAt(70_000, 0, 273), tileWidthAt(70_000, 0, 274)], [256, 112, 0]);
  assert.deepEqual([tileWidthAt(70_000, 1, 0), tileWidthAt(70_000, 1, 1), tileWidthAt(70_000, 2, 0), tileWidthAt(70_000, 3, 0)], [256, 17, 1, 0]);
  for (const size of [1, 255, 256, 257, 65_535, 65_536, 70_000, 2 ** 40 + 12345, Number.MAX_SAFE_INTEGER]) {
    const edge = rightEdgeWidths(size);
    for (const { level, index, width } of edge) {
      assert.equal(tileWidthAt(size, level, index), width);
      if (index > 0) assert.equal(tileWidthAt(size, level, index - 1), TILE_WIDTH);
      assert.equal(index * TILE_WIDTH + width, Math.floor(size / TILE_WIDTH ** level));
    }
    assert.equal(tileWidthAt(size, edge.length, 0), 0);
  }
});

test('subtreeHash and tileRoot are RFC 6962 MTH, for any count', () => {
  const leaves = refTile(0, 0, 256);
  for (const start of [0, 7]) {
    for (let count = 1; count <= 249; count++) {
      const b = new TreeBuilder();
      for (let i = start; i < start + count; i++) b.append(LEVELS[0]![i]!);
      assert.deepEqual(subtreeHash(leaves, start, count), b.root(), `${start}+${count}`);
    }
  }
  for (let i = 0; i < 5; i++) assert.deepEqual(tileRoot(refTile(0, i, 256)), LEVELS[8]![i]);
  assert.deepEqual(tileRoot(refTile(1, 0, 256)), LEVELS[16]![0]);
  assert.throws(() => subtreeHash(leaves, 0, 0), RangeError);
  assert.throws(() => subtreeHash(leaves, 200, 57), RangeError);
  assert.throws(() => tileRoot(refTile(0, 0, 255)), RangeError);
});

/** The keys the root and inclusion and consistency proofs of a tree of `size` read: the edges, the middle and a random one when thorough. */
function queries(size: number, thorough: boolean): Array<{ keys: NodeKey[]; run: (get: NodeSource) => Hash[] }> {
  const random = Math.floor(Math.random() * size);
  const pick = thorough ? [0, size - 1, Math.floor(size / 2), random] : [random, random];
  return [
    { keys: rootNodes(size), run: (get) => [rootHash(size, get)] },
    ...pick.map((i) => ({ keys: inclusionProofNodes(i, size), run: (get: NodeSource) => inclusionProof(i, size, get) })),
    ...pick.slice(1).map((m) => ({ keys: consistencyProofNodes(m, size), run: (get: NodeSource) => consistencyProof(m, size, get) })),
  ];
}

function checkThroughTiles(size: number, thorough: boolean, tight = thorough): void {
  for (const q of queries(size, thorough)) {
    const tiles = tilesForNodes(q.keys);
    const map = new Map<string, Buffer>();
    for (const { level, index, width } of tiles) {
      assert.ok(width >= 1 && width <= tileWidthAt(size, level, index), `size ${size}: tile ${tilePath(level, index, width)} exists`);
      map.set(tileKey(level, index), refTile(level, index, width));
    }
    assert.deepEqual(q.run(tileNodeSource(map)), q.run(allNodes), `size ${size}`);
    if (!tight) continue;
    // The widths are the least that work: one entry fewer in any tile breaks the computation.
    for (const { level, index, width } of tiles) {
      const short = new Map(map).set(tileKey(level, index), refTile(level, index, width - 1));
      assert.throws(() => q.run(tileNodeSource(short)), /too short/);
    }
  }
}

test('roots and proofs through tiles equal merkle.ts over all nodes: every size to 2000, and around 65536', () => {
  for (let size = 1; size <= 2000; size++) checkThroughTiles(size, size % 13 === 0 || size < 300 || size % 256 < 2, size % 61 === 0);
  for (const size of [65_535, 65_536, 65_537, 65_536 + 255, 65_536 + 256, 69_999, 70_000]) checkThroughTiles(size, true);
});

test('tileNodeSource names the tile it lacks', () => {
  assert.throws(() => tileNodeSource(new Map())({ level: 9, index: 3 }), /tile tile\/1\/000 is missing \(node 9:3\)/);
  const map = new Map([[tileKey(0, 1), refTile(0, 1, 10)]]);
  assert.throws(() => tileNodeSource(map)({ level: 2, index: 66 }), /tile\/0\/001 is too short: 10 entries, node 2:66 needs 12/);
  assert.deepEqual(tileNodeSource(map)({ level: 2, index: 65 }), LEVELS[2]![65]); // entries 4..7 of the same tile
});

test('RightEdge: appending one by one gives merkle.ts roots, the spec\'s tiles, and rebuilds from stored tiles', () => {
  const edge = new RightEdge();
  assert.deepEqual(edge.root(), EMPTY_ROOT);
  assert.equal(edge.levels(), 0);
  const builder = new TreeBuilder();
  const emitted = new Map<string, number>();
  const probes = new Set([65_535, 65_536, 65_537, 66_000, N]);
  for (let i = 0; i < N; i++) {
    const { full } = edge.append(LEVELS[0]![i]!);
    builder.append(LEVELS[0]![i]!);
    for (const t of full) {
      assert.deepEqual(t.hashes, refTile(t.level, t.index, TILE_WIDTH), `full tile ${t.level}/${t.index}`);
      emitted.set(`${t.level}`, (emitted.get(`${t.level}`) ?? 0) + 1);
    }
    assert.deepEqual(full.map((t) => t.level), full.map((_, k) => k), 'lowest level first, cascading');
    const size = i + 1;
    if (size <= 3000 || probes.has(size)) {
      assert.deepEqual(edge.root(), builder.root(), `root at ${size}`);
      const widths = rightEdgeWidths(size);
      assert.equal(edge.levels(), widths.length);
      for (const { level, index, width } of widths) assert.deepEqual(edge.partial(level), refTile(level, index, width));
    }
  }
  assert.deepEqual(Object.fromEntries(emitted), { 0: Math.floor(N / 256), 1: 1 });
  assert.deepEqual(edge.partial(5), Buffer.alloc(0));

  for (const size of [0, 1, 255, 256, 257, 511, 512, 65_535, 65_536, 65_537, N - 300]) {
    // read hands back whole tiles (longer than asked): fromTiles must use only the prefix.
    const e = RightEdge.fromTiles(size, (level, index, width) => {
      assert.equal(width, tileWidthAt(size, level, index));
      return refTile(level, index, Math.min(TILE_WIDTH, Math.floor(N / TILE_WIDTH ** level) - index * TILE_WIDTH));
    });
    assert.equal(e.size, size);
    assert.deepEqual(e.root(), refRoot(size));
    for (let i = size; i < Math.min(size + 300, N); i++) {
      for (const t of e.append(LEVELS[0]![i]!).full) assert.deepEqual(t.hashes, refTile(t.level, t.index, TILE_WIDTH));
      if (i % 17 === 0) assert.deepEqual(e.root(), refRoot(i + 1));
    }
  }
});

test('RightEdge.changedSince: per batch, the partial tiles that every checkpoint\'s right edge needs', () => {
  const edge = new RightEdge();
  const store = new Map<string, Buffer>(); // rows keyed (level, index, width), levels ≥ 1
  let size = 0;
  while (size < N) {
    const since = size;
    const batch = Math.min(N - size, 1 + Math.floor(Math.random() * (size > 60_000 ? 3000 : 700)));
    for (; size < since + batch; size++) {
      for (const t of edge.append(LEVELS[0]![size]!).full) if (t.level >= 1) store.set(`${t.level}/${t.index}/256`, t.hashes);
    }
    const changed = edge.changedSince(since);
    for (const t of changed) {
      assert.ok(t.level >= 1 && Math.floor(size / TILE_WIDTH ** t.level) !== Math.floor(since / TILE_WIDTH ** t.level));
      assert.deepEqual(t.hashes, refTile(t.level, t.index, t.width));
      const key = `${t.level}/${t.index}/${t.width}`;
      assert.ok(!store.has(key), `${key} is new: rows are append-only`);
      store.set(key, t.hashes);
    }
    // The checkpoint at `size` can be served and the edge rebuilt from the store (level 0 from the leaves).
    const rebuilt = RightEdge.fromTiles(size, (level, index, width) => {
      if (level === 0) return refTile(0, index, width);
      const row = store.get(`${level}/${index}/${width}`);
      assert.ok(row, `tile ${tilePath(level, index, width)} stored for the checkpoint at ${size}`);
      return row;
    });
    assert.deepEqual(rebuilt.root(), refRoot(size));
  }
  assert.deepEqual(edge.changedSince(N), []);
  assert.deepEqual(edge.changedSince(N - 1, 0).map((t) => [t.level, t.index, t.width]), [[0, 273, 112]]);
  assert.throws(() => edge.changedSince(N + 1), RangeError);
});

test('RightEdge refuses an edge that does not match its size', () => {
  const h = (n: number) => Buffer.alloc(n * HASH_BYTES, 7);
  assert.doesNotThrow(() => new RightEdge(256, [h(0), h(1)]));
  assert.doesNotThrow(() => new RightEdge(70_000, [h(112), h(17), h(1)]));
  for (const [size, partials] of [
    [1, []], [3, [h(2)]], [256, [h(0)]], [256, [h(1), h(1)]], [256, [h(0), h(1), h(0)]], [0, [h(0)]], [-1, []], [1.5, [h(1)]],
    [3, [Buffer.alloc(95)]],
  ] as Array<[number, Buffer[]]>) {
    assert.throws(() => new RightEdge(size, partials), RangeError, `size ${size}`);
  }
  assert.throws(() => new RightEdge().append(Buffer.alloc(31)), TypeError);
  assert.throws(() => RightEdge.fromTiles(3, () => h(2)), RangeError);
});

test('entry bundles: uint16 big-endian length prefixes, round trips and refusals', () => {
  assert.deepEqual(encodeEntryBundle([Buffer.from('ab'), new Uint8Array(0)]), Buffer.from([0, 2, 0x61, 0x62, 0, 0]));
  const big = Buffer.alloc(65_535, 1);
  for (const entries of [[], [Buffer.alloc(0)], [big, Buffer.from('x')], Array.from({ length: 256 }, (_, i) => Buffer.alloc(i * 3, i))]) {
    const encoded = encodeEntryBundle(entries);
    assert.deepEqual(decodeEntryBundle(encoded), entries);
    assert.deepEqual(decodeEntryBundle(new Uint8Array(encoded)), entries);
  }
  assert.throws(() => encodeEntryBundle([Buffer.alloc(65_536)]), RangeError);
  assert.throws(() => encodeEntryBundle(Array.from({ length: 257 }, () => Buffer.alloc(0))), RangeError);
  const full = encodeEntryBundle(Array.from({ length: 256 }, () => Buffer.from('e')));
  for (const bad of [Buffer.from([0]), Buffer.from([0, 3, 0x61]), Buffer.from([0, 1, 0x61, 0]), Buffer.concat([full, Buffer.from([0, 0])])]) {
    assert.throws(() => decodeEntryBundle(bad), /truncated|after its 256th/);
  }
});

test('the spec-side reader and tiles.ts check each other on a served log', async () => {
  const served = new Map<string, Buffer>();
  const checkpoints = new Map<number, string>();
  const edge = new RightEdge();
  let since = 0;
  for (const cp of [1, 255, 256, 257, 1000, 65_536, N - 1, N]) {
    for (; edge.size < cp; ) {
      const i = edge.size;
      for (const t of edge.append(leafHash(entry(i))).full) {
        served.set(tilePath(t.level, t.index), t.hashes);
        if (t.level === 0) served.set(tilePath('entries', t.index), encodeEntryBundle(Array.from({ length: 256 }, (_, k) => entry(t.index * 256 + k))));
      }
    }
    for (const t of edge.changedSince(since, 0)) {
      served.set(tilePath(t.level, t.index, t.width), t.hashes);
      if (t.level === 0) served.set(tilePath('entries', t.index, t.width), encodeEntryBundle(Array.from({ length: t.width }, (_, k) => entry(t.index * 256 + k))));
    }
    checkpoints.set(cp, `example.com/teamlog\n${cp}\n${edge.root().toString('base64')}\n\n— example.com/teamlog AAAA\n`);
    since = cp;
  }
  assert.ok(!served.has('tile/0/001.p/0') && ![...served.keys()].some((p) => p.endsWith('.p/256')), 'no empty or mislabelled tiles');
  let current = '';
  const fetchBytes = async (path: string) => {
    const body = path === 'checkpoint' ? Buffer.from(current) : served.get(path);
    return body ? { status: 200, body } : { status: 404, body: Buffer.alloc(0) };
  };

  for (const [size, note] of checkpoints) {
    current = note;
    const reader = new TlogReader(fetchBytes);
    const cp = await reader.checkpoint();
    assert.equal(cp.size, size);
    assert.deepEqual(await reader.rootFromTiles(size), cp.rootHash, `root at ${size}`);
    const edgePaths = rightEdgeWidths(size).filter((t) => t.width > 0).map((t) => tilePath(t.level, t.index, t.width));
    assert.deepEqual(reader.fetched.slice(1).sort(), edgePaths.sort(), 'a root needs only the right edge');
    for (const index of [0, size - 1, Math.floor(size / 3), Math.floor(Math.random() * size)]) {
      const proof = await reader.inclusionProofFromTiles(index, size);
      assert.deepEqual(proof, inclusionProof(index, size, allNodes), `proof of ${index} in ${size}`);
      assert.ok(verifyInclusion(leafHash(entry(index)), index, size, proof, cp.rootHash));
      assert.ok(merkleVerifyInclusion(leafHash(entry(index)), index, size, proof, cp.rootHash));
      assert.ok(!verifyInclusion(leafHash(entry(index + 1)), index, size, proof, cp.rootHash));
      if (proof.length > 0) assert.ok(!verifyInclusion(leafHash(entry(index)), index, size, proof.slice(1), cp.rootHash));
    }
    const last = rightEdgeWidths(size)[0]!;
    const bundle = last.width > 0 ? last : { index: last.index - 1, width: 256 };
    const hashes = await reader.leafHashesFromEntries(bundle.index, bundle.width);
    assert.deepEqual(Buffer.concat(hashes), await reader.readTile(0, bundle.index, bundle.width));
  }

  // A partial tile deleted once its full tile exists (allowed by the spec) is read from the full one.
  served.delete('tile/0/000.p/255');
  const reader = new TlogReader(fetchBytes);
  assert.deepEqual(await reader.rootFromTiles(255), refRoot(255));
  assert.deepEqual(reader.fetched, ['tile/0/000.p/255', 'tile/0/000']);
  // A tampered tile gives a proof that does not verify.
  const tile = Buffer.from(served.get('tile/0/100')!);
  tile[5 * 32]! ^= 1;
  served.set('tile/0/100', tile);
  const proof = await new TlogReader(fetchBytes).inclusionProofFromTiles(100 * 256 + 4, N);
  assert.ok(!verifyInclusion(leafHash(entry(100 * 256 + 4)), 100 * 256 + 4, N, proof, refRoot(N)));
});

test('checkpoint bodies are read strictly', () => {
  const root = refRoot(5).toString('base64');
  assert.deepEqual(parseCheckpointNote(`o\n5\n${root}\n\n— o sig\n`), { origin: 'o', size: 5, rootHash: refRoot(5) });
  for (const bad of [`o\n05\n${root}\n`, `o\n5\n${root.slice(0, -1)}\n`, `\n5\n${root}\n`, `o\n5\n`, `o\n-5\n${root}\n`, `o\n5\n${root} \n`]) {
    assert.throws(() => parseCheckpointNote(bad), JSON.stringify(bad));
  }
});
