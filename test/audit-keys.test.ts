// The checkpoint signing key and the instances that seal (docs/api.md 5.4, 5.6, section 7): a key
// generated once into DATA_DIR with mode 0600 and never written to the database; rotation,
// after which old checkpoints still verify under their own key; and several instances on one
// database, of which one seals at a time and another carries on when it goes.
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { openNote, parseVerifierKey, generateEd25519PrivateKeyPem } from '../src/tlog/signed-note.js';
import { SIGNING_KEY_FILE } from '../src/modules/audit/evidence/signing-key.loader.js';
import { settled } from './helpers/audit-log.js';
import { loginAdmin, type Session } from './helpers/client.js';
import { createTestDatabase, onPostgres, startTestServer } from './helpers/server.js';

const FAST = { AUDIT_CHECKPOINT_INTERVAL_MS: '100' };

async function audit(admin: Session, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await admin.client.post('/api/v1/projects', { name: `Keys ${i}` }, { token: admin.token });
    assert.equal(res.status, 201);
  }
}


async function verify(admin: Session) {
  const res = await admin.client.get('/api/v1/audit-logs/verify', { token: admin.token });
  assert.equal(res.status, 200);
  return res.body as { ok: boolean; problem?: string; records_checked: number };
}

test('without AUDIT_SIGNING_KEY a key is generated once into DATA_DIR (0600) and never stored in the database', async () => {
  const server = await startTestServer({ env: { ...FAST, AUDIT_SIGNING_KEY: '' } });
  try {
    const file = path.join(server.config.dataDir, SIGNING_KEY_FILE);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const admin = await loginAdmin(server);
    await audit(admin, 2);
    await settled(server, admin);
    assert.equal((await verify(admin)).ok, true);
    // The private key's base64 body appears nowhere in the evidence tables.
    const { readFileSync } = await import('node:fs');
    const body = readFileSync(file, 'utf8').split('\n').filter((l) => l && !l.startsWith('-----')).join('');
    const dump = await server.owner.query<{ t: string }>(
      `SELECT string_agg(t, ' ') AS t FROM (
         SELECT k::text AS t FROM audit_signing_keys k UNION ALL SELECT c::text FROM audit_checkpoints c UNION ALL SELECT o::text FROM audit_log_origin o) x`,
    );
    assert.ok(!dump[0]!.t.includes(body), 'the private key is not in the database');
  } finally {
    await server.close();
  }
});

test('rotation: after a restart with a new key (and the old one named as trusted) the head is re-signed under it, and old checkpoints still verify under theirs', async () => {
  const database = await createTestDatabase();
  const first = generateEd25519PrivateKeyPem();
  const second = generateEd25519PrivateKeyPem();
  let server = await startTestServer({ database, env: { ...FAST, AUDIT_SIGNING_KEY: first, AUDIT_SIGNING_KEY_ID: 'key-2026-01' } });
  try {
    let admin = await loginAdmin(server);
    await audit(admin, 3);
    const old = await settled(server, admin, { keyId: 'key-2026-01' });
    const previous = ((await admin.client.get('/api/v1/audit-logs/public-keys', { token: admin.token })).body as Array<{ note_verifier_key: string }>)[0]!.note_verifier_key;
    await server.close();

    // A new key without the old one named: the service refuses to start rather than sign
    // checkpoints nobody trusts (or answer verifications against the wrong key), names the
    // setting and the way to rotate, and registers nothing.
    await assert.rejects(
      startTestServer({ database, env: { ...FAST, AUDIT_SIGNING_KEY: second, AUDIT_SIGNING_KEY_ID: 'key-2026-02' } }),
      (err: Error) => {
        assert.match(err.message, /AUDIT_SIGNING_KEY: this instance would sign the audit log's checkpoints with key "key-2026-02", but the log's newest checkpoint \(tree size \d+\) is signed with key "key-2026-01"/);
        assert.ok(err.message.includes(`AUDIT_PREVIOUS_VERIFIER_KEYS=${previous}`), err.message);
        return true;
      },
    );
    assert.deepEqual(await database.owner.query('SELECT key_id FROM audit_signing_keys ORDER BY key_id'), [{ key_id: 'key-2026-01' }]);

    // With the old key named as trusted, the head is re-signed under the new one at once.
    server = await startTestServer({ database, env: { ...FAST, AUDIT_SIGNING_KEY: second, AUDIT_SIGNING_KEY_ID: 'key-2026-02', AUDIT_PREVIOUS_VERIFIER_KEYS: previous } });
    admin = await loginAdmin(server);
    // The login alone is a record; the head is re-signed under the new key with it.
    const fresh = await settled(server, admin, { keyId: 'key-2026-02' });
    assert.ok(fresh.tree_size > old.tree_size);
    const keys = (await admin.client.get('/api/v1/audit-logs/public-keys', { token: admin.token })).body as Array<{ key_id: string; note_verifier_key: string }>;
    assert.deepEqual(keys.map((k) => k.key_id).sort(), ['key-2026-01', 'key-2026-02']);
    const oldKey = parseVerifierKey(keys.find((k) => k.key_id === 'key-2026-01')!.note_verifier_key);
    const newKey = parseVerifierKey(keys.find((k) => k.key_id === 'key-2026-02')!.note_verifier_key);
    assert.ok(openNote(old.note, [oldKey]).signatures.some((s) => s.verifiedBy), 'the old checkpoint verifies under the old key');
    assert.ok(!openNote(old.note, [newKey]).signatures.some((s) => s.verifiedBy));
    assert.ok(openNote(fresh.note, [newKey]).signatures.some((s) => s.verifiedBy));
    const report = await verify(admin);
    assert.equal(report.ok, true, report.problem);

    // A key id may not be given to another key.
    await server.close();
    const trustedNow = keys.find((k) => k.key_id === 'key-2026-02')!.note_verifier_key;
    await assert.rejects(
      startTestServer({ database, env: { ...FAST, AUDIT_SIGNING_KEY: generateEd25519PrivateKeyPem(), AUDIT_SIGNING_KEY_ID: 'key-2026-01', AUDIT_PREVIOUS_VERIFIER_KEYS: trustedNow } }),
      /AUDIT_SIGNING_KEY_ID "key-2026-01" already names another key/,
    );
  } finally {
    await server.close();
    await database.drop();
  }
});

test('two instances on one database: each record sealed once; when one goes, the other seals on', { skip: !onPostgres && 'needs PostgreSQL (two instances on one database)' }, async () => {
  // The database is the test's: closing an instance must not drop it from under the other.
  const database = await createTestDatabase();
  const a = await startTestServer({ database, env: FAST });
  const b = await startTestServer({ database, env: FAST });
  try {
    const [adminA, adminB] = [await loginAdmin(a), await loginAdmin(b)];
    await Promise.all([audit(adminA, 60), audit(adminB, 60)]);
    await settled(a, adminA);
    const [dup] = await a.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM (SELECT record_id FROM audit_seal GROUP BY record_id HAVING count(*) > 1) d');
    assert.equal(dup!.n, 0);
    assert.equal((await verify(adminB)).ok, true);
    await a.close();
    await audit(adminB, 5);
    await settled(b, adminB);
    const report = await verify(adminB);
    assert.equal(report.ok, true, report.problem);
  } finally {
    await b.close();
    await a.close();
    await database.drop();
  }
});
