// The log checks its own state before it signs, and verification sees what a hostile test found
// unreported (docs/audit-integrity.md §4 and §6). Two ways made the sealer sign over tampered
// history: a checkpoint row replayed (an old one inserted again, or the newest twice), which it
// chained its next checkpoint onto, and the newest checkpoint row deleted, which it replaced with a
// second signed successor of the one before. Here the database refuses a row that does not extend
// the newest one, even from the service's own role, and a row that got in with that guard
// disabled, or a deletion, stops the sealer instead of being signed over. Two more went
// unreported by verification: the tile at the tree's right edge deleted, and a sealed record's
// transaction position moved far forward. And sealing that stopped with nothing else wrong is
// not a failure: the records waiting are said not checked, never that the log failed.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Queryable } from '../src/db/database.js';
import { newestTwoCheckpoints } from '../src/modules/audit/evidence/evidence.repository.js';
import type { LogIdentity } from '../src/modules/audit/evidence/log.identity.js';
import { verifyDatabase } from '../src/modules/audit/evidence/log.verifier.js';
import { TreeUnverifiable, VerifiedTree } from '../src/modules/audit/evidence/tree.loader.js';
import { parseVerifierKey } from '../src/tlog/signed-note.js';
import {
  appendRecords, assertBad, assertOk, auditedActions, buildLog, committed, layout, rolledBack, settled, untilSealingStops, verifyRoute,
} from './helpers/audit-log.js';
import { Client, loginAdmin } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { createTestDatabase, startTestServer, type TestServer } from './helpers/server.js';

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

  test('the tile at the tree\'s right edge deleted (here the top tile, level 1\'s partial one): verification names it, and /health/ready is degraded', async () => {
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
      // No record waits (nothing shows the sealer stopped), and still the probe says so.
      const health = await new Client(h.server).get('/health/ready');
      assert.equal(health.status, 200);
      assert.equal(health.body.status, 'degraded', JSON.stringify(health.body));
      assert.equal(health.body.sealing, undefined);
      assert.match(health.body.tree?.missing_tile ?? '', /^the stored tree lacks tile 1\/\d+ \(width \d+\)/);
    } finally {
      await committed(h.server.owner, (q) => q.query("INSERT INTO audit_tiles (level, idx, width, hashes) VALUES (1, $1, $2, decode($3, 'hex'))", [edge.idx, edge.width, saved!.hashes]));
    }
    assertOk(await verifyRoute(h.admin));
    assert.deepEqual((await new Client(h.server).get('/health/ready')).body, { status: 'ready', database: h.server.db.kind });
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

describe('sealing stopped, and nothing else wrong', () => {
  test('GET /audit-logs/verify: ok (everything sealed verified), the records waiting named as not checked, never as a problem; a record changed meanwhile still fails, naming it', async () => {
    const database = await createTestDatabase();
    let server: TestServer | undefined;
    try {
      // A log sealed and signed by one instance, then only an instance that does not seal
      // (AUDIT_SEALING=off everywhere): what is written from then on waits for its seal.
      const sealing = await startTestServer({ database, env: ENV });
      try {
        await buildLog(sealing, await loginAdmin(sealing), [3, 2]);
      } finally {
        await sealing.close();
      }
      server = await startTestServer({ database, env: { ...ENV, AUDIT_SEALING: 'off' } });
      const admin = await loginAdmin(server);
      const health = await untilSealingStops(server, () => auditedActions(admin, 1));
      const [waiting] = await server.owner.query<{ id: number }>(
        'SELECT min(a.id)::int AS id FROM audit_log a WHERE NOT EXISTS (SELECT 1 FROM audit_seal s WHERE s.record_id = a.id)',
      );
      const first = waiting!.id;
      assert.equal(health.sealing!.first_unsealed_id, first);
      const sealed = (await server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_seal'))[0]!.n;

      const report = await verifyRoute(admin);
      assert.equal(report.ok, true, `not checked is not failed: ${JSON.stringify(report)}`);
      assert.equal(report.records_checked, sealed);
      assert.equal(report.head?.tree_size, sealed);
      assert.equal(report.problem, undefined);
      assert.equal(report.first_bad_id, undefined);
      assert.equal(report.first_bad_tile, undefined);
      assert.equal(report.first_unsealed_id, first, 'kept for the clients that read it');
      assert.equal(report.not_checked?.length, 1, JSON.stringify(report));
      const [entry] = report.not_checked!;
      assert.equal(entry!.reason, 'sealing_stopped');
      assert.equal(entry!.first_unsealed_id, first);
      assert.equal(entry!.what, `record ${first} and those after it`);
      assert.match(entry!.why, new RegExp(`^committed but not sealed \\(sealing has stopped: record ${first} committed \\d+ s ago and is not sealed, and nothing was sealed for \\d+ s \\(the service's log says why\\)\\)$`));

      // The engine's report keeps its first meaning, which `teamlog audit verify` reads (ok false
      // with first_unsealed_id: the stall alone; the CLI says those records were not checked).
      const keys = await admin.client.get<Array<{ note_verifier_key: string }>>('/api/v1/audit-logs/public-keys', { token: admin.token });
      const anchor = parseVerifierKey(keys.body[0]!.note_verifier_key);
      const engine = await verifyDatabase(server.owner, { anchors: [anchor], origin: anchor.name, sealStallMs: 1000 });
      assert.equal(engine.ok, false);
      assert.equal(engine.first_unsealed_id, first);
      assert.match(engine.problem ?? '', new RegExp(`^sealing has stopped: record ${first} `));
      assert.deepEqual(engine.not_checked?.map((n) => [n.reason, n.what, n.first_unsealed_id]), [[entry!.reason, entry!.what, first]]);

      // A sealed record changed behind the service's back meanwhile: a failure, named as one, the stall beside it.
      const target = (await layout(server.owner)).seals[2]!;
      await committed(server.owner, (q) => q.query(`UPDATE audit_log SET metadata = jsonb_set(metadata, '{forged}', 'true') WHERE id = $1`, [target]));
      const tampered = await verifyRoute(admin);
      assertBad(tampered, target, new RegExp(`^record ${target} no longer matches its seal`));
      assert.equal(tampered.first_unsealed_id, first);
      assert.deepEqual(tampered.not_checked?.map((n) => [n.reason, n.first_unsealed_id]), [['sealing_stopped', first]]);
      // To the CLI, too, a failure: the stall alone is what first_unsealed_id with ok false means.
      const tamperedEngine = await verifyDatabase(server.owner, { anchors: [anchor], origin: anchor.name, sealStallMs: 1000 });
      assert.equal(tamperedEngine.ok, false);
      assert.equal(tamperedEngine.first_bad_id, target);
      assert.equal(tamperedEngine.first_unsealed_id, undefined);
    } finally {
      await server?.close();
      await database.drop();
    }
  });
});
