// The audit log as evidence (docs/api.md 5.4–5.6, docs/audit-integrity.md): records are sealed
// into an RFC 6962 tree in commit order, signed checkpoints are C2SP notes that verify under
// the published keys, proofs check against them with code independent of the server's, and
// an export verifies offline. Tampering is in test/audit-tamper-engine.test.ts and test/audit-tamper-committed.test.ts.
import assert from 'node:assert/strict';
import { createHash, createPublicKey, verify as verifySignature } from 'node:crypto';
import { describe, test } from 'node:test';
import { recordLeaf, sealedForm } from '../src/modules/audit/evidence/record.sealed-form.js';
import { settled } from './helpers/audit-log.js';
import { useTestServer } from './helpers/harness.js';
import { onPostgres } from './helpers/server.js';
import type { Session } from './helpers/client.js';

const h = useTestServer({ env: { AUDIT_CHECKPOINT_INTERVAL_MS: '100' } });

interface Checkpoint { origin: string; tree_size: number; root_hash: string; prev_checkpoint_hash: string | null; key_id: string; signature: string; created_at: string; note: string }

const sha256 = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();
const b64 = (s: string) => Buffer.from(s, 'base64');

/** RFC 6962 §2.1.1 inclusion verification, written here from the RFC (not the server's code). */
function rootFromInclusion(leaf: Buffer, index: number, size: number, path: Buffer[]): Buffer {
  // RFC 9162 §2.1.3.2, the iterative form of the same check.
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of path) {
    if (sn === 0) throw new Error('path too long');
    if (fn % 2 === 1 || fn === sn) {
      r = sha256(Buffer.from([1]), p, r);
      if (fn % 2 === 0) while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      r = sha256(Buffer.from([1]), r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  if (sn !== 0) throw new Error('path too short');
  return r;
}

/** Audited actions, so that there is something to seal. */
async function audit(n: number, admin: Session = h.admin): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < n; i++) {
    const res = await admin.client.post('/api/v1/projects', { name: `Evidence ${i}` }, { token: admin.token });
    assert.equal(res.status, 201);
    ids.push(res.body.id);
  }
  return ids;
}

async function unsealedCount(): Promise<number> {
  const [row] = await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_log a WHERE NOT EXISTS (SELECT 1 FROM audit_seal s WHERE s.record_id = a.id)');
  return row!.n;
}


describe('sealing and checkpoints', () => {
  test('every committed record is sealed once, in a dense seq, with its leaf recomputable from the record', async () => {
    await audit(5);
    await settled<Checkpoint>(h.server, h.admin);
    const seals = await h.server.owner.query<{ seq: number; record_id: number; leaf_hash: Uint8Array }>('SELECT seq, record_id, leaf_hash FROM audit_seal ORDER BY seq');
    assert.deepEqual(seals.map((s) => s.seq), seals.map((_, i) => i));
    assert.equal(new Set(seals.map((s) => s.record_id)).size, seals.length);
    const [count] = await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_log');
    assert.equal(seals.length, count!.n);
    // The leaf is SHA-256(0x00 ‖ JCS(record as the API shows it, personal values as refs)).
    const last = seals[seals.length - 1]!;
    const [row] = await h.server.owner.query('SELECT id, actor_id, action, resource_type, resource_id, "timestamp", result, metadata, ip, user_agent, request_id FROM audit_log WHERE id = $1', [last.record_id]);
    assert.deepEqual(Buffer.from(last.leaf_hash), recordLeaf(sealedForm(row as never)));
  });

  test('the newest checkpoint is a C2SP signed note that verifies under the published key, checked from the spec', async () => {
    await audit(2);
    const cp = await settled<Checkpoint>(h.server, h.admin);
    const keys = await h.admin.client.get<Array<{ key_id: string; algorithm: string; public_key: string; note_verifier_key: string }>>('/api/v1/audit-logs/public-keys', { token: h.admin.token });
    assert.equal(keys.status, 200);
    const key = keys.body.find((k) => k.key_id === cp.key_id);
    assert.ok(key, 'the signing key is listed');
    assert.equal(key.algorithm, 'Ed25519');
    // The note: origin, size, base64 root, then extensions; a blank line; "— <name> <base64(hash ‖ sig)>".
    const [text, sigLine] = cp.note.split('\n\n') as [string, string];
    const lines = text.split('\n');
    assert.equal(lines[0], cp.origin);
    assert.equal(lines[1], String(cp.tree_size));
    assert.equal(lines[2], cp.root_hash);
    assert.match(lines[3]!, /^time \d{4}-\d\d-\d\dT/);
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)\n$/.exec(sigLine);
    assert.ok(m, `a signature line: ${JSON.stringify(sigLine)}`);
    assert.equal(m[1], cp.origin);
    const sig = b64(m[2]!);
    const raw = createPublicKey(key.public_key).export({ format: 'der', type: 'spki' }).subarray(-32);
    const keyHash = sha256(Buffer.from(`${cp.origin}\n`), Buffer.from([1]), raw).subarray(0, 4);
    assert.deepEqual(sig.subarray(0, 4), keyHash);
    assert.ok(verifySignature(null, Buffer.from(`${text}\n`), createPublicKey(key.public_key), sig.subarray(4)));
    assert.equal(cp.signature, sig.subarray(4).toString('base64'));
    // The verifier key: <name>+<hex key hash>+<base64(0x01 ‖ key)>.
    assert.equal(key.note_verifier_key, `${cp.origin}+${keyHash.toString('hex')}+${Buffer.concat([Buffer.from([1]), raw]).toString('base64')}`);
    // And the note itself, for witnesses.
    const plain = await h.admin.client.get('/api/v1/audit-logs/checkpoints/latest', { token: h.admin.token, headers: { accept: 'text/plain' } });
    assert.equal(plain.status, 200);
    assert.match(plain.headers.get('content-type') ?? '', /^text\/plain/);
    assert.equal(plain.text, cp.note);
  });

  test('each checkpoint names the one before it: prev is the SHA-256 of its whole note', async () => {
    const first = await settled<Checkpoint>(h.server, h.admin);
    await audit(1);
    let second = await settled<Checkpoint>(h.server, h.admin);
    for (let i = 0; second.note === first.note && i < 50; i++) second = await settled<Checkpoint>(h.server, h.admin);
    assert.notEqual(second.note, first.note);
    const [before] = await h.server.owner.query<{ note: string }>('SELECT note FROM audit_checkpoints WHERE id < (SELECT max(id) FROM audit_checkpoints) ORDER BY id DESC LIMIT 1');
    const prev = sha256(Buffer.from(before!.note)).toString('base64');
    assert.ok(second.note.includes(`\nprev ${prev}\n`));
    assert.equal(second.prev_checkpoint_hash, prev);
  });

  test('the checkpoint and proof routes are for ADMINs only', async () => {
    const user = await h.newUser();
    for (const path of ['/api/v1/audit-logs/checkpoints/latest', '/api/v1/audit-logs/public-keys', '/api/v1/audit-logs/verify', '/api/v1/audit-logs/1/proof', '/api/v1/audit-logs/proofs/consistency?from=1&to=1', '/api/v1/audit-logs/export']) {
      const res = await user.client.get(path, { token: user.token });
      assert.equal(res.status, 403, path);
    }
  });
});

describe('proofs', () => {
  test('an inclusion proof leads from the record to the newest checkpoint\'s root (checked with the RFC\'s algorithm)', async () => {
    const [id] = await audit(1);
    const cp = await settled<Checkpoint>(h.server, h.admin);
    const [rec] = await h.server.owner.query<{ id: number }>("SELECT id FROM audit_log WHERE action = 'CREATE_PROJECT' AND resource_id = $1", [id]);
    const res = await h.admin.client.get(`/api/v1/audit-logs/${rec!.id}/proof`, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.tree_size, cp.tree_size);
    const record = (await h.admin.client.get(`/api/v1/audit-logs/${rec!.id}`, { token: h.admin.token })).body;
    const leaf = recordLeaf(record);
    assert.equal(res.body.leaf_hash, leaf.toString('base64'));
    const root = rootFromInclusion(leaf, res.body.seq, res.body.tree_size, res.body.audit_path.map(b64));
    assert.equal(root.toString('base64'), cp.root_hash);
    // Against every earlier size that holds it, too.
    for (let size = res.body.seq + 1; size <= cp.tree_size; size++) {
      const p = await h.admin.client.get(`/api/v1/audit-logs/${rec!.id}/proof?tree_size=${size}`, { token: h.admin.token });
      assert.equal(p.status, 200);
      assert.equal(rootFromInclusion(leaf, p.body.seq, size, p.body.audit_path.map(b64)).length, 32);
    }
  });

  test('a consistency proof shows that a newer checkpoint extends an older one', async () => {
    const older = await settled<Checkpoint>(h.server, h.admin);
    await audit(3);
    const newer = await settled<Checkpoint>(h.server, h.admin);
    const res = await h.admin.client.get(`/api/v1/audit-logs/proofs/consistency?from=${older.tree_size}&to=${newer.tree_size}`, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
    const { verifyConsistency } = await import('../src/tlog/merkle.js');
    const proof = (res.body.proof as string[]).map(b64);
    assert.ok(verifyConsistency(older.tree_size, newer.tree_size, b64(older.root_hash), b64(newer.root_hash), proof));
    // A bit flipped, not a byte set: a root whose first byte already was 7 stayed the same (1 run in 256).
    const tampered = b64(older.root_hash);
    tampered[0]! ^= 1;
    assert.ok(!verifyConsistency(older.tree_size, newer.tree_size, tampered, b64(newer.root_hash), proof));
  });

  test('proofs of what is not sealed, or of sizes beyond the tree, are refused clearly', async () => {
    const cp = await settled<Checkpoint>(h.server, h.admin);
    const missing = await h.admin.client.get('/api/v1/audit-logs/999999999/proof', { token: h.admin.token });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.code, 'NOT_FOUND');
    const beyond = await h.admin.client.get(`/api/v1/audit-logs/proofs/consistency?from=1&to=${cp.tree_size + 1000}`, { token: h.admin.token });
    assert.equal(beyond.status, 400);
    assert.equal(beyond.body.code, 'VALIDATION_FAILED');
    const reversed = await h.admin.client.get(`/api/v1/audit-logs/proofs/consistency?from=2&to=1`, { token: h.admin.token });
    assert.equal(reversed.status, 400);
    const zero = await h.admin.client.get('/api/v1/audit-logs/proofs/consistency?from=0&to=1', { token: h.admin.token });
    assert.equal(zero.status, 400);
  });
});

describe('verification', () => {
  test('GET /audit-logs/verify checks every sealed record and checkpoint', async () => {
    await audit(2);
    const cp = await settled<Checkpoint>(h.server, h.admin);
    const res = await h.admin.client.get('/api/v1/audit-logs/verify', { token: h.admin.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.ok, true, res.body.problem);
    assert.equal(res.body.records_checked, cp.tree_size);
    assert.ok(res.body.checkpoints_checked >= 1);
    assert.deepEqual(res.body.head, { seq: cp.tree_size - 1, tree_size: cp.tree_size, root_hash: cp.root_hash });
    assert.equal(res.body.first_bad_id, undefined);
  });

  // Writers racing the sealer, not the volume, are what this is about; the tree must still reach
  // past two full tiles (256 hashes each). PGlite has one connection, so its writers take turns
  // and the same 640 requests took over 60 s on a loaded CI machine: there, half as many go
  // through the API and records written straight into the table make up the tree's size.
  const WRITERS = 8;
  const EACH = onPostgres ? 80 : 40;
  test(`${WRITERS} parallel writers, ${WRITERS * EACH} audited actions: every record sealed exactly once, verification passes`, async () => {
    const [size] = await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_log');
    const filler = Math.max(0, 2 * 256 + 1 - size!.n - WRITERS * EACH);
    await h.server.owner.query(
      `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
       SELECT NULL, 'CREATE_PROJECT', 'PROJECT', NULL, 'SUCCESS', '{}', NULL, NULL, 'filler-' || i FROM generate_series(1, $1::int) i`,
      [filler],
    );
    const writers = await Promise.all(Array.from({ length: WRITERS }, () => h.newUser({ role: 'ADMIN' })));
    const projects = (await Promise.all(writers.map((w) => audit(EACH, w)))).flat();
    assert.equal(new Set(projects).size, WRITERS * EACH);
    const cp = await settled<Checkpoint>(h.server, h.admin);
    const [dup] = await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM (SELECT record_id FROM audit_seal GROUP BY record_id HAVING count(*) > 1) d');
    assert.equal(dup!.n, 0);
    // Each writer's records, one per project, each with one seal.
    const [mine] = await h.server.owner.query<{ n: number }>(
      `SELECT count(DISTINCT s.seq)::int AS n FROM audit_log a JOIN audit_seal s ON s.record_id = a.id
       WHERE a.action = 'CREATE_PROJECT' AND a.resource_id = ANY ($1::bigint[])`,
      [projects],
    );
    assert.equal(mine!.n, WRITERS * EACH);
    assert.ok(cp.tree_size > 2 * 256, `the tree (${cp.tree_size}) spans more than two full tiles`);
    const [batches] = await h.server.owner.query<{ n: number }>(
      `SELECT count(DISTINCT b.first_seq)::int AS n FROM audit_seal_batches b JOIN audit_log a ON a.id = ANY (b.record_ids)
       WHERE a.action = 'CREATE_PROJECT' AND a.resource_id = ANY ($1::bigint[])`,
      [projects],
    );
    assert.ok(batches!.n >= 2, `the writers' records were sealed in ${batches!.n} transaction(s), not several`);
    assert.equal(await unsealedCount(), 0);
    const res = await h.admin.client.get('/api/v1/audit-logs/verify', { token: h.admin.token });
    assert.equal(res.body.ok, true, res.body.problem);
    assert.equal(res.body.records_checked, cp.tree_size);
  });

  test('a record whose transaction commits late is sealed after it commits, never skipped, and holds back nothing committed around it', { skip: !onPostgres && 'needs a second connection (PostgreSQL pass)' }, async () => {
    await settled<Checkpoint>(h.server, h.admin);
    // A transaction holds its record (with the lower id) open while later records commit.
    let laterIds: number[] = [];
    const late = await h.server.owner.transaction(async (tx) => {
      const [row] = await tx.query<{ id: number }>(
        `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
         VALUES (NULL, 'CREATE_PROJECT', 'PROJECT', NULL, 'SUCCESS', '{}', NULL, NULL, 'late-commit') RETURNING id`,
      );
      const projects = await audit(3);
      laterIds = (await h.server.owner.query<{ id: number }>("SELECT id FROM audit_log WHERE action = 'CREATE_PROJECT' AND resource_id = ANY ($1)", [projects])).map((r) => r.id);
      // Committed while an older transaction still runs: sealed all the same (commit order
      // waits for nothing but their own commit), and the running one is not skipped for it.
      for (let i = 0; ; i++) {
        const sealedMeanwhile = await h.server.owner.query('SELECT 1 FROM audit_seal WHERE record_id = ANY ($1)', [laterIds]);
        if (sealedMeanwhile.length === laterIds.length) break;
        assert.ok(i < 200, 'the records committed around a running transaction are sealed while it runs');
        await new Promise((r) => setTimeout(r, 25));
      }
      return row!.id;
    });
    await settled<Checkpoint>(h.server, h.admin);
    const seals = await h.server.owner.query<{ record_id: number; seq: number }>('SELECT record_id, seq FROM audit_seal WHERE record_id = ANY ($1)', [[late, ...laterIds]]);
    assert.equal(seals.length, 4, 'the late record and the three after it are all sealed');
    const lateSeq = seals.find((s) => s.record_id === late)!.seq;
    assert.ok(seals.every((s) => s.record_id === late || s.seq < lateSeq), 'the late record after the ones that committed before it');
    assert.equal((await h.admin.client.get('/api/v1/audit-logs/verify', { token: h.admin.token })).body.ok, true);
  });
});
