// Personal values under verification (docs/audit-integrity.md §1, §5 check 6, §6): the side
// table audit_personal_data lies outside the seal, since erasure deletes from it, so each value
// still stored is checked against the keyed ref its sealed record commits to. A rewrite done
// as the owner (UPDATE is refused even to it, so a delete and an insert) is caught and named;
// a deletion reads as an erasure. And the keys: a rotated secret fails the older values until
// it is given back as a previous one, which `teamlog audit verify` shows on a database of its own.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Queryable } from '../src/db/database.js';
import type { NoteVerifier } from '../src/tlog/signed-note.js';
import { parseVerifierKey } from '../src/tlog/signed-note.js';
import { verifyDatabase } from '../src/modules/audit/evidence/log.verifier.js';
import { assertBad, assertOk, buildLog, rolledBack, settled, verifyRoute } from './helpers/audit-log.js';
import { useCliDatabase, type CliResult } from './helpers/cli.js';
import { createUser, type Session } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { TEST_SIGNING_KEY, type TestServer } from './helpers/server.js';

const ENV = { AUDIT_CHECKPOINT_INTERVAL_MS: '100' };

// ---------------------------------------------------------------------------------------
// Personal values: the side table lies outside the seal (erasure deletes from it), so each
// stored value is checked against the keyed ref its sealed record commits to

/** The personal value a record's metadata field names: its ref, and the row that holds it. */
async function personalValueOf(q: Queryable, recordId: number, field: string) {
  const [row] = await q.query<{ ref: string; subject_user_id: number | null; value: string; salt: Uint8Array | null }>(
    `SELECT p.ref, p.subject_user_id, p.value, p.salt FROM audit_log a JOIN audit_personal_data p ON p.ref = a.metadata -> $2 ->> '$personal' WHERE a.id = $1`,
    [recordId, field],
  );
  assert.ok(row, `record ${recordId} names no stored metadata.${field}`);
  return row;
}

/** Stores another value (or subject) under a ref: what the owner can do, as UPDATE is refused even to it. */
async function rewritePersonalValue(q: Queryable, ref: string, change: { value?: string; subject_user_id?: number | null }): Promise<void> {
  const [row] = await q.query<{ subject_user_id: number | null; value: string; salt: Uint8Array | null }>('DELETE FROM audit_personal_data WHERE ref = $1 RETURNING *', [ref]);
  assert.ok(row);
  await q.query('INSERT INTO audit_personal_data (ref, subject_user_id, value, salt) VALUES ($1, $2, $3, $4)', [
    ref, change.subject_user_id === undefined ? row.subject_user_id : change.subject_user_id, change.value ?? row.value, row.salt,
  ]);
}

describe('a personal value rewritten in its side table (audit_personal_data), which the seal does not cover', () => {
  const h = useTestServer({ env: ENV });
  let anchor: NoteVerifier;
  /** The CREATE_USER records of the two users made here, oldest first (the first admin's comes before). */
  let created: Array<{ id: number; userId: number }>;

  h.before(async () => {
    await createUser(h.server, h.admin);
    await createUser(h.server, h.admin);
    await buildLog(h.server, h.admin, [1]);
    const keys = await h.admin.client.get<Array<{ note_verifier_key: string }>>('/api/v1/audit-logs/public-keys', { token: h.admin.token });
    anchor = parseVerifierKey(keys.body[0]!.note_verifier_key);
    const rows = await h.server.owner.query<{ id: number; resource_id: number }>("SELECT id, resource_id FROM audit_log WHERE action = 'CREATE_USER' ORDER BY id DESC LIMIT 2");
    rows.reverse();
    created = rows.map((r) => ({ id: r.id, userId: r.resource_id }));
  });

  /** The engine as the route runs it, with the service's personal-data keys (or none), in small chunks. */
  const verify = (q: Queryable, personalDataKeys = h.server.deps.secrets.personalDataKeys) =>
    verifyDatabase(q, { anchors: [anchor], origin: anchor.name, personalDataKeys, reads: { chunk: 4, ahead: 2 } });

  test('GET /audit-logs/verify checks every stored value against its record\'s ref, and says how many', async () => {
    const report = await verifyRoute(h.admin);
    assertOk(report);
    const [stored] = await h.server.owner.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_personal_data');
    assert.ok(stored!.n >= 2);
    assert.equal(report.personal_values_checked, stored!.n);
    // UPDATE is refused even to the owner: a rewrite must delete and insert.
    await assert.rejects(h.server.owner.query("UPDATE audit_personal_data SET value = 'x' WHERE ref = $1", [(await personalValueOf(h.server.owner, created[0]!.id, 'email')).ref]), /append-only/);
  });

  test('a value changed under the same ref: first_bad_id is the record naming it, the field named; without keys nothing is checked (null)', async () => {
    const target = created[1]!;
    const report = await rolledBack(h.server.owner, async (q) => {
      assertOk(await verify(q));
      await rewritePersonalValue(q, (await personalValueOf(q, target.id, 'email')).ref, { value: 'attacker@evil.test' });
      const unchecked = await verify(q, []);
      assertOk(unchecked);
      assert.equal(unchecked.personal_values_checked, null);
      return verify(q);
    });
    assertBad(report, target.id, new RegExp(`record ${target.id}: the personal value of metadata\\.email no longer matches the ref the record commits to`));
  });

  test('a value moved to another subject, or two users\' values swapped: first_bad_id is the first record naming one of them', async () => {
    const [first, second] = created as [{ id: number; userId: number }, { id: number; userId: number }];
    const moved = await rolledBack(h.server.owner, async (q) => {
      await rewritePersonalValue(q, (await personalValueOf(q, second.id, 'email')).ref, { subject_user_id: first.userId });
      return verify(q);
    });
    assertBad(moved, second.id, /metadata\.email no longer matches/);
    const swapped = await rolledBack(h.server.owner, async (q) => {
      const [a, b] = [await personalValueOf(q, first.id, 'email'), await personalValueOf(q, second.id, 'email')];
      await rewritePersonalValue(q, a.ref, { value: b.value });
      await rewritePersonalValue(q, b.ref, { value: a.value });
      return verify(q);
    });
    assertBad(swapped, first.id, /metadata\.email no longer matches/);
  });

  test('a value deleted behind the service\'s back reads as an erasure (docs §7): the log verifies, with one value fewer checked', async () => {
    const report = await rolledBack(h.server.owner, async (q) => {
      const before = await verify(q);
      await q.query('DELETE FROM audit_personal_data WHERE ref = $1', [(await personalValueOf(q, created[0]!.id, 'email')).ref]);
      const after = await verify(q);
      assert.equal(after.personal_values_checked, before.personal_values_checked! - 1);
      return after;
    });
    assertOk(report);
    // An erasure by `teamlog audit redact` writes REDACT_PERSONAL_DATA; this one wrote nothing.
    assert.equal((await h.server.owner.query("SELECT 1 FROM audit_log WHERE action = 'REDACT_PERSONAL_DATA'")).length, 0);
  });
});

/**
 * The rotation test's database, which servers and `teamlog audit verify` take turns on (PGlite
 * allows one process at a time). The CLI logs in as an operator runs it (helpers/cli.ts); each
 * run is given its secrets, and nothing else of the file's.
 */
const rotation = useCliDatabase({ prefix: 'teamlog-personal-', env: { AUDIT_SIGNING_KEY: TEST_SIGNING_KEY } });

describe('personal values across a rotation of the secret that keys their refs: `teamlog audit verify`', () => {
  test('checked with the key that wrote them: a rotated JWT_SECRET fails naming the record until AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS holds the old one; AUDIT_PERSONAL_DATA_SECRET keys new refs', async () => {
    const first = 'first-jwt-secret-'.padEnd(48, 'a');
    const rotated = 'rotated-jwt-secret-'.padEnd(48, 'b');
    const dedicated = 'audit-personal-data-secret-'.padEnd(48, 'c');
    /** A server with these secrets for the length of fn, the log settled before it stops. */
    const withSecrets = <T>(env: Record<string, string>, fn: (server: TestServer, admin: Session) => Promise<T>): Promise<T> =>
      rotation.withServer(async (server, admin) => {
        const result = await fn(server, admin);
        await settled(server, admin);
        return result;
      }, { env: { ...ENV, ...env } });
    const cli = (env: Record<string, string>) => rotation.runCli(['audit', 'verify'], env);
    const checkedIn = (r: CliResult) => {
      assert.equal(r.code, 0, r.stdout + r.stderr);
      return Number(/personal values: ([\d,]+) checked/.exec(r.stdout)?.[1]?.replace(/,/g, '') ?? NaN);
    };
    // The oldest record naming a personal value: the first admin's CREATE_USER, or a login failure.
    const oldest = await withSecrets({ JWT_SECRET: first }, async (server, admin) => {
      await createUser(server, admin);
      await createUser(server, admin);
      const [row] = await server.owner.query<{ id: number }>("SELECT min(id)::int AS id FROM audit_log WHERE metadata::text LIKE '%$personal%'");
      return row!.id;
    });
    const before = checkedIn(await cli({ JWT_SECRET: first }));
    assert.ok(before >= 2, `checked ${before}`);

    // Without a key, or with a key none of the values was written with (docs/operations.md, "The
    // command line"): everything else verified, that check said to be not made, exit code 3, and
    // no record called bad.
    const none = await cli({});
    assert.equal(none.code, 3, none.stdout + none.stderr);
    assert.match(none.stdout, /^INCOMPLETE: \d+ records and \d+ checkpoints verified/);
    assert.match(none.stdout, /personal values: not checked: no key to check them with/);

    const wrongKey = await cli({ JWT_SECRET: rotated });
    assert.equal(wrongKey.code, 3, wrongKey.stdout + wrongKey.stderr);
    assert.match(wrongKey.stdout, /personal values: not checked: none of the \d+ stored values looked at matches its ref under the key at hand \(JWT_SECRET\)/);
    assert.doesNotMatch(wrongKey.stdout + wrongKey.stderr, new RegExp(`FAILED|record ${oldest}\\b`));
    assert.equal(checkedIn(await cli({ JWT_SECRET: rotated, AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS: `${'unrelated-secret-'.padEnd(40, 'z')}, ${first}` })), before);

    // A dedicated secret: new refs are keyed with it; those of before, with the JWT secret, still check.
    const newRecord = await withSecrets({ JWT_SECRET: first, AUDIT_PERSONAL_DATA_SECRET: dedicated }, async (server, admin) => {
      await createUser(server, admin);
      const [row] = await server.owner.query<{ id: number }>("SELECT max(id)::int AS id FROM audit_log WHERE action = 'CREATE_USER'");
      return row!.id;
    });
    assert.equal(checkedIn(await cli({ JWT_SECRET: first, AUDIT_PERSONAL_DATA_SECRET: dedicated })), before + 1);
    const withoutDedicated = await cli({ JWT_SECRET: first });
    assert.equal(withoutDedicated.code, 1, withoutDedicated.stdout + withoutDedicated.stderr);
    assert.match(withoutDedicated.stderr, new RegExp(`record ${newRecord}: the personal value of metadata\\.email no longer matches.*\\(first bad record: ${newRecord}\\)`));
  });
});
