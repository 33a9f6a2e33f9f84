// Erasure of personal data without breaking evidence (docs/api.md 5.10): `teamlog audit redact
// --user <id>` deletes the values a user's records name, the records stay byte for byte as
// they were, every API view shows "[redacted]", and a later record naming the same value
// gets a ref of its own instead of bringing the erased value back for the older records.
//
// The CLI runs as a child process (as in cli.test.ts) on the database a test server uses: an
// embedded PGlite under DATA_DIR (one process at a time, so the server is stopped while the
// CLI runs), or a PostgreSQL test database, where the CLI connects as production tells the
// operator to: DATABASE_URL the service's login, MIGRATION_DATABASE_URL the owner's.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { personalDataMatches, personalDataRef } from '../src/modules/audit/audit.personal-data.js';
import { storedPersonalData } from '../src/modules/audit/personal-data.repository.js';
import { useCliDatabase } from './helpers/cli.js';
import { Client, auditRows, login, type Session } from './helpers/client.js';
import { apiRecord, type AuditRecordBody, type PageBody } from './helpers/factories.js';
import { needsPostgres, type TestServer } from './helpers/server.js';

const REQUEST_ID = /\bcli-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/;
const REDACTED = '[redacted]';

/** The file's database, kept for the whole file (servers come and go on it), and the CLI on it. */
const { runCli, withServer } = useCliDatabase({ prefix: 'teamlog-redact-' });

/** Runs the redaction; answers how many values it reports erased and its audit request id. */
async function redact(userId: number): Promise<{ erased: number; requestId: string }> {
  const r = await runCli(['audit', 'redact', '--user', String(userId)]);
  assert.equal(r.code, 0, `audit redact failed:\n${r.stdout}${r.stderr}`);
  const erased = /Erased (\d+) personal value/.exec(r.stdout)?.[1];
  const requestId = REQUEST_ID.exec(r.stdout)?.[0];
  assert.ok(erased !== undefined && requestId, `no count or request id in:\n${r.stdout}`);
  return { erased: Number(erased), requestId };
}

const unique = () => randomBytes(4).toString('hex');

/** Every audit row exactly as stored (all columns, as text), oldest first. */
async function snapshot(server: TestServer): Promise<Array<{ id: number; r: string }>> {
  return server.owner.query<{ id: number; r: string }>('SELECT id, a::text AS r FROM audit_log a ORDER BY id');
}

async function apiList(session: Session, pathAndQuery: string): Promise<{ data: AuditRecordBody[]; text: string }> {
  const res = await session.client.get<PageBody<AuditRecordBody>>(pathAndQuery, { token: session.token });
  assert.equal(res.status, 200, res.text);
  return { data: res.body.data, text: res.text };
}

/** A user made for erasing: created, not logged in (a login would be a record naming them). */
async function createErasableUser(admin: Session, email: string, password: string): Promise<number> {
  const res = await admin.client.post('/api/v1/users', { email, name: 'Erasable', password }, { token: admin.token });
  assert.equal(res.status, 201, res.text);
  return res.body.id as number;
}

async function changeEmail(admin: Session, userId: number, email: string): Promise<void> {
  const res = await admin.client.put(`/api/v1/users/${userId}`, { email }, { token: admin.token });
  assert.equal(res.status, 200, res.text);
}

async function failLogin(server: TestServer, email: string): Promise<void> {
  const res = await new Client(server).post('/api/v1/auth/login', { email, password: 'not-the-password' });
  assert.equal(res.status, 401, res.text);
}

const personalOf = (server: TestServer, userId: number) =>
  server.owner.query<{ ref: string; value: string; salt: string | null }>(
    `SELECT ref, value, encode(salt, 'hex') AS salt FROM audit_personal_data WHERE subject_user_id = $1 ORDER BY ref`,
    [userId],
  );

const refIn = (record: { metadata: Record<string, unknown> }, key: string) => (record.metadata[key] as { $personal: string }).$personal;

// The story of one user, told across the tests below (they run in order).
const password = `erasable-password-${unique()}`;
const first = `erasable-${unique()}@test.local`;
const second = `erasable-renamed-${unique()}@test.local`;
const bystanderEmail = `bystander-${unique()}@test.local`;
let userId: number;
let bystanderId: number;
/** Records naming the user's emails, written before the erasure. */
let created: number, renamed: number, failedLogin: number, legacy: number;
let recordsBefore: Array<{ id: number; r: string }>;
let bystanderRows: Array<{ ref: string; value: string; salt: string | null }>;
let legacyRef: string;
let redaction: { erased: number; requestId: string };

describe('teamlog audit redact --user <id>', () => {
  test('a user\'s records name their emails by refs of their own, each a keyed hash of the value that can be checked', async () => {
    await withServer(async (server, admin) => {
      userId = await createErasableUser(admin, first, password);
      await changeEmail(admin, userId, second);
      await failLogin(server, second);
      bystanderId = await createErasableUser(admin, bystanderEmail, password);

      const [create] = await auditRows(server, `action = 'CREATE_USER' AND resource_id = $1`, [userId]);
      const [update] = await auditRows(server, `action = 'UPDATE_USER_EMAIL' AND resource_id = $1`, [userId]);
      const [failure] = await auditRows(server, `action = 'LOGIN_FAILURE' AND resource_id = $1`, [userId]);
      assert.ok(create && update && failure);
      [created, renamed, failedLogin] = [create.id, update.id, failure.id];
      // The same value for the same user, in two records: two refs, two rows (the old,
      // deterministic ref was one row for both, which a later record could bring back).
      assert.notEqual(refIn(create, 'email'), refIn(update, 'oldEmail'));
      assert.notEqual(refIn(update, 'newEmail'), refIn(failure, 'email'));

      const key = server.deps.secrets.personalDataKey;
      const refs = [refIn(create, 'email'), refIn(update, 'oldEmail'), refIn(update, 'newEmail'), refIn(failure, 'email')];
      const rows = await storedPersonalData(server.owner, refs);
      assert.equal(rows.length, 4);
      for (const row of rows) {
        assert.equal(row.subject_user_id, userId);
        assert.match(row.salt ?? '', /^[0-9a-f]{32}$/, 'a 16-byte salt per value');
        assert.ok(personalDataMatches(key, row), `HMAC(key, salt ‖ subject ‖ value) = ref for ${row.value}`);
        // A value, subject or salt changed behind the service's back no longer matches its ref.
        assert.ok(!personalDataMatches(key, { ...row, value: `${row.value}.evil` }));
        assert.ok(!personalDataMatches(key, { ...row, subject_user_id: bystanderId }));
        assert.ok(!personalDataMatches(key, { ...row, salt: '00'.repeat(16) }));
        assert.ok(!personalDataMatches(Buffer.alloc(32, 7), row), 'another key');
      }
      assert.deepEqual(rows.map((r) => r.value).sort(), [first, first, second, second].sort());
      assert.equal(new Set(rows.map((r) => r.salt)).size, 4);

      // A record of before the salt (ref = HMAC(key, subject ‖ value), no salt in its row)
      // still reads, checks, and is erased with the rest.
      legacyRef = personalDataRef(key, null, userId, first);
      await server.owner.query('INSERT INTO audit_personal_data (ref, subject_user_id, value) VALUES ($1, $2, $3)', [legacyRef, userId, first]);
      const [old] = await server.owner.query<{ id: number }>(
        `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, request_id)
         VALUES (NULL, 'CREATE_USER', 'USER', $1, 'SUCCESS', $2, 'legacy-record') RETURNING id`,
        [userId, JSON.stringify({ email: { $personal: legacyRef }, role: 'USER' })],
      );
      legacy = old!.id;
      const [legacyRow] = await storedPersonalData(server.owner, [legacyRef]);
      assert.equal(legacyRow?.salt, null);
      assert.ok(personalDataMatches(key, legacyRow!));
      assert.deepEqual((await apiRecord(admin, legacy)).metadata, { email: first, role: 'USER' });
      assert.deepEqual((await apiRecord(admin, renamed)).metadata, { oldEmail: first, newEmail: second });

      bystanderRows = await personalOf(server, bystanderId);
      assert.equal(bystanderRows.length, 1);
      recordsBefore = await snapshot(server);
    });
  });

  test('erases the values from the table and every API view ("[redacted]"), writes one REDACT_PERSONAL_DATA record, and leaves every record byte for byte as it was', async () => {
    redaction = await redact(userId);
    assert.equal(redaction.erased, 5, 'four values of the service, one of before the salt');

    await withServer(async (server, admin) => {
      assert.deepEqual(await personalOf(server, userId), []);
      for (const value of [first, second]) {
        const left = await server.owner.query('SELECT 1 FROM audit_personal_data p WHERE position($1 in p::text) > 0', [value]);
        assert.equal(left.length, 0, `${value} is gone`);
      }
      assert.deepEqual(await personalOf(server, bystanderId), bystanderRows, 'nobody else\'s values are touched');

      // The records are untouched, and exactly one was added: the erasure's own.
      const now = await snapshot(server);
      assert.deepEqual(now.slice(0, recordsBefore.length), recordsBefore);
      // (Besides the ADMIN's login of this server, withServer's own.)
      const added = (await auditRows(server, 'id > $1', [recordsBefore.at(-1)!.id])).filter((r) => !(r.action === 'LOGIN_SUCCESS' && r.resource_id === admin.id));
      assert.equal(added.length, 1, JSON.stringify(added));
      const record = added[0]!;
      assert.deepEqual(
        { action: record.action, resource_type: record.resource_type, resource_id: record.resource_id, actor_id: record.actor_id, result: record.result, ip: record.ip, user_agent: record.user_agent, request_id: record.request_id, metadata: record.metadata },
        { action: 'REDACT_PERSONAL_DATA', resource_type: 'USER', resource_id: userId, actor_id: null, result: 'SUCCESS', ip: null, user_agent: null, request_id: redaction.requestId, metadata: { valuesErased: 5 } },
      );
      const shown = await apiRecord(admin, record.id);
      assert.deepEqual(shown.metadata, { valuesErased: 5 });
      const filtered = await apiList(admin, '/api/v1/audit-logs?action=REDACT_PERSONAL_DATA');
      assert.deepEqual(filtered.data.map((r) => r.id), [record.id]);

      // One record at a time, the user's list, the whole log, and the user's own security log.
      assert.deepEqual((await apiRecord(admin, created)).metadata, { email: REDACTED, role: 'USER' });
      assert.deepEqual((await apiRecord(admin, renamed)).metadata, { oldEmail: REDACTED, newEmail: REDACTED });
      assert.equal((await apiRecord(admin, failedLogin)).metadata.email, REDACTED);
      assert.deepEqual((await apiRecord(admin, legacy)).metadata, { email: REDACTED, role: 'USER' });
      const list = await apiList(admin, `/api/v1/audit-logs?resource_type=USER&resource_id=${userId}&limit=100`);
      assert.deepEqual(list.data.map((r) => r.id).sort((a, b) => a - b), [created, renamed, failedLogin, legacy, record.id].sort((a, b) => a - b));
      const everything = await apiList(admin, '/api/v1/audit-logs?limit=100');
      const own = await apiList(await login(server, second, password), '/api/v1/profile/security-log?limit=100');
      assert.ok(own.data.some((r) => r.id === renamed) && own.data.some((r) => r.id === failedLogin));
      for (const view of [list, everything, own]) {
        assert.ok(!view.text.includes(first) && !view.text.includes(second), `no erased value in ${view.text}`);
        assert.ok(!view.text.includes('$personal'), 'refs are never shown');
      }
      assert.ok(everything.data.some((r) => r.metadata.email === bystanderEmail), 'others\' values are still shown');
    });
  });

  test('a later record naming the same email for the same user shows it, while the older records stay "[redacted]"', async () => {
    await withServer(async (server, admin) => {
      await changeEmail(admin, userId, first); // second → first: both values again, for the same user
      await failLogin(server, first);
      const [back] = await auditRows(server, `action = 'UPDATE_USER_EMAIL' AND resource_id = $1 AND id > $2`, [userId, renamed]);
      const [again] = await auditRows(server, `action = 'LOGIN_FAILURE' AND resource_id = $1 AND id > $2`, [userId, failedLogin]);
      assert.ok(back && again);

      assert.deepEqual((await apiRecord(admin, back.id)).metadata, { oldEmail: second, newEmail: first });
      assert.equal((await apiRecord(admin, again.id)).metadata.email, first);
      assert.deepEqual((await apiRecord(admin, created)).metadata, { email: REDACTED, role: 'USER' });
      assert.deepEqual((await apiRecord(admin, renamed)).metadata, { oldEmail: REDACTED, newEmail: REDACTED });
      assert.equal((await apiRecord(admin, failedLogin)).metadata.email, REDACTED);
      assert.deepEqual((await apiRecord(admin, legacy)).metadata, { email: REDACTED, role: 'USER' });
      const list = await apiList(admin, `/api/v1/audit-logs?resource_type=USER&resource_id=${userId}&action=UPDATE_USER_EMAIL`);
      assert.deepEqual(list.data.map((r) => [r.id, r.metadata]), [
        [back.id, { oldEmail: second, newEmail: first }],
        [renamed, { oldEmail: REDACTED, newEmail: REDACTED }],
      ]);

      // New rows under new refs: none of the erased refs is back, the old deterministic one neither.
      const erasedRefs = [legacyRef, ...(await auditRows(server, 'id = ANY($1)', [[created, renamed, failedLogin]])).flatMap((r) =>
        ['email', 'oldEmail', 'newEmail'].filter((k) => k in r.metadata).map((k) => refIn(r, k)),
      )];
      assert.equal(erasedRefs.length, 5);
      assert.deepEqual(await server.owner.query('SELECT ref FROM audit_personal_data WHERE ref = ANY($1)', [erasedRefs]), []);
      assert.equal((await personalOf(server, userId)).length, 3);

      // And the evidence still holds: the records (and so their leaves) are what they were.
      for (let i = 0; i < 200; i++) {
        const [c] = await server.owner.query<{ unsealed: number }>('SELECT (SELECT count(*) FROM audit_log) - (SELECT count(*) FROM audit_seal) AS unsealed');
        if (Number(c!.unsealed) === 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const verified = await admin.client.get('/api/v1/audit-logs/verify', { token: admin.token });
      assert.equal(verified.body.ok, true, verified.body.problem);
      assert.ok(verified.body.records_checked >= (await snapshot(server)).length, 'every record, the redacted ones included, was checked');
    });
  });

  test('the user may already be deleted, or may never have existed: it succeeds, and is recorded all the same', async () => {
    const goneEmail = `gone-${unique()}@test.local`;
    let goneId = 0;
    let nobodyId = 0;
    await withServer(async (server, admin) => {
      goneId = await createErasableUser(admin, goneEmail, password);
      const deleted = await admin.client.delete(`/api/v1/users/${goneId}`, { token: admin.token });
      assert.equal(deleted.status, 204, deleted.text);
      const [{ m }] = (await server.owner.query<{ m: number }>('SELECT max(id)::int AS m FROM users')) as [{ m: number }];
      nobodyId = m + 1000;
    });
    const gone = await redact(goneId);
    assert.equal(gone.erased, 2, 'CREATE_USER and DELETE_USER named the email');
    const nobody = await redact(nobodyId);
    assert.equal(nobody.erased, 0);
    const nothingLeft = await redact(goneId);
    assert.equal(nothingLeft.erased, 0);

    await withServer(async (server, admin) => {
      for (const [id, run, erased] of [[goneId, gone, 2], [nobodyId, nobody, 0], [goneId, nothingLeft, 0]] as const) {
        const rows = await auditRows(server, 'request_id = $1', [run.requestId]);
        assert.equal(rows.length, 1, `one record for ${run.requestId}`);
        assert.equal(rows[0]!.action, 'REDACT_PERSONAL_DATA');
        assert.equal(rows[0]!.resource_id, id);
        assert.deepEqual(rows[0]!.metadata, { valuesErased: erased });
      }
      const records = await auditRows(server, `resource_type = 'USER' AND resource_id = $1 AND action <> 'REDACT_PERSONAL_DATA'`, [goneId]);
      assert.deepEqual(records.map((r) => r.action), ['CREATE_USER', 'DELETE_USER']);
      for (const r of records) assert.equal((await apiRecord(admin, r.id)).metadata.email, REDACTED);
      assert.equal((await auditRows(server, `action = 'REDACT_PERSONAL_DATA'`)).length, 4, 'one record per run, no more');
    });
  });

  test('--email erases an address whoever it was about, one typed into failed logins (no user) included, case-insensitively; the record names no address', async () => {
    const stranger = `stranger-${unique()}@test.local`;
    const kept = `kept-${unique()}@test.local`;
    let failures: number[] = [];
    let keptBefore: Array<{ ref: string; value: string; salt: string | null }> = [];
    await withServer(async (server) => {
      await failLogin(server, stranger);
      await failLogin(server, stranger.toUpperCase());
      await failLogin(server, kept);
      const rows = await auditRows(server, `action = 'LOGIN_FAILURE' AND resource_id IS NULL AND id > $1`, [failedLogin]);
      failures = rows.slice(0, 2).map((r) => r.id);
      assert.equal(rows.length, 3);
      const stored = await server.owner.query<{ subject_user_id: number | null; value: string }>(
        'SELECT subject_user_id, value FROM audit_personal_data WHERE value = $1', [stranger],
      );
      assert.deepEqual(stored, [{ subject_user_id: null, value: stranger }, { subject_user_id: null, value: stranger }], 'no user: --user cannot reach them');
      keptBefore = await server.owner.query('SELECT ref, value, encode(salt, \'hex\') AS salt FROM audit_personal_data WHERE value = $1', [kept]);
      assert.equal(keptBefore.length, 1);
    });

    const r = await runCli(['audit', 'redact', '--email', stranger.toUpperCase()]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`^Erased 2 personal values equal to ${stranger.toUpperCase().replace(/[.]/g, '\\.')} from the audit log`));
    const requestId = REQUEST_ID.exec(r.stdout)?.[0];
    assert.ok(requestId);

    await withServer(async (server, admin) => {
      assert.equal((await server.owner.query('SELECT 1 FROM audit_personal_data WHERE lower(value) = $1', [stranger])).length, 0);
      for (const id of failures) assert.equal((await apiRecord(admin, id)).metadata.email, REDACTED);
      assert.deepEqual(await server.owner.query('SELECT ref, value, encode(salt, \'hex\') AS salt FROM audit_personal_data WHERE value = $1', [kept]), keptBefore);
      const [record, ...more] = await auditRows(server, 'request_id = $1', [requestId]);
      assert.equal(more.length, 0, 'one record');
      assert.equal(record!.action, 'REDACT_PERSONAL_DATA');
      assert.equal(record!.resource_id, null);
      assert.deepEqual(record!.metadata, { valuesErased: 2, scope: 'email' });
      const everything = (await server.owner.query<{ t: string }>("SELECT string_agg(a::text, '\n') AS t FROM audit_log a"))[0]!.t;
      assert.ok(!everything.toLowerCase().includes(stranger), 'no record holds the erased address');
    });
  });

  test('the service\'s own role still may not delete personal data, and the CLI says so when given only its login', { skip: needsPostgres }, async () => {
    await withServer(async (server) => {
      const [{ n }] = (await server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_personal_data')) as [{ n: number }];
      await assert.rejects(server.db.query('DELETE FROM audit_personal_data WHERE subject_user_id = $1', [bystanderId]), /permission denied/);
      await assert.rejects(server.db.query('DELETE FROM audit_personal_data'), /permission denied/);
      const records = await snapshot(server);

      const refused = await runCli(['audit', 'redact', '--user', String(bystanderId)], { MIGRATION_DATABASE_URL: undefined });
      assert.equal(refused.code, 1, refused.stdout + refused.stderr);
      assert.match(refused.stderr, /MIGRATION_DATABASE_URL/);
      assert.doesNotMatch(refused.stdout, /Erased/);

      assert.deepEqual(await personalOf(server, bystanderId), bystanderRows);
      assert.equal(((await server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_personal_data')) as [{ n: number }])[0].n, n);
      assert.deepEqual(await snapshot(server), records, 'no record of an erasure that did not happen');
    });
  });

  test('without --user or --email, with both, or with something that is not a user id or an address, it is a usage error (exit code 2) and touches nothing', async () => {
    for (const args of [
      [], ['--user'], ['--user', 'abc'], ['--user', '0'], ['--user', '-3'], ['--user', '1.5'], ['--user', '99999999999999999999'], ['--user', '1', '--all'],
      ['--email'], ['--email', 'nobody'], ['--email', 'a b@c.d'], ['--email', `${'a'.repeat(250)}@x.io`], ['--user', '1', '--email', 'a@b.c'],
    ]) {
      const r = await runCli(['audit', 'redact', ...args]);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /Usage: teamlog audit redact --user <id>/);
      assert.equal(r.stdout, '');
    }
    const help = await runCli(['audit', 'redact', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /REDACT_PERSONAL_DATA/);
  });
});
