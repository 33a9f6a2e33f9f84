// Tampering with the audit log behind the service's back (docs/audit-integrity.md §6): each
// scenario is done as a superuser on the owner connection (the guarding triggers disabled, the
// rows changed, the triggers enabled again), and verification must then say `ok: false`, name
// the first bad record as the table of §6 says, and say what it found.
//
// A tamper is destructive, so each scenario owns its state:
// - most run inside a transaction on the owner connection that is always rolled back, and call
//   the verification engine (log.verifier.ts) on that transaction: one server serves them all. The
//   service's sealer never sees the tamper (uncommitted; on PGlite the transaction holds the one
//   connection), so it cannot race it;
// - two are committed on a server of their own and found through GET /audit-logs/verify;
// - the truncated tail, which the database alone cannot show, is found by the CLI
//   (`teamlog audit verify --checkpoint saved.note`) on a database of its own.
// Every log is settled first (all records sealed, the newest checkpoint covers them) and no
// write follows, so the sealer has nothing to do while a tamper is under way. One more test
// commits a re-signed history on purpose and gives the sealer time to react: it must not sign
// over a checkpoint made with a key it does not trust.
//
// This file: the scenarios on the engine, in rolled-back transactions. The committed ones, the
// truncated tail and the re-signed history: audit-tamper-committed.test.ts.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, test } from 'node:test';
import type { Queryable, QueryOptions } from '../src/db/database.js';
import type { AuditRow } from '../src/modules/audit/audit.repository.js';
import { latestCheckpoint } from '../src/modules/audit/evidence/evidence.repository.js';
import type { LogIdentity } from '../src/modules/audit/evidence/log.identity.js';
import type { Hash } from '../src/tlog/merkle.js';
import { recordLeaf, sealedForm } from '../src/modules/audit/evidence/record.sealed-form.js';
import { makeCheckpoint } from '../src/modules/audit/evidence/evidence.sealer.js';
import { formatVerifierKey, loadEd25519PrivateKey, noteSigner, parseVerifierKey, publicKeyPem, type NoteVerifier } from '../src/tlog/signed-note.js';
import { RightEdge } from '../src/tlog/tiles.js';
import { verifyDatabase } from '../src/modules/audit/evidence/log.verifier.js';
import { assertBad, assertOk, behindTheBack, buildLog, committed, deleteRecord, layout, type Layout, rolledBack, settled, verifyRoute } from './helpers/audit-log.js';
import { useTestServer } from './helpers/harness.js';
import { TEST_SIGNING_KEY } from './helpers/server.js';

const ENV = { AUDIT_CHECKPOINT_INTERVAL_MS: '100' };
const RECORD_COLUMNS = 'a.id, a.actor_id, a.action, a.resource_type, a.resource_id, a."timestamp", a.result, a.metadata, a.ip, a.user_agent, a.request_id';

// ---------------------------------------------------------------------------------------
// Tampering as a superuser

const changeAction = (q: Queryable, id: number, action = 'DELETE_PROJECT') => q.query('UPDATE audit_log SET action = $2 WHERE id = $1', [id, action]);

/** Swaps every field of two records but their ids. */
const swapContents = (q: Queryable, a: number, b: number) =>
  q.query(
    `UPDATE audit_log t SET actor_id = s.actor_id, action = s.action, resource_type = s.resource_type, resource_id = s.resource_id,
       "timestamp" = s."timestamp", result = s.result, metadata = s.metadata, ip = s.ip, user_agent = s.user_agent, request_id = s.request_id
     FROM (SELECT * FROM audit_log WHERE id IN ($1, $2)) s
     WHERE t.id IN ($1, $2) AND s.id <> t.id`,
    [a, b],
  );

/** n records as the service writes them (no tampering), in the caller's transaction. */
const insertRecords = (q: Queryable, n: number, requestIdPrefix: string) =>
  q.query<AuditRow>(
    `INSERT INTO audit_log AS a (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
     SELECT NULL, 'CREATE_PROJECT', 'PROJECT', NULL, 'SUCCESS', '{}', NULL, NULL, $2 || '-' || g FROM generate_series(1, $1::int) g
     RETURNING ${RECORD_COLUMNS}`,
    [n, requestIdPrefix],
  );

/** A record with a given id and an old transaction (xact_id 1): among the sealed ones in commit order. */
const insertRecord = (q: Queryable, id: number) =>
  q.query(
    `INSERT INTO audit_log (id, actor_id, action, resource_type, resource_id, "timestamp", result, metadata, ip, user_agent, request_id, xact_id)
     OVERRIDING SYSTEM VALUE
     VALUES ($1, NULL, 'DELETE_PROJECT', 'PROJECT', 1, (SELECT max("timestamp") FROM audit_log WHERE id < $1), 'SUCCESS', '{}', NULL, NULL, 'forged', '1'::xid8)`,
    [id],
  );

/**
 * Recomputes the seal from the records as they now are: every batch's leaves, and every stored
 * tile (full and partial), as the sealer would have written them. Answers the root at every size
 * and how many stored values changed.
 */
async function resealEverything(q: Queryable): Promise<{ roots: Map<number, Hash>; changed: number }> {
  const batches = await q.query<{ first_seq: number; record_ids: number[]; leaves: Uint8Array[] }>('SELECT first_seq, record_ids, leaves FROM audit_seal_batches ORDER BY first_seq');
  const edge = new RightEdge();
  const roots = new Map<number, Hash>();
  /** Every tile the records make, by level/index: the full ones, then the edge's partial ones. */
  const made = new Map<string, Buffer>();
  let changed = 0;
  for (const b of batches) {
    const records = await q.query<AuditRow>(`SELECT ${RECORD_COLUMNS} FROM audit_log a WHERE a.id = ANY ($1) ORDER BY array_position($1, a.id)`, [b.record_ids]);
    const leaves = records.map((r) => recordLeaf(sealedForm(r)));
    if (leaves.some((l, i) => !l.equals(b.leaves[i]!))) {
      await q.query("UPDATE audit_seal_batches SET leaves = ARRAY(SELECT decode(h, 'hex') FROM unnest($2::text[]) WITH ORDINALITY AS t(h, n) ORDER BY n) WHERE first_seq = $1", [
        b.first_seq, leaves.map((l) => l.toString('hex')),
      ]);
      changed++;
    }
    for (const leaf of leaves) {
      for (const full of edge.append(leaf).full) made.set(`${full.level}/${full.index}`, full.hashes);
      roots.set(edge.size, edge.root());
    }
  }
  for (let level = 1; level < edge.levels(); level++) made.set(`${level}/${Math.floor(edge.size / 256 ** (level + 1))}`, edge.partial(level));
  for (const t of await q.query<{ level: number; idx: number; width: number; hashes: Uint8Array }>('SELECT level, idx, width, hashes FROM audit_tiles')) {
    const tile = made.get(`${t.level}/${t.idx}`)!.subarray(0, t.width * 32);
    if (!tile.equals(t.hashes)) {
      await q.query("UPDATE audit_tiles SET hashes = decode($4, 'hex') WHERE level = $1 AND idx = $2 AND width = $3", [t.level, t.idx, t.width, tile.toString('hex')]);
      changed++;
    }
  }
  return { roots, changed };
}

/** An attacker's own Ed25519 key, under the log's origin (which is no secret). */
function attackerIdentity(origin: string): LogIdentity & { publicKeyPem: string } {
  const { privateKey } = generateKeyPairSync('ed25519');
  const signer = noteSigner(origin, privateKey);
  const verifierKey = formatVerifierKey(origin, signer.publicKeyRaw);
  return { origin, keyId: 'attacker-key', signer, verifierKey, publicKeyPem: publicKeyPem(privateKey), trusted: [parseVerifierKey(verifierKey)] };
}

const registerKey = (q: Queryable, id: LogIdentity & { publicKeyPem: string }) =>
  q.query('INSERT INTO audit_signing_keys (key_id, public_key, note_verifier_key) VALUES ($1, $2, $3)', [id.keyId, id.publicKeyPem, id.verifierKey]);

/** Appends a checkpoint of `size` leaves with this root, signed by `id`, chained to the newest one. */
async function appendCheckpoint(q: Queryable, id: LogIdentity, size: number, root: Hash): Promise<void> {
  const c = makeCheckpoint(id, size, root, await latestCheckpoint(q));
  await q.query(
    `INSERT INTO audit_checkpoints (tree_size, root_hash, prev_checkpoint_hash, key_id, signature, note, created_at)
     VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), $4, decode($5, 'hex'), $6, $7)`,
    [c.treeSize, c.rootHash.toString('hex'), c.prevHash?.toString('hex') ?? null, c.keyId, c.signature.toString('hex'), c.note, c.createdAt],
  );
}

/**
 * What the service's sealer does while someone reads the log: appends n records, seals them (a
 * batch of the seal, its tiles) and signs a checkpoint over the new head with the service's own key.
 */
async function sealNewRecords(q: Queryable, service: LogIdentity, n: number): Promise<void> {
  const edge = new RightEdge();
  for (const l of await q.query<{ leaf_hash: Uint8Array }>('SELECT leaf_hash FROM audit_seal ORDER BY seq')) edge.append(Buffer.from(l.leaf_hash));
  const size = edge.size;
  const ids: number[] = [];
  const leaves: Hash[] = [];
  const full = [];
  for (const row of (await insertRecords(q, n, 'while-verifying')).sort((a, b) => a.id - b.id)) {
    const leaf = recordLeaf(sealedForm(row));
    ids.push(row.id);
    leaves.push(leaf);
    full.push(...edge.append(leaf).full);
  }
  const [last] = await q.query<{ snapshot: string }>('SELECT snapshot::text FROM audit_seal_batches ORDER BY first_seq DESC LIMIT 1');
  await q.query(
    `INSERT INTO audit_seal_batches (first_seq, record_ids, leaves, record_span, after_snapshot, snapshot)
     VALUES ($1, $2::bigint[], ARRAY(SELECT decode(h, 'hex') FROM unnest($3::text[]) WITH ORDINALITY AS t(h, n) ORDER BY n), int8range($4, $5, '[]'), $6::pg_snapshot, pg_current_snapshot())`,
    [size, ids, leaves.map((l) => l.toString('hex')), Math.min(...ids), Math.max(...ids), last!.snapshot],
  );
  for (const t of [...full, ...edge.changedSince(size)]) {
    await q.query("INSERT INTO audit_tiles (level, idx, width, hashes) VALUES ($1, $2, $3, decode($4, 'hex'))", [t.level, t.index, t.hashes.length / 32, t.hashes.toString('hex')]);
  }
  await appendCheckpoint(q, service, edge.size, edge.root());
}

// ---------------------------------------------------------------------------------------
// Every scenario on the engine, each in a transaction that is rolled back

describe('each tamper, in a rolled-back transaction, caught by the verification engine', () => {
  const h = useTestServer({ env: ENV });
  let L: Layout;
  /** An id handed out by the identity and never used: a hole among the sealed records' ids. */
  let unusedId: number;
  let anchor: NoteVerifier;
  let origin: string;
  /** The service's own signing identity (the tests hold its key): to do what its sealer does. */
  let service: LogIdentity;

  h.before(async () => {
    await buildLog(h.server, h.admin, [4, 4]);
    const [unused] = await h.server.owner.query<{ id: number }>("SELECT nextval(pg_get_serial_sequence('audit_log', 'id'))::int AS id");
    unusedId = unused!.id;
    await buildLog(h.server, h.admin, [4, 4, 4]);
    // Three records committed together, so sealed in one batch: a checkpoint with records after
    // it and none at the next seq, whatever the pace of the requests above (on a slow machine
    // each of them can be sealed and signed alone, a checkpoint at every size).
    await h.server.owner.transaction((tx) => insertRecords(tx, 3, 'one-batch'));
    await settled(h.server, h.admin);
    L = await layout(h.server.owner);
    // The anchor is the service's key as it publishes it.
    const keys = await h.admin.client.get<Array<{ key_id: string; note_verifier_key: string }>>('/api/v1/audit-logs/public-keys', { token: h.admin.token });
    assert.equal(keys.status, 200);
    assert.equal(keys.body.length, 1);
    anchor = parseVerifierKey(keys.body[0]!.note_verifier_key);
    origin = anchor.name;
    const signer = noteSigner(origin, loadEd25519PrivateKey(TEST_SIGNING_KEY));
    service = { origin, keyId: keys.body[0]!.key_id, signer, verifierKey: keys.body[0]!.note_verifier_key, trusted: [anchor] };
  });

  /** The engine on q, as GET /audit-logs/verify runs it, in small chunks read two ahead, so that reads span several and run past a gap. */
  const verify = (q: Queryable) =>
    verifyDatabase(q, { anchors: [anchor], origin, personalDataKeys: h.server.deps.secrets.personalDataKeys, reads: { chunk: 4, ahead: 2 } });

  /** Verifies, tampers, verifies again: all inside one transaction that is rolled back. */
  const scenario = (tamper: (q: Queryable) => Promise<unknown>) =>
    rolledBack(h.server.owner, async (q) => {
      assertOk(await verify(q));
      await behindTheBack(q, () => tamper(q));
      return verify(q);
    });

  /** The seq of the last checkpoint at or below seq (0 when none): where a resealed change is caught from. */
  const coveredBefore = (seq: number) => Math.max(0, ...L.checkpoints.filter((c) => c.tree_size <= seq).map((c) => c.tree_size));

  test('the untouched log verifies, through the route and the engine alike, and has several checkpoints to tamper between', async () => {
    assert.ok(L.checkpoints.length >= 4, `checkpoints: ${JSON.stringify(L.checkpoints)}`);
    assert.ok(unusedId > L.seals[0]! && unusedId < L.seals[L.seals.length - 1]!, 'the unused id lies among the sealed ones');
    const route = await verifyRoute(h.admin);
    assertOk(route);
    assert.equal(route.records_checked, L.seals.length);
    assert.equal(route.checkpoints_checked, L.checkpoints.length);
    const engine = await rolledBack(h.server.owner, verify);
    assert.deepEqual(engine, route);
  });

  test('a changed field of a sealed record (its action, or its metadata): first_bad_id is that record', async () => {
    const seq = Math.floor(L.seals.length / 2);
    const id = L.seals[seq]!;
    assertBad(await scenario((q) => changeAction(q, id)), id, new RegExp(`record ${id} no longer matches its seal`));
    assertBad(
      await scenario((q) => q.query(`UPDATE audit_log SET metadata = metadata || '{"note": "added later"}' WHERE id = $1`, [id])),
      id,
      /no longer matches its seal/,
    );
    // A number no double holds (jsonb takes it): the record is named, not an exception (a 500 on the route).
    assertBad(
      await scenario((q) => q.query(`UPDATE audit_log SET metadata = '{"amount": 1e400}' WHERE id = $1`, [id])),
      id,
      new RegExp(`record ${id}: its sealed form is not JSON that can be canonicalized`),
    );
    // The very first and the very last sealed records, too.
    assertBad(await scenario((q) => changeAction(q, L.seals[0]!)), L.seals[0], /no longer matches its seal/);
    const last = L.seals[L.seals.length - 1]!;
    assertBad(await scenario((q) => q.query("UPDATE audit_log SET ip = '203.0.113.9' WHERE id = $1", [last])), last, /no longer matches its seal/);
  });

  test('a timestamp moved to the same instant BC or 10,000 years on is caught; moved within its millisecond it changes nothing the record shows', async () => {
    // The verifier reads the sealed form as SQL builds it (record.sealed-form.ts); to_char alone writes
    // 2026 BC as 2026, so this record would have verified unchanged while the API showed it BC.
    const id = L.seals[Math.floor(L.seals.length / 3)]!;
    assertBad(await scenario((q) => q.query(`UPDATE audit_log SET "timestamp" = ("timestamp" AT TIME ZONE 'UTC' - interval '4051 years') AT TIME ZONE 'UTC' WHERE id = $1`, [id])), id, /no longer matches its seal/);
    assertBad(await scenario((q) => q.query(`UPDATE audit_log SET "timestamp" = "timestamp" + interval '10000 years' WHERE id = $1`, [id])), id, /no longer matches its seal/);
    // Sub-millisecond digits are not part of the record (the API shows milliseconds): the seal holds.
    assertOk(await scenario((q) => q.query(`UPDATE audit_log SET "timestamp" = date_trunc('milliseconds', "timestamp") + interval '999 microseconds' WHERE id = $1`, [id])));
  });

  test('a deleted sealed record in the middle: first_bad_id is the first surviving record after the gap (the deleted one when the gap is at the end)', async () => {
    const seq = Math.floor(L.seals.length / 2);
    const deleted = L.seals[seq]!;
    const report = await scenario((q) => deleteRecord(q, deleted));
    assertBad(report, L.seals[seq + 1], new RegExp(`record ${deleted}.*no longer exists`));
    // Two in a row: still the first survivor after the gap.
    assertBad(
      await scenario(async (q) => {
        await deleteRecord(q, deleted);
        await deleteRecord(q, L.seals[seq + 1]!);
      }),
      L.seals[seq + 2],
      new RegExp(`record ${deleted}.*no longer exists`),
    );
    const last = L.seals[L.seals.length - 1]!;
    assertBad(await scenario((q) => deleteRecord(q, last)), last, /no longer exists/);
  });

  test('a record inserted among sealed ones (an old xact_id, an unused id): first_bad_id is the inserted record', async () => {
    const report = await scenario((q) => insertRecord(q, unusedId));
    assertBad(report, unusedId, new RegExp(`record ${unusedId} .*never sealed`));
    // Everything sealed still checks: only the inserted record is wrong.
    assert.equal(report.records_checked, L.seals.length);
    // Beyond the sealed ids, and on either side of the edge between two of the verifier's looks
    // (100,000 ids a look, the seal's as a bitmap): each is found.
    for (const id of [99_999, 100_000, 100_007]) assertBad(await scenario((q) => insertRecord(q, id)), id, new RegExp(`record ${id} .*never sealed`));
  });

  test('two records reordered (their contents swapped, ids kept): first_bad_id is the first of the two in seq order', async () => {
    const a = 3;
    const b = L.seals.length - 3;
    assertBad(await scenario((q) => swapContents(q, L.seals[b]!, L.seals[a]!)), L.seals[a], /no longer matches its seal/);
    // Neighbours too.
    assertBad(await scenario((q) => swapContents(q, L.seals[a]!, L.seals[a + 1]!)), L.seals[a], /no longer matches its seal/);
  });

  test('a changed record whose leaf and tiles were recomputed to match: first_bad_id is the first record sealed after the last checkpoint that still matches', async () => {
    // A record with at least one other record between it and the checkpoint before it, so
    // that the answer differs both from the changed record and from the start of the log.
    const target = L.checkpoints.find((c, i) => i > 0 && c.tree_size + 1 < L.seals.length && coveredBefore(c.tree_size + 1) === c.tree_size);
    assert.ok(target, `no checkpoint to tamper after: ${JSON.stringify(L.checkpoints)}`);
    const seq = target.tree_size + 1;
    const changedId = L.seals[seq]!;
    const expected = L.seals[coveredBefore(seq)]!;
    assert.notEqual(expected, changedId);
    let changed = 0;
    const report = await scenario(async (q) => {
      await changeAction(q, changedId);
      ({ changed } = await resealEverything(q));
    });
    // A log this small has no full tile yet: its stored tree is the leaves (every node above is hashed from them).
    assert.ok(changed >= 1, 'the seal\'s leaf was rewritten');
    assertBad(report, expected, /no longer hash to the root of checkpoint/);
    // The records before that checkpoint and the ones after it up to the next one were read.
    assert.ok(report.records_checked > seq);
  });

  test('a forged checkpoint row (its root in the row, its note, or one removed from the chain): its signature or consistency fails, and first_bad_id is the first record it covers', async () => {
    const i = Math.floor(L.checkpoints.length / 2);
    const cp = L.checkpoints[i]!;
    const covered = L.seals[L.checkpoints[i - 1]!.tree_size]!;
    // The row's root no longer says what the signed note says.
    assertBad(
      await scenario((q) => q.query("UPDATE audit_checkpoints SET root_hash = decode(repeat('ab', 32), 'hex') WHERE id = $1", [cp.id])),
      covered,
      new RegExp(`checkpoint ${cp.id}: its note and its row disagree on the root hash`),
    );
    // The note rewritten to another root (and the row with it): the signature no longer verifies.
    const [row] = await h.server.owner.query<{ note: string }>('SELECT note FROM audit_checkpoints WHERE id = $1', [cp.id]);
    const lines = row!.note.split('\n');
    lines[2] = Buffer.alloc(32, 0xab).toString('base64');
    assertBad(
      await scenario((q) => q.query("UPDATE audit_checkpoints SET root_hash = decode(repeat('ab', 32), 'hex'), note = $2 WHERE id = $1", [cp.id, lines.join('\n')])),
      covered,
      new RegExp(`checkpoint ${cp.id}: its signature does not verify`),
    );
    // A checkpoint removed from the middle: the next one's prev line names a note that is gone.
    const next = L.checkpoints[i + 1]!;
    assertBad(
      await scenario((q) => q.query('DELETE FROM audit_checkpoints WHERE id = $1', [cp.id])),
      covered,
      new RegExp(`checkpoint ${next.id}: its prev line does not name the checkpoint before it`),
    );
  });

  test("a checkpoint signed with an attacker's own key, registered in audit_signing_keys: fails, as the newest checkpoint is not under the service's key", async () => {
    const attacker = attackerIdentity(origin);
    const report = await scenario(async (q) => {
      await registerKey(q, attacker);
      const head = (await latestCheckpoint(q))!;
      await appendCheckpoint(q, attacker, head.tree_size, Buffer.from(head.root_hash));
    });
    assertBad(report, undefined, /newest checkpoint .*not signed by the trusted key/);
    // The attacker's checkpoint passed every other check: registering a key is not what fails.
    assert.equal(report.records_checked, L.seals.length);
    assert.equal(report.checkpoints_checked, L.checkpoints.length + 1);
  });

  test("a history rewritten and re-signed from the first checkpoint with an attacker's key (seal, nodes, every checkpoint): only the trust anchor catches it", async () => {
    const attacker = attackerIdentity(origin);
    const id = L.seals[2]!;
    const report = await scenario(async (q) => {
      await changeAction(q, id);
      const { roots } = await resealEverything(q);
      await q.query('DELETE FROM audit_checkpoints');
      await registerKey(q, attacker);
      for (const c of L.checkpoints) await appendCheckpoint(q, attacker, c.tree_size, roots.get(c.tree_size)!);
    });
    // Internally consistent: every record, seal and checkpoint checks out under the keys the
    // database lists. Only the key the service holds tells the forgery apart. (The verifier names
    // no first_bad_id here, though docs/audit-integrity.md §6 says "as above": it cannot tell
    // which record changed.)
    assert.equal(report.ok, false, 'the re-signed history was accepted');
    assert.match(report.problem!, /newest checkpoint .*not signed by the trusted key/);
    assert.equal(report.records_checked, L.seals.length);
    assert.equal(report.checkpoints_checked, L.checkpoints.length);
  });

  test('no false alarm on a live log: records sealed and a checkpoint signed while verification runs are left for the next run', async () => {
    // Whatever the chunk size, so whether or not the last read happens to reach the new records.
    for (const chunk of [1, 3, 4, 1000]) {
      const report = await rolledBack(h.server.owner, async (q) => {
        let sealedMeanwhile = false;
        // The sealer gets its turn just before the verifier first reads the checkpoints (on
        // PGlite it can, between any two of the verifier's reads; on PostgreSQL it runs beside it).
        const live: Queryable = {
          async query<R>(sql: string, params?: readonly unknown[], opts?: QueryOptions): Promise<R[]> {
            if (!sealedMeanwhile && /FROM audit_checkpoints WHERE id >/.test(sql)) {
              sealedMeanwhile = true;
              await sealNewRecords(q, service, 2);
            }
            return q.query<R>(sql, params, opts);
          },
        };
        const r = await verifyDatabase(live, { anchors: [anchor], origin, reads: { chunk, ahead: 1 } });
        assert.ok(sealedMeanwhile, 'the sealer had its turn');
        return r;
      });
      assert.equal(report.ok, true, `chunk ${chunk}: ${report.problem}`);
      assert.ok(report.records_checked >= L.seals.length);
    }
  });

  test('after every rolled-back tamper the log is as it was: it verifies, and the guards hold again', async () => {
    assertOk(await verifyRoute(h.admin));
    assert.deepEqual(await layout(h.server.owner), L);
    await assert.rejects(h.server.owner.query("UPDATE audit_log SET action = 'X' WHERE id = $1", [L.seals[0]]), /append-only/);
  });

  // Last in this block: committed, and it leaves the log re-signed by an attacker.
  test(
    "a history re-signed with an attacker's key and committed is not made good by the service: GET /audit-logs/verify keeps saying ok: false",
    async () => {
      const attacker = attackerIdentity(origin);
      const id = L.seals[2]!;
      await committed(h.server.owner, async (q) => {
        await changeAction(q, id);
        const { roots } = await resealEverything(q);
        await q.query('DELETE FROM audit_checkpoints');
        await registerKey(q, attacker);
        for (const c of L.checkpoints) await appendCheckpoint(q, attacker, c.tree_size, roots.get(c.tree_size)!);
      });
      assert.match((await verifyRoute(h.admin)).problem ?? '', /not signed by the trusted key/);
      // Give the sealer more than its poll interval (1 s) to react.
      await new Promise((r) => setTimeout(r, 2500));
      const later = await verifyRoute(h.admin);
      const signed = await h.server.owner.query<{ key_id: string }>('SELECT key_id FROM audit_checkpoints ORDER BY id DESC LIMIT 1');
      assert.equal(later.ok, false, `the forged history now verifies (the newest checkpoint is by ${signed[0]?.key_id})`);
    },
  );
});
