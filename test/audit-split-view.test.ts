// A split view (issue 40 §6): whoever holds the log's signing key and the database rewrites an old
// record, rebuilds the whole tree and signs it again. Every checkpoint of the new history verifies
// under the log's key, so only someone holding an older checkpoint can tell. A witness does: it
// cosigned the old history, so it refuses to cosign one that does not extend it, and
// `teamlog audit verify --policy` fails for want of a quorum.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { cosigner, formatCosignatureVerifierKey, formatCosignerKey } from '../src/tlog/cosignature.js';
import { ed25519PublicKeyRaw, formatVerifierKey, loadEd25519PrivateKey } from '../src/tlog/signed-note.js';
import { auditedActions, behindTheBack, settled, type CheckpointJson } from './helpers/audit-log.js';
import { runTeamlog } from './helpers/cli.js';
import { loginAdmin, type Session } from './helpers/client.js';
import { createTestDatabase, needsPostgres, startTestServer, TEST_SIGNING_KEY, type TestDatabase, type TestServer } from './helpers/server.js';
import { serveWitness, stopWitnessProcess, type WitnessProcess } from './helpers/witness.js';

const ORIGIN = `teamlog.test/split-view-${process.pid}`;
const LOG_VKEY = formatVerifierKey(ORIGIN, ed25519PublicKeyRaw(loadEd25519PrivateKey(TEST_SIGNING_KEY)));
const NAME = 'w1.split.test';

interface CheckpointBody extends CheckpointJson { witnessed: boolean }
interface WitnessesBody { witnesses: Array<{ name: string; last_cosigned_size: number | null; last_error: string | null }> }

let root: string;
let witness: WitnessProcess | undefined;
let database: TestDatabase | undefined;

/** Polls `check` until it answers a value, for up to `ms`. */
async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const latest = async (admin: Session) => (await admin.client.get<CheckpointBody>('/api/v1/audit-logs/checkpoints/latest', { token: admin.token })).body;
const witnessState = async (admin: Session) => (await admin.client.get<WitnessesBody>('/api/v1/audit-logs/witnesses', { token: admin.token })).body.witnesses.find((w) => w.name === NAME)!;

const start = () => startTestServer({
  database,
  env: { AUDIT_LOG_ORIGIN: ORIGIN, AUDIT_WITNESS_POLICY: path.join(root, 'policy.txt'), AUDIT_WITNESS_INTERVAL_MS: '300', AUDIT_CHECKPOINT_INTERVAL_MS: '200' },
});

before(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'teamlog-split-view-'));
  if (needsPostgres) return;
  mkdirSync(path.join(root, 'state'), { mode: 0o700 });
  const key = cosigner(NAME, generateKeyPairSync('ed25519').privateKey);
  writeFileSync(path.join(root, 'witness.key'), `${formatCosignerKey(key)}\n`, { mode: 0o600 });
  writeFileSync(path.join(root, 'logs.txt'), `log ${LOG_VKEY}\n`);
  witness = await serveWitness(root);
  writeFileSync(path.join(root, 'policy.txt'), `log ${LOG_VKEY}\nwitness ${NAME} ${formatCosignatureVerifierKey(key)} ${witness.url}\nquorum ${NAME}\n`);
  database = await createTestDatabase();
});

after(async () => {
  if (witness) await stopWitnessProcess(witness);
  await database?.drop();
  rmSync(root, { recursive: true, force: true });
});

test('a history rewritten and re-signed with the log\'s own key gets no cosignature, and verify --policy fails', { skip: needsPostgres }, async () => {
  // The honest history, cosigned by the witness.
  let server: TestServer = await start();
  let admin = await loginAdmin(server);
  await auditedActions(admin, 4);
  const honest = await settled<CheckpointBody>(server, admin);
  await until('the witness to cosign the honest history', async () => ((await latest(admin)).witnessed && (await witnessState(admin)).last_cosigned_size === honest.tree_size ? true : undefined));
  await server.close();

  // The rewrite, with the service stopped: an old record changed, every seal, tile, checkpoint,
  // cosignature and witness state dropped, so that the service seals and signs it all again.
  await database!.owner.transaction((tx) =>
    behindTheBack(tx, async () => {
      const first = await tx.query<{ id: number }>("SELECT id FROM audit_log WHERE action = 'CREATE_PROJECT' ORDER BY id LIMIT 1");
      assert.ok(first[0], 'a record to rewrite');
      await tx.query(`UPDATE audit_log SET metadata = metadata || '{"name": "rewritten"}'::jsonb WHERE id = $1`, [first[0].id]);
      await tx.query('DELETE FROM audit_cosignatures');
      await tx.query('DELETE FROM audit_witness_state');
      await tx.query('DELETE FROM audit_checkpoints');
      await tx.query('DELETE FROM audit_tiles');
      await tx.query('DELETE FROM audit_seal_batches');
    }),
  );

  server = await start();
  try {
    admin = await loginAdmin(server);
    // The service reseals the rewritten history and signs it with the same key, past the size the witness holds.
    await auditedActions(admin, 2);
    const rewritten = await settled<CheckpointBody>(server, admin);
    assert.ok(rewritten.tree_size > honest.tree_size);
    const refused = await until('the witness to refuse the rewritten history', async () => {
      const s = await witnessState(admin);
      return s.last_error !== null ? s : undefined;
    });
    assert.match(refused.last_error!, /\b(409|422)\b/, 'the witness holds another root at its size, or the consistency proof fails');
    assert.equal(refused.last_cosigned_size, null, 'nothing of the rewritten history is cosigned');
    assert.equal((await latest(admin)).witnessed, false);

    const env = { DATA_DIR: path.join(root, 'cli-data'), DATABASE_URL: server.databaseUrl ?? '', AUDIT_SIGNING_KEY: TEST_SIGNING_KEY, JWT_SECRET: server.config.jwtSecret ?? '', AUDIT_LOG_ORIGIN: ORIGIN };
    const verified = await runTeamlog(['audit', 'verify', '--policy', path.join(root, 'policy.txt')], env);
    assert.equal(verified.code, 1, verified.stdout + verified.stderr);
    assert.match(verified.stderr, /verification FAILED: .*no checkpoint in the database carries cosignatures meeting quorum w1\.split\.test: no cosignature from w1\.split\.test/);
  } finally {
    await server.close();
  }
});
