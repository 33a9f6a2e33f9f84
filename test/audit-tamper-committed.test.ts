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
// This file: the committed scenarios, the truncated tail and the re-signed history. The ones on
// the engine, in rolled-back transactions: audit-tamper-engine.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import {
  assertBad, assertOk, auditedActions, buildLog, committed, deleteRecord, layout, settled, sharedDatabase, verifyRoute, type CheckpointJson,
} from './helpers/audit-log.js';
import { runTeamlog } from './helpers/cli.js';
import { loginAdmin } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { onPostgres, startTestServer, TEST_SIGNING_KEY } from './helpers/server.js';

const ENV = { AUDIT_CHECKPOINT_INTERVAL_MS: '100' };

// ---------------------------------------------------------------------------------------
// Committed tampers, found through the real route

describe('a changed field, committed: GET /audit-logs/verify names the record', () => {
  const h = useTestServer({ env: ENV });

  test('before: ok; after: ok false, first_bad_id the changed record, and the guards are back on', async () => {
    await buildLog(h.server, h.admin, [3, 3]);
    const L = await layout(h.server.owner);
    const before = await verifyRoute(h.admin);
    assertOk(before);
    const id = L.seals[Math.floor(L.seals.length / 2)]!;
    await committed(h.server.owner, async (q) => {
      await q.query(`UPDATE audit_log SET metadata = jsonb_set(metadata, '{forged}', 'true') WHERE id = $1`, [id]);
    });
    const after = await verifyRoute(h.admin);
    assertBad(after, id, new RegExp(`record ${id} no longer matches its seal`));
    // The log is quiet: a second look says the same.
    assert.deepEqual(await verifyRoute(h.admin), after);
    await assert.rejects(h.server.owner.query('DELETE FROM audit_log WHERE id = $1', [id]), /append-only/);
  });
});

describe('a deleted record, committed: GET /audit-logs/verify names the first survivor after the gap', () => {
  const h = useTestServer({ env: ENV });

  test('before: ok; after: ok false, first_bad_id the next record in seq order', async () => {
    await buildLog(h.server, h.admin, [3, 3]);
    const L = await layout(h.server.owner);
    assertOk(await verifyRoute(h.admin));
    const seq = Math.floor(L.seals.length / 2);
    await committed(h.server.owner, (q) => deleteRecord(q, L.seals[seq]!));
    assertBad(await verifyRoute(h.admin), L.seals[seq + 1], new RegExp(`record ${L.seals[seq]}.*no longer exists`));
  });
});

describe('a record with no canonical form, inserted behind the service\'s back before it was sealed', () => {
  const h = useTestServer({ env: ENV });

  test('the sealer seals it as unverifiable and goes on sealing what follows; GET /audit-logs/verify names it', async () => {
    await buildLog(h.server, h.admin, [2]);
    // jsonb takes 1e400; no double holds it, so RFC 8785 has no form for it. Inserted as the
    // owner in a transaction of its own: the sealer reaches it in commit order like any record.
    const [poisoned] = await h.server.owner.query<{ id: number }>(
      `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
       VALUES (NULL, 'DELETE_PROJECT', 'PROJECT', 1, 'SUCCESS', '{"amount": 1e400}', NULL, NULL, 'no-canonical-form') RETURNING id`,
    );
    // Records after it are sealed and signed over all the same: sealing did not stop at it.
    await auditedActions(h.admin, 2);
    await settled(h.server, h.admin);
    const L = await layout(h.server.owner);
    assert.ok(L.seals.includes(poisoned!.id), 'the record was sealed');
    assert.ok(L.seals.indexOf(poisoned!.id) < L.seals.length - 2, 'records after it were sealed');
    assertBad(await verifyRoute(h.admin), poisoned!.id, new RegExp(`record ${poisoned!.id}: its sealed form is not JSON that can be canonicalized`));
  });
});

// ---------------------------------------------------------------------------------------
// The truncated tail: the database alone cannot tell; a checkpoint saved outside can

describe('a truncated tail (newest records, their seals, nodes and checkpoints deleted)', () => {
  test('the database alone says ok (GET /audit-logs/verify and `teamlog audit verify`), but `teamlog audit verify --checkpoint saved.note` exits 1 naming the truncation', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'teamlog-tamper-'));
    const database = await sharedDatabase(dir);
    let dropped = false;
    try {
      let older: CheckpointJson | undefined;
      let saved = '';
      let kept = 0;
      const server = await startTestServer({ database, env: ENV });
      try {
        const admin = await loginAdmin(server);
        older = await buildLog(server, admin, [4]);
        kept = older.tree_size;
        await buildLog(server, admin, [4, 3]);
        // Saved outside the database before the truncation, as a webhook receiver or a cron job would.
        const note = await admin.client.get('/api/v1/audit-logs/checkpoints/latest', { token: admin.token, headers: { accept: 'text/plain' } });
        assert.equal(note.status, 200);
        saved = note.text;
        const before = await verifyRoute(admin);
        assertOk(before);
        assert.ok(before.records_checked > kept);

        await committed(server.owner, async (q) => {
          await q.query('DELETE FROM audit_log WHERE id IN (SELECT record_id FROM audit_seal WHERE seq >= $1)', [kept]);
          await q.query('DELETE FROM audit_seal_batches WHERE first_seq >= $1', [kept]);
          // Every tile that reaches past the kept records: (idx·256 + width) nodes of 256^level leaves each.
          await q.query('DELETE FROM audit_tiles WHERE (idx * 256 + width) * (256::numeric ^ level) > $1', [kept]);
          await q.query('DELETE FROM audit_checkpoints WHERE tree_size > $1', [kept]);
        });
        const after = await verifyRoute(admin);
        assertOk(after);
        assert.equal(after.records_checked, kept);
        assert.equal(after.head?.root_hash, older.root_hash);
      } finally {
        await server.close();
      }
      // PGlite allows one process: the CLI opens the database once the server has let go of it.
      if (!onPostgres) {
        await database.drop();
        dropped = true;
      }
      // The deployment's keys, as its operator runs the CLI: without JWT_SECRET its personal values would go unchecked (exit 3).
      const env = { DATA_DIR: dir, AUDIT_SIGNING_KEY: TEST_SIGNING_KEY, JWT_SECRET: server.config.jwtSecret!, ...(database.databaseUrl ? { DATABASE_URL: database.databaseUrl } : {}) };
      const savedFile = path.join(dir, 'saved.note');
      const olderFile = path.join(dir, 'older.note');
      writeFileSync(savedFile, saved);
      writeFileSync(olderFile, older!.note);

      const alone = await runTeamlog(['audit', 'verify'], env);
      assert.equal(alone.code, 0, `the database alone should verify:\n${alone.stdout}${alone.stderr}`);
      assert.match(alone.stdout, /^OK: /);

      // A checkpoint the truncated log still extends is accepted.
      const extended = await runTeamlog(['audit', 'verify', '--checkpoint', olderFile], env);
      assert.equal(extended.code, 0, extended.stdout + extended.stderr);
      assert.match(extended.stdout, /extends the saved checkpoint/);

      const caught = await runTeamlog(['audit', 'verify', '--checkpoint', savedFile], env);
      assert.equal(caught.code, 1, caught.stdout + caught.stderr);
      assert.match(caught.stderr, /verification FAILED/);
      assert.match(caught.stderr, new RegExp(`${kept} sealed records, fewer than the \\d+ of the saved checkpoint: its tail was removed`));
    } finally {
      if (!dropped) await database.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
