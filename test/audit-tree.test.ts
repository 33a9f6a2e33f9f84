// The audit tree stored and served as C2SP tlog-tiles (docs/api.md 4, docs/audit-integrity.md §2), read
// the way outsiders will: by a reader written from the spec alone (helpers/tlog-reader.ts, which
// imports nothing of the service). And the stored tree as evidence, not trusted state: tampered
// with as a superuser, it must be named by verification, never served as proofs that fail, never
// extended nor signed over.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { appendRecords, assertOk, committed, settled, untilSealingStops, verifyRoute } from './helpers/audit-log.js';
import { Client, type Session } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import type { TestServer } from './helpers/server.js';
import { hashLeaf, parseCheckpointNote, TlogReader, verifyInclusion } from './helpers/tlog-reader.js';

const ENV = { AUDIT_CHECKPOINT_INTERVAL_MS: '100', AUDIT_SEAL_STALL_MS: '1000' };
/** More than two full level-0 tiles, so that the tree has full tiles, a partial one, and a level above. */
const RECORDS = 700;

/** The tlog-tiles paths of the log, fetched over HTTP as an ADMIN. */
const fetcher = (admin: Session) => async (path: string) => {
  const res = await fetch(`${admin.client.server.url}/api/v1/audit-logs/tlog/${path}`, { headers: { authorization: `Bearer ${admin.token}` } });
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
};

const recordAtSeq = async (server: TestServer, seq: number) => (await server.owner.query<{ record_id: number }>('SELECT record_id FROM audit_seal WHERE seq = $1', [seq]))[0]!.record_id;

describe('the tree as C2SP tlog-tiles, read by a reader written from the spec', () => {
  const h = useTestServer({ env: ENV });
  h.before(async () => {
    await appendRecords(h.server.owner, RECORDS, 'tiles-');
    await settled(h.server, h.admin);
  });

  test('the root it rebuilds from the tiles is the signed checkpoint\'s; entry bundles hash to the level-0 tiles; its proofs are the route\'s', async () => {
    const reader = new TlogReader(fetcher(h.admin));
    const checkpoint = await reader.checkpoint();
    const latest = await h.admin.client.get('/api/v1/audit-logs/checkpoints/latest', { token: h.admin.token });
    assert.equal(checkpoint.size, latest.body.tree_size);
    assert.ok(checkpoint.size > 2 * 256, `a tree of ${checkpoint.size} records has full tiles and a level above`);
    assert.equal((await reader.rootFromTiles(checkpoint.size)).toString('base64'), latest.body.root_hash, 'the tiles give the signed root');
    // Every leaf of the first full tile and of the partial one, from the entry bundles.
    for (const [index, width] of [[0, 256], [Math.floor(checkpoint.size / 256), checkpoint.size % 256]] as const) {
      const fromEntries = await reader.leafHashesFromEntries(index, width);
      assert.deepEqual(Buffer.concat(fromEntries), await reader.readTile(0, index, width), `entry bundle ${index} (width ${width})`);
    }
    for (const seq of [0, 255, 256, 511, checkpoint.size - 1]) {
      const id = await recordAtSeq(h.server, seq);
      const route = await h.admin.client.get(`/api/v1/audit-logs/${id}/proof`, { token: h.admin.token });
      assert.equal(route.status, 200, route.text);
      const path = await reader.inclusionProofFromTiles(seq, checkpoint.size);
      assert.deepEqual(path.map((p) => p.toString('base64')), route.body.audit_path, `seq ${seq}`);
      assert.ok(verifyInclusion(Buffer.from(route.body.leaf_hash, 'base64'), seq, checkpoint.size, path, checkpoint.rootHash));
    }
  });

  test('the proof route carries the sealed form, from which the leaf is recomputed (RFC 8785, then SHA-256 of 0x00 and it)', async () => {
    const id = await recordAtSeq(h.server, 300);
    const res = await h.admin.client.get(`/api/v1/audit-logs/${id}/proof`, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
    const record = await h.admin.client.get(`/api/v1/audit-logs/${id}`, { token: h.admin.token });
    assert.deepEqual(res.body.sealed, record.body, 'a record with no personal value is sealed as the API shows it');
    // The bundle's entry for that seq is exactly the canonical form; its leaf is the proof's.
    const bundle = (await fetcher(h.admin)('tile/entries/001')).body;
    let at = 0;
    for (let i = 0; i < 300 - 256; i++) at += 2 + bundle.readUInt16BE(at);
    const entry = bundle.subarray(at + 2, at + 2 + bundle.readUInt16BE(at));
    assert.deepEqual(JSON.parse(entry.toString('utf8')), res.body.sealed);
    assert.equal(hashLeaf(entry).toString('base64'), res.body.leaf_hash);
  });

  test('full tiles never change (cached a year, immutable); partial ones are served for any width the sealed tree holds; beyond it 404; a path tlog-tiles never writes is 400; a USER is refused', async () => {
    const get = fetcher(h.admin);
    const full = await fetch(`${h.server.url}/api/v1/audit-logs/tlog/tile/0/000`, { headers: { authorization: `Bearer ${h.admin.token}` } });
    assert.equal(full.status, 200);
    assert.equal(full.headers.get('cache-control'), 'private, max-age=31536000, immutable');
    assert.equal(full.headers.get('content-type'), 'application/octet-stream');
    assert.equal((await full.arrayBuffer()).byteLength, 256 * 32);
    const sealed = (await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_seal'))[0]!.n;
    const edgeWidth = sealed % 256;
    const edgeIndex = Math.floor(sealed / 256).toString().padStart(3, '0');
    const partial = await fetch(`${h.server.url}/api/v1/audit-logs/tlog/tile/0/${edgeIndex}.p/${edgeWidth}`, { headers: { authorization: `Bearer ${h.admin.token}` } });
    assert.equal(partial.status, 200);
    assert.equal(partial.headers.get('cache-control'), 'private, no-cache');
    assert.equal((await partial.arrayBuffer()).byteLength, edgeWidth * 32);
    // A narrower width of a full tile, and of the edge's, is its prefix.
    assert.deepEqual((await get('tile/0/000.p/7')).body, (await get('tile/0/000')).body.subarray(0, 7 * 32));
    assert.equal((await get('tile/1/000.p/1')).body.length, 32, 'level 1: the root of the first full level-0 tile');
    assert.equal((await get(`tile/0/${edgeIndex}.p/${edgeWidth + 1}`)).status, 404, 'wider than the sealed tree holds');
    assert.equal((await get(`tile/0/${edgeIndex}`)).status, 404, 'not full yet');
    assert.equal((await get('tile/1/000')).status, 404);
    assert.equal((await get('tile/entries/x001/000')).status, 404);
    assert.equal((await get('tile/7/000')).status, 404, 'a level the tree does not reach');
    for (const bad of ['tile/0/0', 'tile/0/x000/001', 'tile/0/000.p/256', 'tile/0/000.p/0', 'tile/64/000', 'tile/0/000.p/05']) {
      const res = await get(bad);
      assert.equal(res.status, 400, `${bad}: ${res.body.toString()}`);
    }
    const user = await h.newUser();
    const refused = await new Client(h.server).get('/api/v1/audit-logs/tlog/tile/0/000', { token: user.token });
    assert.equal(refused.status, 403);
    // The new user's records are signed into a checkpoint first: else one signed between the two
    // reads below makes them disagree (seen: 703 against 704).
    await settled(h.server, h.admin);
    const note = await new Client(h.server).get('/api/v1/audit-logs/tlog/checkpoint', { token: h.admin.token });
    assert.equal(note.status, 200);
    assert.match(note.headers.get('content-type') ?? '', /^text\/plain/);
    assert.equal(parseCheckpointNote(note.text).size, (await new TlogReader(get).checkpoint()).size);
  });
});

describe('the stored tree is evidence, not trusted state', () => {
  const h = useTestServer({ env: ENV });
  h.before(async () => {
    await appendRecords(h.server.owner, RECORDS, 'evidence-');
    await settled(h.server, h.admin);
  });

  const tileBytes = async (level: number, idx: number, width: number) =>
    Buffer.from((await h.server.owner.query<{ hashes: Uint8Array }>('SELECT hashes FROM audit_tiles WHERE level = $1 AND idx = $2 AND width = $3', [level, idx, width]))[0]!.hashes);
  const setTile = (level: number, idx: number, width: number, hashes: Buffer) =>
    committed(h.server.owner, (q) => q.query('UPDATE audit_tiles SET hashes = $4 WHERE level = $1 AND idx = $2 AND width = $3', [level, idx, width, hashes]));
  const flipped = (b: Buffer, at: number) => Buffer.from(b.map((x, i) => (i === at ? x ^ 0x01 : x)));

  test('a changed full tile: verification names the tile (and blames no record); a proof through it is refused (409), never served wrong; one beside it is served', async () => {
    const original = await tileBytes(0, 0, 256);
    await setTile(0, 0, 256, flipped(original, 40));
    try {
      const report = await verifyRoute(h.admin);
      assert.equal(report.ok, false);
      assert.equal(report.first_bad_tile, 'tile/0/000');
      assert.equal(report.first_bad_id, undefined, 'no record was changed');
      assert.match(report.problem!, /stored tile tile\/0\/000 is not the tile the records make/);
      // Seq 3's path runs through the changed hash (seq 1's, its neighbour's sibling): refused.
      const through = await h.admin.client.get(`/api/v1/audit-logs/${await recordAtSeq(h.server, 3)}/proof`, { token: h.admin.token });
      assert.equal(through.status, 409, through.text);
      assert.equal(through.body.code, 'CONFLICT');
      const beside = await h.admin.client.get(`/api/v1/audit-logs/${await recordAtSeq(h.server, 600)}/proof`, { token: h.admin.token });
      assert.equal(beside.status, 200, beside.text);
    } finally {
      await setTile(0, 0, 256, original);
    }
    assertOk(await verifyRoute(h.admin));
  });

  test('a changed tile at the tree\'s right edge: nothing is sealed or signed over it, /health/ready says degraded naming the first record waiting, verification names the tile; repaired, sealing resumes', async () => {
    const [edge] = await h.server.owner.query<{ idx: number; width: number }>('SELECT idx, width FROM audit_tiles WHERE level = 1 AND width < 256 ORDER BY idx DESC, width DESC LIMIT 1');
    assert.ok(edge, 'a partial level-1 tile at the edge');
    const original = await tileBytes(1, edge.idx, edge.width);
    const checkpointsBefore = (await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_checkpoints'))[0]!.n;
    await setTile(1, edge.idx, edge.width, flipped(original, 0));
    try {
      // Records keep coming; once the checkpointer finds the stored edge is not the tree it would
      // sign, both loops stop, and the records after that wait.
      const health = await untilSealingStops(h.server, (i) => appendRecords(h.server.owner, 1, `after-tamper-${i}-`));
      const [unsealedFirst] = await h.server.owner.query<{ id: number }>(
        `SELECT min(a.id)::int AS id FROM audit_log a WHERE NOT EXISTS (SELECT 1 FROM audit_seal s WHERE s.record_id = a.id)`,
      );
      assert.equal(health.sealing!.first_unsealed_id, unsealedFirst!.id, 'it names the first record waiting');
      const report = await verifyRoute(h.admin);
      assert.equal(report.ok, false);
      assert.match(report.first_bad_tile ?? '', /^tile\/1\//);
      // The stall it caused beside it: the records waiting, not checked (never the problem itself).
      assert.doesNotMatch(report.problem ?? '', /sealing has stopped/);
      assert.equal(report.first_unsealed_id, unsealedFirst!.id);
      assert.deepEqual(report.not_checked?.map((n) => [n.reason, n.first_unsealed_id]), [['sealing_stopped', unsealedFirst!.id]]);
      const [signed] = await h.server.owner.query<{ n: number; newest: number }>('SELECT count(*)::int AS n, max(tree_size)::int AS newest FROM audit_checkpoints');
      const sealed = (await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_seal'))[0]!.n;
      assert.ok(signed!.newest <= sealed);
      assert.ok(signed!.n <= checkpointsBefore + 1, 'nothing signed over the tampered edge');
    } finally {
      await setTile(1, edge.idx, edge.width, original);
    }
    // Repaired: the next look (every 5 s while refused) finds it whole, and everything is sealed and signed.
    await settled(h.server, h.admin);
    assertOk(await verifyRoute(h.admin));
    assert.equal((await new Client(h.server).get('/health/ready')).body.status, 'ready');
  });

  test('a sealed record whose xact_id was moved forward: sealing goes on, and verification names the record when it is sealed again', async () => {
    const target = await recordAtSeq(h.server, 10);
    // Twenty transactions on, its transaction id will look like one that committed after the seal.
    await committed(h.server.owner, (q) => q.query(`UPDATE audit_log SET xact_id = (pg_current_xact_id()::text::bigint + 20)::text::xid8 WHERE id = $1`, [target]));
    for (let i = 0; i < 30; i++) await appendRecords(h.server.owner, 1, `moved-${i}-`);
    // Not settled(): with the target sealed twice there is one seal more than records, so it would
    // wait out its whole 20 s. Until the target is sealed again, every record after it sealed and
    // a checkpoint signed over all the seals (what settled waits for), or 20 s.
    for (let i = 0; i < 200; i++) {
      const [s] = await h.server.owner.query<{ twice: number; unsealed: number; sealed: number; size: number | null }>(
        `SELECT (SELECT count(*)::int FROM audit_seal WHERE record_id = $1) AS twice,
                (SELECT count(*)::int FROM audit_log a WHERE NOT EXISTS (SELECT 1 FROM audit_seal s WHERE s.record_id = a.id)) AS unsealed,
                (SELECT count(*)::int FROM audit_seal) AS sealed, (SELECT max(tree_size)::int FROM audit_checkpoints) AS size`,
        [target],
      );
      if (s!.twice > 1 && s!.unsealed === 0 && s!.size === s!.sealed) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const [unsealed] = await h.server.owner.query<{ n: number }>(`SELECT count(*)::int AS n FROM audit_log a WHERE a.request_id LIKE 'moved-%' AND NOT EXISTS (SELECT 1 FROM audit_seal s WHERE s.record_id = a.id)`);
    assert.equal(unsealed!.n, 0, 'every record after it was sealed: sealing did not stop');
    const report = await verifyRoute(h.admin);
    assert.equal(report.ok, false);
    assert.equal(report.first_bad_id, target);
    assert.match(report.problem!, new RegExp(`record ${target} is sealed twice`));
  });
});
