// The log checks its own state before it signs, and verification sees what a hostile test found
// unreported (docs/audit-integrity.md §4 and §6). Two ways made the sealer sign over tampered
// history: a checkpoint row replayed (an old one inserted again, or the newest twice), which it
// chained its next checkpoint onto, and the newest checkpoint row deleted, which it replaced with a
// second signed successor of the one before. Here the database refuses a row that does not extend
// the newest one, even from the service's own role, and a row that got in with that guard
// disabled, or a deletion, stops the sealer instead of being signed over. Two more went
// unreported by verification: the tile at the tree's right edge deleted, and a sealed record's
// transaction position moved far forward.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Queryable } from '../src/db/database.js';
import { newestTwoCheckpoints } from '../src/modules/audit/evidence/evidence.repository.js';
import type { LogIdentity } from '../src/modules/audit/evidence/log.identity.js';
import { TreeUnverifiable, VerifiedTree } from '../src/modules/audit/evidence/tree.loader.js';
import { parseVerifierKey } from '../src/tlog/signed-note.js';
import { appendRecords, assertOk, auditedActions, buildLog, committed, rolledBack, settled, untilSealingStops, verifyRoute } from './helpers/audit-log.js';
import { useTestServer } from './helpers/harness.js';

const ENV = { AUDIT_CHECKPOINT_INTERVAL_MS: '100', AUDIT_SEAL_STALL_MS: '1000' };

interface CheckpointColumns {
  id: number;
  tree_size: number;
  root_hash: string;
  prev_checkpoint_hash: string | null;
  key_id: string;
  signature: string;
  note: string;
  created_at: string;
}

const checkpoints = (q: Queryable) =>
  q.query<CheckpointColumns>(
    `SELECT id::int, tree_size::int, encode(root_hash, 'hex') AS root_hash, encode(prev_checkpoint_hash, 'hex') AS prev_checkpoint_hash,
            key_id, encode(signature, 'hex') AS signature, note, created_at::text FROM audit_checkpoints ORDER BY id`,
  );

/** Inserts a copy of a checkpoint row (a replay): well signed, as it was. */
const replay = (q: Queryable, c: CheckpointColumns) =>
  q.query(
    `INSERT INTO audit_checkpoints (tree_size, root_hash, prev_checkpoint_hash, key_id, signature, note, created_at)
     VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), $4, decode($5, 'hex'), $6, $7)`,
    [c.tree_size, c.root_hash, c.prev_checkpoint_hash, c.key_id, c.signature, c.note, c.created_at],
  );

/** A tree as the sealer holds it, trusting the keys the log registered (the service's own). */
async function verifiedTree(q: Queryable): Promise<VerifiedTree> {
  const keys = await q.query<{ note_verifier_key: string }>('SELECT note_verifier_key FROM audit_signing_keys');
  return new VerifiedTree({ trusted: keys.map((k) => parseVerifierKey(k.note_verifier_key)) } as unknown as LogIdentity);
}

describe('the database refuses a checkpoint row that does not extend the newest one', () => {
  const h = useTestServer({ env: ENV });

  test('from the service\'s own role: an old checkpoint again, the newest again, a smaller tree, a second root, a tree larger than the seal', async () => {
    await buildLog(h.server, h.admin, [3, 2, 2]);
    const rows = await checkpoints(h.server.owner);
    assert.ok(rows.length >= 3, `${rows.length} checkpoints`);
    const [first, newest] = [rows[0]!, rows[rows.length - 1]!];
    const app = h.server.db;
    await assert.rejects(replay(app, first), /must name the newest one as its prev/);
    await assert.rejects(replay(app, newest), /must name the newest one as its prev/);
    // Named as the newest's successor, but saying less, or another root at its size, or more than is sealed.
    const [{ prev }] = (await h.server.owner.query<{ prev: string }>(`SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex') AS prev`, [newest.note])) as [{ prev: string }];
    const successor = { ...newest, prev_checkpoint_hash: prev };
    await assert.rejects(replay(app, { ...successor, tree_size: newest.tree_size - 1 }), /the tree never shrinks/);
    await assert.rejects(replay(app, { ...successor, root_hash: 'ab'.repeat(32) }), /a second root for tree size/);
    await assert.rejects(replay(app, { ...successor, tree_size: newest.tree_size + 1000 }), /covers records that are not sealed/);
    // Nothing got in, and the log still verifies.
    assert.deepEqual(await checkpoints(h.server.owner), rows);
    // The successor the sealer would write is accepted (rolled back: it is unsigned).
    await rolledBack(h.server.owner, (q) => replay(q, successor));
  });
});

describe('a replayed checkpoint row that got in with the guard disabled', () => {
  const h = useTestServer({ env: ENV });

  test('the sealer\'s tree refuses it; sealing stops, and no checkpoint is chained onto it', async () => {
    await buildLog(h.server, h.admin, [3, 2, 2]);
    const rows = await checkpoints(h.server.owner);
    const old = rows[0]!;
    // Before: the tree is built on the newest checkpoint.
    assert.equal((await (await verifiedTree(h.server.owner)).head(h.server.owner))?.id, rows[rows.length - 1]!.id);

    await committed(h.server.owner, (q) => replay(q, old));
    await assert.rejects((await verifiedTree(h.server.owner)).head(h.server.owner), (err: unknown) => {
      assert.ok(err instanceof TreeUnverifiable);
      assert.match(err.message, /does not extend the one before it/);
      return true;
    });
    const health = await untilSealingStops(h.server, () => auditedActions(h.admin, 1));
    assert.ok(health.sealing!.first_unsealed_id > 0);
    const after = await checkpoints(h.server.owner);
    assert.equal(after.length, rows.length + 1, 'the replayed row alone was added: nothing signed after it');
    assert.equal(after[after.length - 1]!.note, old.note);
    // Verification names it too.
    const report = await verifyRoute(h.admin);
    assert.equal(report.ok, false);
    assert.match(report.problem ?? '', new RegExp(`checkpoint \\d+ \\(tree size ${old.tree_size}\\) is out of order`));
  });
});

describe('the newest checkpoint row deleted', () => {
  const h = useTestServer({ env: ENV });

  test('the sealer that saw it signed refuses to sign a second successor of the one before; sealing stops', async () => {
    await buildLog(h.server, h.admin, [3, 2]);
    const head = await settled(h.server, h.admin);
    const rows = await checkpoints(h.server.owner);
    const deleted = rows[rows.length - 1]!;
    assert.equal(deleted.tree_size, head.tree_size);
    // A size the deleted one covered and the one before did not: the sealer has something to re-sign.
    assert.ok(rows[rows.length - 2]!.tree_size < deleted.tree_size);

    await committed(h.server.owner, (q) => q.query('DELETE FROM audit_checkpoints WHERE id = $1', [deleted.id]));
    await untilSealingStops(h.server, () => auditedActions(h.admin, 1));
    const after = await checkpoints(h.server.owner);
    assert.deepEqual(after, rows.slice(0, -1), 'no replacement was signed');
    // What the sealer reads is what a verifier reads: the newest is now the one before.
    const [newest] = await newestTwoCheckpoints(h.server.owner);
    assert.equal(newest?.id, rows[rows.length - 2]!.id);
  });
});

describe('verification sees what the sealer alone stopped on', () => {
  const h = useTestServer({ env: ENV });
  h.before(async () => {
    // More than two full level-0 tiles: the tree has a level above, whose tile is partial.
    await appendRecords(h.server.owner, 700, 'self-checks-');
    await settled(h.server, h.admin);
  });

  test('the tile at the tree\'s right edge deleted (here the top tile, level 1\'s partial one): verification names it', async () => {
    assertOk(await verifyRoute(h.admin));
    const [edge] = await h.server.owner.query<{ idx: number; width: number }>('SELECT idx, max(width)::int AS width FROM audit_tiles WHERE level = 1 AND width < 256 GROUP BY idx ORDER BY idx DESC LIMIT 1');
    assert.ok(edge, 'a partial level-1 tile at the edge');
    const [saved] = await h.server.owner.query<{ hashes: string }>("SELECT encode(hashes, 'hex') AS hashes FROM audit_tiles WHERE level = 1 AND idx = $1 AND width = $2", [edge.idx, edge.width]);
    await committed(h.server.owner, (q) => q.query('DELETE FROM audit_tiles WHERE level = 1 AND idx = $1 AND width = $2', [edge.idx, edge.width]));
    try {
      const report = await verifyRoute(h.admin);
      assert.equal(report.ok, false, 'the missing tile went unnoticed');
      assert.match(report.problem ?? '', /the stored tree lacks tile tile\/1\/\S+ at its right edge/);
      assert.match(report.first_bad_tile ?? '', /^tile\/1\//);
    } finally {
      await committed(h.server.owner, (q) => q.query("INSERT INTO audit_tiles (level, idx, width, hashes) VALUES (1, $1, $2, decode($3, 'hex'))", [edge.idx, edge.width, saved!.hashes]));
    }
    assertOk(await verifyRoute(h.admin));
  });

  test('a sealed record\'s transaction position moved ten million transactions forward: verification names the record', async () => {
    const [target] = await h.server.owner.query<{ record_id: number }>('SELECT record_id::int FROM audit_seal WHERE seq = 10');
    await committed(h.server.owner, (q) => q.query(`UPDATE audit_log SET xact_id = (pg_current_xact_id()::text::bigint + 10000000)::text::xid8 WHERE id = $1`, [target!.record_id]));
    const report = await verifyRoute(h.admin);
    assert.equal(report.ok, false, 'the moved position went unnoticed');
    assert.equal(report.first_bad_id, target!.record_id);
    assert.match(report.problem ?? '', /its position was moved forward/);
  });
});
