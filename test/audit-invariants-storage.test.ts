// The audit log's invariants (docs/api.md section 5), attacked one by one, as stored: append-only
// whoever asks, and stamped by the server. As written: audit-invariants-writes.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Database } from '../src/db/database.js';
import { auditRows, maxAuditId } from './helpers/client.js';
import { userRow } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';

const h = useTestServer();

/** Every audit row, exactly as stored (all columns, as text), oldest first. */
async function snapshot(): Promise<string[]> {
  const rows = await h.server.owner.query<{ r: string }>('SELECT a::text AS r FROM audit_log a ORDER BY id');
  return rows.map((row) => row.r);
}

async function rejectsWith(work: Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(work, (err: Error) => {
    assert.match(err.message, pattern);
    return true;
  });
}

describe('append-only', () => {
  test('refuses UPDATE, DELETE and TRUNCATE of audit_log through the service connection and leaves every row as it was', async () => {
    const before = await snapshot();
    assert.ok(before.length > 0, 'the admin login left at least one record');
    const id = await maxAuditId(h.server);
    // PostgreSQL refuses for lack of privilege; PGlite (no roles) by trigger. Either way, no change.
    const refused = /permission denied|append-only/;
    await rejectsWith(h.server.db.query(`UPDATE audit_log SET action = 'LOGOUT' WHERE id = $1`, [id]), refused);
    await rejectsWith(h.server.db.query(`UPDATE audit_log SET metadata = '{"forged": true}'`), refused);
    await rejectsWith(h.server.db.query('DELETE FROM audit_log WHERE id = $1', [id]), refused);
    await rejectsWith(h.server.db.query('DELETE FROM audit_log'), refused);
    await rejectsWith(h.server.db.query('TRUNCATE audit_log'), refused);
    await rejectsWith(h.server.db.transaction((tx) => tx.query('DELETE FROM audit_log WHERE id = $1', [id])), refused);
    assert.deepEqual(await snapshot(), before);
  });

  test('refuses UPDATE, DELETE and TRUNCATE of audit_log through the owner (superuser) connection too, by trigger', async () => {
    const before = await snapshot();
    const id = await maxAuditId(h.server);
    await rejectsWith(h.server.owner.query(`UPDATE audit_log SET result = 'FAILURE' WHERE id = $1`, [id]), /audit_log is append-only: UPDATE/);
    await rejectsWith(h.server.owner.query('DELETE FROM audit_log WHERE id = $1', [id]), /audit_log is append-only: DELETE/);
    await rejectsWith(h.server.owner.query('TRUNCATE audit_log'), /audit_log is append-only: TRUNCATE/);
    await rejectsWith(h.server.owner.query('TRUNCATE audit_log, users CASCADE'), /audit_log is append-only: TRUNCATE/);
    assert.deepEqual(await snapshot(), before);
    assert.ok(await userRow(h.server, h.admin.id), 'the refused TRUNCATE of several tables rolled back as a whole');
  });

  test('the triggers hold even in a superuser session that sets session_replication_role = replica', async () => {
    const before = await snapshot();
    const personalBefore = await h.server.owner.query<{ r: string }>('SELECT p::text AS r FROM audit_personal_data p ORDER BY ref');
    const inReplicaMode = (sql: string) =>
      h.server.owner.transaction(async (tx) => {
        await tx.query('SET LOCAL session_replication_role = replica');
        await tx.query(sql);
      });
    await rejectsWith(inReplicaMode(`UPDATE audit_log SET action = 'LOGOUT'`), /audit_log is append-only: UPDATE/);
    await rejectsWith(inReplicaMode('DELETE FROM audit_log'), /audit_log is append-only: DELETE/);
    await rejectsWith(inReplicaMode('TRUNCATE audit_log'), /audit_log is append-only: TRUNCATE/);
    await rejectsWith(inReplicaMode(`UPDATE audit_personal_data SET value = 'x@test.local'`), /audit_personal_data is append-only: UPDATE/);
    assert.deepEqual(await snapshot(), before);
    assert.deepEqual(await h.server.owner.query<{ r: string }>('SELECT p::text AS r FROM audit_personal_data p ORDER BY ref'), personalBefore);
  });

  test('refuses rewriting stored personal data, even for the owner', async () => {
    const user = await h.newUser();
    const before = await h.server.owner.query<{ r: string }>('SELECT p::text AS r FROM audit_personal_data p ORDER BY ref');
    await rejectsWith(
      h.server.owner.query(`UPDATE audit_personal_data SET value = 'someone-else@test.local' WHERE subject_user_id = $1`, [user.id]),
      /audit_personal_data is append-only: UPDATE/,
    );
    await rejectsWith(
      h.server.db.query(`UPDATE audit_personal_data SET value = 'someone-else@test.local' WHERE subject_user_id = $1`, [user.id]),
      /permission denied|append-only/,
    );
    assert.deepEqual(await h.server.owner.query<{ r: string }>('SELECT p::text AS r FROM audit_personal_data p ORDER BY ref'), before);
  });

  test('has no foreign keys, so nothing cascades into it, and deleting a user keeps the records that name them', async () => {
    const fks = await h.server.owner.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_constraint
        WHERE contype = 'f' AND (conrelid = 'audit_log'::regclass OR confrelid = 'audit_log'::regclass)`,
    );
    assert.equal(fks[0]!.n, 0);
    const user = await h.newUser();
    const named = await auditRows(h.server, `resource_type = 'USER' AND resource_id = $1`, [user.id]);
    assert.ok(named.length >= 2, 'CREATE_USER and LOGIN_SUCCESS name the user');
    const res = await h.admin.client.delete(`/api/v1/users/${user.id}`, { token: h.admin.token });
    assert.equal(res.status, 204, res.text);
    const after = await auditRows(h.server, `resource_type = 'USER' AND resource_id = $1`, [user.id]);
    assert.deepEqual(after.map((r) => r.action), [...named.map((r) => r.action), 'DELETE_USER']);
  });

  test('the service runs as teamlog_app, not a superuser, with only INSERT and SELECT on the audit tables', { skip: needsPostgres }, async () => {
    const who = await h.server.db.query<{ cu: string; su: string; rolsuper: boolean }>(
      `SELECT current_user AS cu, current_setting('is_superuser') AS su,
              (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS rolsuper`,
    );
    assert.deepEqual(who[0], { cu: 'teamlog_app', su: 'off', rolsuper: false });
    for (const table of ['audit_log', 'audit_personal_data']) {
      const rows = await h.server.owner.query<Record<string, boolean>>(
        `SELECT has_table_privilege('teamlog_app', $1::text, 'INSERT') AS "insert",
                has_table_privilege('teamlog_app', $1::text, 'SELECT') AS "select",
                has_table_privilege('teamlog_app', $1::text, 'UPDATE') AS "update",
                has_any_column_privilege('teamlog_app', $1::text, 'UPDATE') AS "update_any_column",
                has_table_privilege('teamlog_app', $1::text, 'DELETE') AS "delete",
                has_table_privilege('teamlog_app', $1::text, 'TRUNCATE') AS "truncate",
                has_table_privilege('teamlog_app', $1::text, 'TRIGGER') AS "trigger",
                has_table_privilege('teamlog_app', $1::text, 'REFERENCES') AS "references",
                pg_has_role('teamlog_app', (SELECT relowner FROM pg_class WHERE oid = $1::regclass), 'MEMBER') AS "owner"`,
        [table],
      );
      assert.deepEqual(
        rows[0],
        { insert: true, select: true, update: false, update_any_column: false, delete: false, truncate: false, trigger: false, references: false, owner: false },
        table,
      );
    }
    await rejectsWith(h.server.db.query(`DELETE FROM audit_personal_data`), /permission denied/);
    await rejectsWith(h.server.db.query(`TRUNCATE audit_personal_data`), /permission denied/);
  });

  test('the service role can neither drop, disable nor bypass the append-only triggers', { skip: needsPostgres }, async () => {
    const before = await snapshot();
    const notOwner = /must be owner|permission denied/;
    await rejectsWith(h.server.db.query('DROP TRIGGER audit_log_no_update ON audit_log'), notOwner);
    await rejectsWith(h.server.db.query('DROP TRIGGER audit_log_no_truncate ON audit_log'), notOwner);
    await rejectsWith(h.server.db.query('ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update'), notOwner);
    await rejectsWith(h.server.db.query('ALTER TABLE audit_log DISABLE TRIGGER ALL'), notOwner);
    await rejectsWith(h.server.db.query('ALTER TABLE audit_log DISABLE TRIGGER audit_log_stamp'), notOwner);
    await rejectsWith(h.server.db.query('DROP TABLE audit_log'), notOwner);
    await rejectsWith(h.server.db.query('DROP FUNCTION audit_append_only() CASCADE'), notOwner);
    await rejectsWith(
      h.server.db.query(`CREATE OR REPLACE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$`),
      notOwner,
    );
    await rejectsWith(
      h.server.db.query(`CREATE TRIGGER evil BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_stamp()`),
      notOwner,
    );
    await rejectsWith(
      h.server.db.transaction((tx) => tx.query('SET LOCAL session_replication_role = replica')),
      /permission denied/,
    );
    await rejectsWith(h.server.db.query(`SELECT setval(pg_get_serial_sequence('audit_log', 'id'), 1)`), /permission denied/);
    const triggers = await h.server.owner.query<{ tgname: string; tgenabled: string }>(
      `SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'audit_log'::regclass AND NOT tgisinternal ORDER BY tgname`,
    );
    assert.deepEqual(triggers, [
      { tgname: 'audit_log_no_truncate', tgenabled: 'A' },
      { tgname: 'audit_log_no_update', tgenabled: 'A' },
      { tgname: 'audit_log_stamp', tgenabled: 'O' },
    ]);
    await rejectsWith(h.server.owner.query('DELETE FROM audit_log'), /append-only/);
    assert.deepEqual(await snapshot(), before);
  });

  test(
    'the service connection cannot shed teamlog_app (SET ROLE NONE) to disable the triggers',
    { skip: needsPostgres },
    async () => {
      const before = await snapshot();
      let removed = 0;
      let refusal: unknown;
      // Whatever happens, the transaction rolls back: this test must never delete evidence for real.
      await h.server.db
        .transaction(async (tx) => {
          try {
            await tx.query('SET LOCAL ROLE NONE');
            await tx.query('ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update');
            removed = (await tx.query('DELETE FROM audit_log WHERE id = (SELECT max(id) FROM audit_log) RETURNING id')).length;
          } catch (err) {
            refusal = err;
          }
          throw new Error('rollback');
        })
        .catch(() => undefined);
      assert.deepEqual(await snapshot(), before);
      assert.equal(removed, 0, 'the service connection deleted an audit record (rolled back here)');
      assert.match(String((refusal as Error | undefined)?.message), /permission denied|must be owner/);
      const enabled = await h.server.owner.query(`SELECT 1 FROM pg_trigger WHERE tgname = 'audit_log_no_update' AND tgenabled = 'A'`);
      assert.equal(enabled.length, 1);
    },
  );
});

describe('server-stamped', () => {
  test('an INSERT that forges "timestamp" and xact_id gets the server\'s clock and its own transaction id', async () => {
    const connections: Array<[string, Database]> = [['service', h.server.db], ['owner', h.server.owner]];
    for (const [who, conn] of connections) {
      const result = await conn.transaction(async (tx) => {
        const [row] = await tx.query<{ id: number; ts: string; xact_id: string }>(
          `INSERT INTO audit_log (action, resource_type, result, request_id, "timestamp", xact_id)
           VALUES ('TEST_FORGERY', 'USER', 'SUCCESS', $1, '2000-01-01T00:00:00Z', '12345')
           RETURNING id, "timestamp" AS ts, xact_id::text AS xact_id`,
          [`forgery-${who}`],
        );
        const [now] = await tx.query<{ xact_id: string; started: string; clock: string }>(
          'SELECT pg_current_xact_id()::text AS xact_id, now() AS started, clock_timestamp() AS clock',
        );
        return { row: row!, now: now! };
      });
      const [stored] = await h.server.owner.query<{ ts: string; xact_id: string }>(
        'SELECT "timestamp" AS ts, xact_id::text AS xact_id FROM audit_log WHERE id = $1',
        [result.row.id],
      );
      assert.ok(stored, who);
      assert.equal(stored.xact_id, result.now.xact_id, `${who}: xact_id is the inserting transaction's`);
      assert.notEqual(stored.xact_id, '12345', who);
      assert.ok(Date.parse(stored.ts) >= Date.parse(result.now.started), `${who}: timestamp is not before the transaction began`);
      assert.ok(Date.parse(stored.ts) <= Date.parse(result.now.clock), `${who}: timestamp is not after the insert`);
    }
  });

  test('records of one transaction share its xact_id, and another transaction gets another', async () => {
    const insert = (tx: { query: Database['query'] }, n: number) =>
      tx.query(`INSERT INTO audit_log (action, resource_type, result, request_id) VALUES ('TEST_STAMP', 'USER', 'SUCCESS', $1)`, [`stamp-${n}`]);
    const first = await h.server.db.transaction(async (tx) => {
      await insert(tx, 1);
      await insert(tx, 2);
      return (await tx.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x'))[0]!.x;
    });
    const second = await h.server.db.transaction(async (tx) => {
      await insert(tx, 3);
      return (await tx.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x'))[0]!.x;
    });
    const rows = await h.server.owner.query<{ request_id: string; xact_id: string }>(
      `SELECT request_id, xact_id::text AS xact_id FROM audit_log WHERE action = 'TEST_STAMP' ORDER BY id`,
    );
    assert.deepEqual(rows, [
      { request_id: 'stamp-1', xact_id: first },
      { request_id: 'stamp-2', xact_id: first },
      { request_id: 'stamp-3', xact_id: second },
    ]);
    assert.notEqual(first, second);
  });
});
