// The audit log in OCSF for SIEMs (docs/api.md 4, GET /audit-logs/export?format=ocsf, and 5.9,
// AUDIT_WEBHOOK_FORMAT=ocsf): real actions over HTTP, exported as OCSF 1.8 events and delivered to
// a receiver on the loopback, each event checked against the schema's own files
// (test/fixtures/ocsf-1.8.0, read by helpers/ocsf-validator.ts, itself checked here on events
// broken by hand), each action's class, activity and status held to the mapping the contract
// gives, and the evidence under `unmapped` checked as a SIEM's auditor would: the leaf from the
// sealed form, the audit path to the signed checkpoint the last event carries.
import assert from 'node:assert/strict';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError, loadConfig } from '../src/config.js';
import { AUDIT_ACTIONS, AUDIT_RESULTS } from '../src/domain/audit-vocabulary.js';
import { missingRecordEvent, ocsfEvent } from '../src/modules/audit/evidence/ocsf.mapper.js';
import { recordLeaf, type SealedRecord } from '../src/modules/audit/evidence/record.sealed-form.js';
import { verifyInclusion } from '../src/tlog/merkle.js';
import { openNote, parseCheckpoint, parseVerifierKey } from '../src/tlog/signed-note.js';
import { settled } from './helpers/audit-log.js';
import { ODD_RECORDS, fetchExport, parseNdjsonExport } from './helpers/audit-export.js';
import { Client, assertProblem, createUser, login, loginAdmin, type Session } from './helpers/client.js';
import { createProject, createTask } from './helpers/factories.js';
import { ocsfSchema } from './helpers/ocsf-validator.js';
import { ROOT } from './helpers/paths.js';
import { TEST_SIGNING_KEY, startTestServer, type TestServer } from './helpers/server.js';
import { useCliDatabase } from './helpers/cli.js';

const schema = ocsfSchema();
/** The CLI's export runs on this file's own database, seeded by a server first (PGlite: one process at a time). */
const cli = useCliDatabase({ prefix: 'teamlog-ocsf-cli-', env: { AUDIT_SIGNING_KEY: TEST_SIGNING_KEY } });
const APP_VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

interface OcsfEvent {
  class_uid: number;
  activity_id: number;
  type_uid: number;
  status_id: number;
  status_detail?: string;
  severity_id: number;
  time: number;
  message: string;
  metadata: { version: string; product: { name: string; vendor_name: string; version: string }; uid: string; correlation_uid: string; original_time: string };
  actor: { user?: { uid?: string; name?: string; email_addr?: string }; app_name?: string };
  src_endpoint: { ip?: string; name?: string };
  http_request?: { user_agent?: string; uid?: string };
  user?: { uid?: string; name?: string; email_addr?: string; type_id?: number };
  user_result?: { uid?: string; type_id?: number };
  policy?: { name: string };
  api?: { operation: string };
  unmapped: {
    id: number;
    seq: number | null;
    leaf_hash: string | null;
    audit_path?: string[] | null;
    tree_size?: number;
    metadata: Record<string, unknown>;
    sealed: SealedRecord;
    checkpoint?: { tree_size: number; root_hash: string; note: string; export: { records: number; records_with_proof: number; records_without_proof: number; filters: Record<string, unknown> } };
  };
}

/** Class and activity of each action the tests do, as the contract maps them (docs/api.md 4). */
const EXPECTED: Record<string, { class_uid: number; activity_id: number }> = {
  LOGIN_SUCCESS: { class_uid: 3002, activity_id: 1 },
  LOGIN_FAILURE: { class_uid: 3002, activity_id: 1 },
  LOGOUT: { class_uid: 3002, activity_id: 2 },
  CREATE_USER: { class_uid: 3001, activity_id: 1 },
  CHANGE_USER_ROLE: { class_uid: 3001, activity_id: 7 },
  DEACTIVATE_USER: { class_uid: 3001, activity_id: 5 },
  CREATE_PROJECT: { class_uid: 6003, activity_id: 1 },
  CREATE_TASK: { class_uid: 6003, activity_id: 1 },
  EXPORT_AUDIT_LOG: { class_uid: 6003, activity_id: 2 },
};

/** An export's lines as events, each one checked against the schema. */
function ocsfLines(text: string): OcsfEvent[] {
  if (text === '') return [];
  assert.ok(text.endsWith('\n'), 'NDJSON ends with a newline');
  return text.slice(0, -1).split('\n').map((line, i) => {
    const event = JSON.parse(line) as OcsfEvent;
    assert.deepEqual(schema.validate(event), [], `line ${i + 1} (record ${event.unmapped?.id}) is a valid OCSF ${schema.version} event`);
    return event;
  });
}

/** A valid Authentication event, written by hand from the schema: the base the broken ones below start from. */
function validLogon(): Record<string, any> {
  return {
    class_uid: 3002, class_name: 'Authentication', category_uid: 3, category_name: 'Identity & Access Management',
    activity_id: 1, activity_name: 'Logon', type_uid: 300201, type_name: 'Authentication: Logon',
    severity_id: 1, status_id: 1, time: 1795335330512,
    metadata: { version: '1.8.0', product: { name: 'Teamlog', vendor_name: 'Teamlog', version: '0.1.0' }, uid: '7' },
    actor: { user: { uid: '3', email_addr: 'ada@example.com' } },
    user: { uid: '3' },
    service: { name: 'Teamlog' },
    src_endpoint: { ip: '203.0.113.24' },
    unmapped: { anything: { goes: [1, 'two', null] } },
  };
}

describe('the OCSF validator (helpers/ocsf-validator.ts)', () => {
  test('passes an event written by hand from the schema, and refuses each of its hand-broken copies, naming the problem', () => {
    assert.deepEqual(schema.validate(validLogon()), []);
    const broken: Array<[string, (e: Record<string, any>) => void, RegExp]> = [
      ['an attribute the class does not have', (e) => (e.nickname = 'x'), /^nickname: authentication has no such attribute/],
      ['an attribute an object does not have', (e) => (e.actor.user.shoe_size = 42), /^actor\.user\.shoe_size: user has no such attribute/],
      ['a required attribute missing', (e) => delete e.user, /^user: required by authentication, missing/],
      ['a required attribute of an object missing', (e) => delete e.metadata.product, /^metadata\.product: required by metadata, missing/],
      ['a string where a long is wanted', (e) => (e.time = '2026-11-22'), /^time: "2026-11-22" is not a long_t/],
      ['a number where a string is wanted', (e) => (e.actor.user.uid = 3), /^actor\.user\.uid: 3 is not a string_t/],
      ['an object where a scalar is wanted', (e) => (e.message = { text: 'x' }), /^message: \{"text":"x"\} is not a string_t/],
      ['an activity outside the enum', (e) => Object.assign(e, { activity_id: 42, type_uid: 300242, activity_name: undefined, type_name: undefined }), /^activity_id: 42 is not one of/],
      ['a severity outside the enum', (e) => (e.severity_id = 9), /^severity_id: 9 is not one of/],
      ['an object\'s enum value outside its list', (e) => (e.user.type_id = 7), /^user\.type_id: 7 is not one of/],
      ['a caption that is not its id\'s', (e) => (e.activity_name = 'Logoff'), /^activity_name: "Logoff" is not the caption of activity_id 1/],
      ['a type_uid that is not class_uid·100 + activity_id', (e) => (e.type_uid = 300202), /type_uid/],
      ['another class\'s uid', (e) => (e.class_uid = 4242), /^class_uid: 4242 is no class/],
      ['a category that is not the class\'s', (e) => (e.category_uid = 6), /^category_uid: 6 is not one of 3/],
      ['an email that is not one', (e) => (e.actor.user.email_addr = '[redacted]'), /^actor\.user\.email_addr: "\[redacted\]" does not match email_t/],
      ['an IP address that is not one', (e) => (e.src_endpoint.ip = 'localhost'), /^src_endpoint\.ip: "localhost" does not match ip_t/],
      ['a profile\'s attribute without the profile', (e) => (e.cloud = { provider: 'x' }), /^cloud: belongs to the profile cloud/],
      ['an object that meets none of its at_least_one', (e) => (e.actor = {}), /^actor: actor needs at least one of/],
      ['a class constraint unmet', (e) => delete e.service, /authentication needs at least one of service, dst_endpoint/],
      ['an array where one value is wanted', (e) => (e.user = [{ uid: '3' }]), /^user: an array where user is wanted/],
      ['one value where an array is wanted', (e) => (e.metadata.labels = 'audit'), /^metadata\.labels: not an array/],
      ['a null', (e) => (e.message = null), /^message: null/],
    ];
    for (const [what, breakIt, expected] of broken) {
      const event = validLogon();
      breakIt(event);
      const problems = schema.validate(JSON.parse(JSON.stringify(event)));
      assert.ok(problems.some((p) => expected.test(p)), `${what}: expected ${expected}, got ${JSON.stringify(problems)}`);
    }
    // A profile's attributes count once the event names the profile (the cloud profile requires `cloud`'s provider).
    const withProfile = { ...validLogon(), cloud: { provider: 'AWS' }, metadata: { ...validLogon().metadata, profiles: ['cloud'] } };
    assert.deepEqual(schema.validate(withProfile), []);
  });
});

describe('the mapping (ocsf.mapper.ts)', () => {
  test('every action of the vocabulary, succeeded, failed or refused, by a user or by nobody, over HTTP or from the CLI, is a valid event; so is a seal whose record is gone', () => {
    const classes = new Set<number>();
    for (const action of AUDIT_ACTIONS) {
      for (const result of AUDIT_RESULTS) {
        for (const [actorId, ip, resourceId] of [[7, '2001:db8::1', 9], [null, null, null]] as const) {
          const record: SealedRecord = {
            id: 41, actor_id: actorId, action, resource_type: action.includes('PROJECT') ? 'PROJECT' : action.includes('TASK') ? 'TASK' : 'USER', resource_id: resourceId,
            timestamp: '2026-11-22T08:15:30.512Z', result, ip, user_agent: ip && 'curl/8.5.0', request_id: 'req-41',
            metadata: { email: 'ada@example.com', oldEmail: '[redacted]', newEmail: 'ada@example.org', oldRole: 'USER', newRole: 'ADMIN', role: 'ADMIN', reason: 'because', sessionId: 's-1' },
          };
          const event = ocsfEvent({ record, sealed: record, seq: 40, leaf_hash: 'n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=' }) as unknown as OcsfEvent;
          assert.deepEqual(schema.validate(event), [], `${action} ${result} by ${actorId ?? 'nobody'}`);
          classes.add(event.class_uid);
        }
      }
    }
    assert.deepEqual([...classes].sort(), [3001, 3002, 6003]);
    assert.deepEqual(schema.validate(missingRecordEvent(41, 40, 'n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=')), []);
  });
});

describe('GET /audit-logs/export?format=ocsf', () => {
  let server: TestServer;
  let admin: Session;
  let bob: Session;
  let carol: Session;
  const exportsMade: string[] = [];

  before(async () => {
    server = await startTestServer({ env: { AUDIT_CHECKPOINT_INTERVAL_MS: '100' } });
    admin = await loginAdmin(server);
    // CREATE_USER twice and LOGIN_SUCCESS twice; then a wrong password (LOGIN_FAILURE) and an unknown email (LOGIN_FAILURE, no actor).
    bob = await createUser(server, admin, { name: 'Bob' });
    carol = await createUser(server, admin, { name: 'Carol' });
    const stranger = new Client(server);
    assert.equal((await stranger.post('/api/v1/auth/login', { email: bob.email, password: 'not his password' })).status, 401);
    assert.equal((await stranger.post('/api/v1/auth/login', { email: 'nobody-here@test.local', password: 'whatever-it-is' })).status, 401);
    // CHANGE_USER_ROLE, DEACTIVATE_USER, CREATE_PROJECT, CREATE_TASK.
    const role = await admin.client.put(`/api/v1/users/${bob.id}/role`, { role: 'ADMIN' }, { token: admin.token });
    assert.equal(role.status, 200, role.text);
    const project = await createProject(admin, { name: 'Apollo' });
    await createTask(admin, project.id, { title: 'Fix login' });
    // A refusal: a USER may not create users (DENIED CREATE_USER).
    const refused = await carol.client.post('/api/v1/users', { email: 'nope@test.local', name: 'Nope', password: 'long-enough-pw', role: 'USER' }, { token: carol.token });
    assert.equal(refused.status, 403, refused.text);
    // LOGOUT, then Carol's account deactivated.
    assert.equal((await carol.client.post('/api/v1/auth/logout', undefined, { token: carol.token })).status, 204);
    assert.equal((await admin.client.put(`/api/v1/users/${carol.id}/active`, { active: false }, { token: admin.token })).status, 200);
    await settled(server, admin);
  });

  after(async () => {
    await server?.close();
  });

  const exportRecords = () =>
    server.owner.query<{ id: number; actor_id: number | null; metadata: Record<string, unknown>; request_id: string }>(
      "SELECT id, actor_id, metadata, request_id FROM audit_log WHERE action = 'EXPORT_AUDIT_LOG' ORDER BY id",
    );

  async function ocsfExport(query = '') {
    const res = await fetchExport(server, admin, `format=ocsf${query ? `&${query}` : ''}`);
    exportsMade.push(res.requestId);
    return { ...res, events: ocsfLines(res.text) };
  }

  test('every line is a valid OCSF event of the class, activity and status its action maps to, with who, where, when and which request', async () => {
    const { type, events } = await ocsfExport();
    assert.match(type, /^application\/x-ndjson/);
    // The same records as the NDJSON export, read after it (its own EXPORT_AUDIT_LOG aside): the API's form of each.
    const ndjson = parseNdjsonExport((await fetchExport(server, admin)).text);
    const api = new Map(ndjson.records.map((r) => [r.record.id, r.record]));
    const stored = await server.owner.query<{ id: number }>('SELECT id FROM audit_log ORDER BY id');
    const exported = events.map((e) => e.unmapped.id);
    assert.deepEqual([...exported].sort((a, b) => a - b), stored.map((r) => r.id).filter((id) => id <= Math.max(...exported)), 'every record once');
    const seen = new Set<string>();
    for (const e of events) {
      const record = api.get(e.unmapped.id)!;
      assert.ok(record, `record ${e.unmapped.id} is in the NDJSON export too`);
      const expected = EXPECTED[record.action];
      assert.ok(expected, `the test expects no ${record.action}`);
      seen.add(`${record.action}/${record.result}`);
      assert.equal(e.class_uid, expected.class_uid, `${record.action}: class`);
      assert.equal(e.activity_id, expected.activity_id, `${record.action}: activity`);
      assert.equal(e.type_uid, e.class_uid * 100 + e.activity_id);
      assert.equal(e.status_id, record.result === 'SUCCESS' ? 1 : 2, `${record.action} ${record.result}: status`);
      if (record.result === 'DENIED') assert.match(e.status_detail ?? '', /^DENIED/);
      assert.equal(e.severity_id, record.result === 'SUCCESS' ? 1 : 2);
      assert.equal(e.time, Date.parse(record.timestamp), 'time: ms since the epoch');
      assert.equal(e.metadata.original_time, record.timestamp);
      assert.equal(e.metadata.uid, String(record.id));
      assert.equal(e.metadata.correlation_uid, record.request_id);
      assert.equal(e.metadata.version, '1.8.0');
      assert.deepEqual(e.metadata.product, { name: 'Teamlog', vendor_name: 'Teamlog', version: APP_VERSION });
      assert.equal(e.src_endpoint.ip, record.ip ?? undefined);
      assert.equal(e.http_request?.user_agent, record.user_agent ?? undefined);
      assert.ok(e.message.length > 0 && e.message.length < 200 && e.message.endsWith('.'), `a short sentence: ${e.message}`);
      if (record.actor_id !== null) assert.equal(e.actor.user?.uid, String(record.actor_id));
      if (e.class_uid === 6003) assert.equal(e.api?.operation, record.action, 'API Activity names the operation');
      if (e.class_uid !== 6003) assert.equal(e.user?.uid ?? null, record.resource_id === null ? null : String(record.resource_id), 'the account acted on');
    }
    assert.deepEqual(
      [...seen].sort(),
      ['CHANGE_USER_ROLE/SUCCESS', 'CREATE_PROJECT/SUCCESS', 'CREATE_TASK/SUCCESS', 'CREATE_USER/DENIED', 'CREATE_USER/SUCCESS', 'DEACTIVATE_USER/SUCCESS',
        'EXPORT_AUDIT_LOG/SUCCESS', 'LOGIN_FAILURE/FAILURE', 'LOGIN_SUCCESS/SUCCESS', 'LOGOUT/SUCCESS'],
      'the export holds every kind of action done',
    );
    // What each class says of its account: the failed logins name the typed email, the role change before and after.
    const byAction = (action: string) => events.filter((e) => api.get(e.unmapped.id)!.action === action);
    const [wrongPassword, unknownEmail] = byAction('LOGIN_FAILURE');
    assert.equal(wrongPassword!.user?.uid, String(bob.id));
    assert.equal(wrongPassword!.user?.email_addr, bob.email);
    assert.equal(wrongPassword!.status_detail, 'bad_password');
    assert.deepEqual(unknownEmail!.actor, { user: { name: 'nobody-here@test.local', email_addr: 'nobody-here@test.local' } });
    const [roleChange] = byAction('CHANGE_USER_ROLE');
    assert.deepEqual([roleChange!.user?.type_id, roleChange!.user_result?.type_id, roleChange!.policy?.name], [1, 2, 'ADMIN']);
    const created = byAction('CREATE_USER').find((e) => e.user?.uid === String(carol.id));
    assert.equal(created?.user?.email_addr, carol.email);
  });

  test("each event's unmapped keeps the record's id, seq, leaf hash, audit path and sealed form: the leaf recomputes and the path leads to the signed checkpoint the last event carries", async () => {
    const { events } = await ocsfExport();
    const last = events[events.length - 1]!;
    const checkpoint = last.unmapped.checkpoint;
    assert.ok(checkpoint, 'the last event carries the checkpoint');
    assert.deepEqual(events.slice(0, -1).filter((e) => e.unmapped.checkpoint), [], 'and no other');
    // The checkpoint's note, signed by the log's key; its tree size and root as the JSON says.
    const keys = await admin.client.get<Array<{ note_verifier_key: string }>>('/api/v1/audit-logs/public-keys', { token: admin.token });
    const opened = openNote(checkpoint.note, keys.body.map((k) => parseVerifierKey(k.note_verifier_key)));
    assert.ok(opened.signatures.some((s) => s.verifiedBy), 'the note verifies under the log\'s key');
    const signed = parseCheckpoint(opened.text);
    assert.equal(signed.treeSize, checkpoint.tree_size);
    assert.equal(signed.rootHash.toString('base64'), checkpoint.root_hash);

    const proven = events.filter((e) => e.unmapped.seq !== null);
    const pending = events.filter((e) => e.unmapped.seq === null);
    assert.deepEqual(events, [...proven, ...pending], 'the records with a proof first');
    assert.deepEqual(proven.map((e) => e.unmapped.seq), [...Array(checkpoint.tree_size).keys()], 'unfiltered: every seq of the checkpoint\'s tree, in order');
    for (const e of proven) {
      const u = e.unmapped;
      assert.equal(u.sealed.id, u.id);
      assert.equal(u.tree_size, checkpoint.tree_size);
      const leaf = recordLeaf(u.sealed);
      assert.equal(leaf.toString('base64'), u.leaf_hash, `record ${u.id}: the leaf is the hash of the sealed form`);
      assert.ok(verifyInclusion(leaf, u.seq!, checkpoint.tree_size, u.audit_path!.map((h) => Buffer.from(h, 'base64')), signed.rootHash), `record ${u.id}: the proof`);
    }
    for (const e of pending) {
      assert.deepEqual([e.unmapped.seq, e.unmapped.leaf_hash, e.unmapped.audit_path], [null, null, null]);
      assert.equal(e.unmapped.sealed.id, e.unmapped.id);
    }
    assert.deepEqual(
      { records: checkpoint.export.records, with: checkpoint.export.records_with_proof, without: checkpoint.export.records_without_proof },
      { records: events.length, with: proven.length, without: pending.length },
    );
  });

  test('a filtered OCSF export holds the records and order of the NDJSON export with the same filters, the checkpoint last', async () => {
    const query = 'action=LOGIN_SUCCESS&action=LOGIN_FAILURE&action=CREATE_USER&action=CREATE_TASK';
    const { events } = await ocsfExport(query);
    const ndjson = parseNdjsonExport((await fetchExport(server, admin, query)).text);
    assert.deepEqual(events.map((e) => [e.unmapped.id, e.unmapped.seq]), ndjson.records.map((r) => [r.record.id, r.seq]));
    assert.ok(events.length >= 7);
    assert.deepEqual(events.at(-1)!.unmapped.checkpoint!.export.filters, { action: ['LOGIN_SUCCESS', 'LOGIN_FAILURE', 'CREATE_USER', 'CREATE_TASK'] });
    // Nothing matches: an empty file, with no event to carry a checkpoint and no proof to check.
    const none = await ocsfExport('actor_id=999999');
    assert.equal(none.text, '');
  });

  test('writes one EXPORT_AUDIT_LOG per export, with format "ocsf", by the admin and the request; the file is named audit-log.ocsf.ndjson', async () => {
    const before = await exportRecords();
    const res = await fetch(`${server.url}/api/v1/audit-logs/export?format=ocsf&action=LOGOUT`, { headers: { authorization: `Bearer ${admin.token}` } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-disposition'), 'attachment; filename="audit-log.ocsf.ndjson"');
    const events = ocsfLines(await res.text());
    assert.equal(events.length, 1);
    const records = await exportRecords();
    assert.equal(records.length, before.length + 1, 'exactly one record');
    const record = records.at(-1)!;
    assert.deepEqual(record.metadata, { format: 'ocsf', filters: { action: ['LOGOUT'] } });
    assert.equal(record.actor_id, admin.id);
    assert.equal(record.request_id, res.headers.get('x-request-id'));
  });

  test('HEAD answers the headers GET would, and exports and records nothing', async () => {
    const before = (await exportRecords()).length;
    const res = await fetch(`${server.url}/api/v1/audit-logs/export?format=ocsf`, { method: 'HEAD', headers: { authorization: `Bearer ${admin.token}` } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/x-ndjson/);
    assert.equal(res.headers.get('content-disposition'), 'attachment; filename="audit-log.ocsf.ndjson"');
    assert.equal(await res.text(), '');
    await sleep(50);
    assert.equal((await exportRecords()).length, before);
  });

  // Last: it adds records the tests above do not expect.
  test('records only someone writing behind the service\'s back stores (odd timestamps, no actor, no address, an action outside the vocabulary) are valid events too', async () => {
    await server.owner.query('ALTER TABLE audit_log DISABLE TRIGGER audit_log_stamp');
    try {
      for (const r of ODD_RECORDS) {
        await server.owner.query(
          `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, "timestamp", result, metadata, ip, user_agent, request_id)
           VALUES ($1, 'UPDATE_TASK', 'TASK', $2, $3, 'SUCCESS', $4, $5, $6, $7)`,
          [r.actor ? admin.id : null, r.resource_id, r.timestamp, JSON.stringify(r.metadata), r.ip, r.user_agent, r.request_id],
        );
      }
    } finally {
      await server.owner.query('ALTER TABLE audit_log ENABLE TRIGGER audit_log_stamp');
    }
    await settled(server, admin);
    const { events } = await ocsfExport('resource_type=TASK');
    const odd = events.filter((e) => e.unmapped.sealed.action === 'UPDATE_TASK');
    assert.equal(odd.length, ODD_RECORDS.length);
    // An action outside the vocabulary is API Activity by its verb; times as PostgreSQL wrote them, read exactly.
    assert.deepEqual(new Set(odd.map((e) => `${e.class_uid}/${e.activity_id}`)), new Set(['6003/3']));
    assert.deepEqual(
      odd.map((e) => e.time),
      [Date.UTC(2026, 0, 2, 3, 4, 5), Date.UTC(2026, 0, 2, 3, 4, 5, 999), Date.UTC(-43, 2, 15, 12), Date.UTC(10000, 0, 1), 8.64e15, Date.UTC(999, 11, 31, 23, 59, 59, 123), Date.UTC(2026, 0, 2, 3, 4, 5)],
    );
    assert.deepEqual(odd.map((e) => e.metadata.original_time), odd.map((e) => e.unmapped.sealed.timestamp));
    const cli = odd.find((e) => e.unmapped.sealed.ip === null)!;
    assert.deepEqual([cli.actor, cli.src_endpoint], [{ app_name: 'teamlog-cli' }, { name: 'teamlog-cli' }]);
  });

  test('an unknown format is 400 problem+json, and records nothing', async () => {
    const before = (await exportRecords()).length;
    const res = await admin.client.get('/api/v1/audit-logs/export?format=leef', { token: admin.token });
    assertProblem(res, 400, 'VALIDATION_FAILED');
    assert.match(res.body.detail, /format/);
    assert.equal((await exportRecords()).length, before);
  });
});

describe('teamlog audit export --format ocsf', () => {
  test('writes the route\'s OCSF events to a file, its own record (no actor, no address) among them, the checkpoint in the last; another format is a usage error', async () => {
    await cli.withServer(async (server, admin) => {
      await createProject(admin, { name: 'From the CLI' });
      await settled(server, admin);
    }, { env: { AUDIT_CHECKPOINT_INTERVAL_MS: '100' } });
    const file = path.join(cli.dataDir, 'audit.ocsf.ndjson');
    const run = await cli.runCli(['audit', 'export', '--format', 'ocsf', '--output', file]);
    assert.equal(run.code, 0, run.stdout + run.stderr);
    const events = ocsfLines(readFileSync(file, 'utf8'));
    const checkpoint = events.at(-1)!.unmapped.checkpoint!;
    const root = Buffer.from(checkpoint.root_hash, 'base64');
    for (const { unmapped: u } of events.filter((e) => e.unmapped.seq !== null)) {
      assert.ok(verifyInclusion(recordLeaf(u.sealed), u.seq!, checkpoint.tree_size, u.audit_path!.map((h) => Buffer.from(h, 'base64')), root), `record ${u.id}: the proof`);
    }
    const own = events.filter((e) => e.unmapped.sealed.action === 'EXPORT_AUDIT_LOG');
    assert.equal(own.length, 1);
    assert.deepEqual([own[0]!.class_uid, own[0]!.activity_id, own[0]!.actor, own[0]!.src_endpoint], [6003, 2, { app_name: 'teamlog-cli' }, { name: 'teamlog-cli' }]);
    assert.deepEqual(own[0]!.unmapped.metadata, { format: 'ocsf', filters: {} });
    const wrong = await cli.runCli(['audit', 'export', '--format', 'leef']);
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /--format must be ndjson, csv or ocsf/);
  });
});

describe('AUDIT_WEBHOOK_FORMAT', () => {
  const SECRET = 'ocsf-webhook-secret-0123456789abcdef';

  test('any value but teamlog or ocsf stops the start, naming the setting', () => {
    assert.equal(loadConfig({}).auditWebhookFormat, 'teamlog');
    assert.equal(loadConfig({ AUDIT_WEBHOOK_FORMAT: 'ocsf' }).auditWebhookFormat, 'ocsf');
    assert.throws(() => loadConfig({ AUDIT_WEBHOOK_FORMAT: 'OCSF-1' }), (err: unknown) => err instanceof ConfigError && /AUDIT_WEBHOOK_FORMAT must be "teamlog".*or "ocsf".*got "OCSF-1"/.test(err.message));
  });

  describe('=ocsf', () => {
    let server: TestServer;
    let receiver: http.Server;
    const batches: Array<{ type: string; records: OcsfEvent[]; checkpoint?: { tree_size: number; root_hash: string } }> = [];
    let badSignatures = 0;

    before(async () => {
      receiver = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          if (!signedWith(SECRET, req.headers['x-teamlog-signature'], body)) badSignatures++;
          batches.push(JSON.parse(body) as (typeof batches)[number]);
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      const { port } = receiver.address() as { port: number };
      server = await startTestServer({
        env: { AUDIT_CHECKPOINT_INTERVAL_MS: '100', AUDIT_WEBHOOK_URL: `http://127.0.0.1:${port}/siem`, AUDIT_WEBHOOK_SECRET: SECRET, AUDIT_WEBHOOK_FORMAT: 'ocsf' },
        hooks: { webhookTuning: { retryBaseMs: 20, retryCapMs: 250, timeoutMs: 2000, leaseMs: 1500, pollMs: 150 } },
      });
    });

    after(async () => {
      await server?.close();
      await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
    });

    test('delivers every sealed record as a valid OCSF event, in seq order, signed, with the checkpoints that prove them', async () => {
      const admin = await loginAdmin(server);
      const dora = await createUser(server, admin, { name: 'Dora' });
      await login(server, dora.email, dora.password);
      await createProject(dora, { name: 'Streamed' });
      const cp = await settled(server, admin);
      // Delivered: the receiver holds every seq up to the checkpoint's size, and that checkpoint.
      for (let i = 0; i < 300 && !batches.some((b) => b.checkpoint?.tree_size === cp.tree_size); i++) await sleep(50);
      assert.ok(batches.some((b) => b.checkpoint?.tree_size === cp.tree_size), 'the newest checkpoint arrived');
      assert.equal(badSignatures, 0, 'every body is signed with the secret');

      const leaves: Buffer[] = [];
      const actions: string[] = [];
      for (const batch of batches) {
        assert.equal(batch.type, 'audit-batch');
        for (const event of batch.records) {
          assert.deepEqual(schema.validate(event), [], `seq ${event.unmapped.seq}: a valid OCSF event`);
          const { seq, leaf_hash: leafHash, sealed, id } = event.unmapped;
          assert.ok(seq !== null && seq <= leaves.length, `seq ${seq} in order`);
          const leaf = recordLeaf(sealed);
          assert.equal(leaf.toString('base64'), leafHash, 'the leaf is the hash of the sealed form');
          assert.equal(event.metadata.uid, String(id));
          if (seq === leaves.length) {
            leaves.push(leaf);
            actions.push(sealed.action);
            const expected = EXPECTED[sealed.action]!;
            assert.deepEqual([event.class_uid, event.activity_id], [expected.class_uid, expected.activity_id], sealed.action);
          } else assert.deepEqual(leaf, leaves[seq], `a duplicate of seq ${seq} says the same`);
        }
        if (batch.checkpoint) {
          assert.ok(batch.checkpoint.tree_size <= leaves.length, 'a checkpoint comes with or after the records it covers');
          assert.equal(treeRoot(leaves.slice(0, batch.checkpoint.tree_size)).toString('base64'), batch.checkpoint.root_hash, 'its root is the tree of the delivered records');
        }
      }
      assert.equal(leaves.length, cp.tree_size);
      for (const action of ['LOGIN_SUCCESS', 'CREATE_USER', 'CREATE_PROJECT']) assert.ok(actions.includes(action), action);
    });
  });
});

/** `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`, t recent. */
function signedWith(secret: string, header: string | string[] | undefined, body: string): boolean {
  const m = typeof header === 'string' ? /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header) : null;
  if (!m || Math.abs(Date.now() / 1000 - Number(m[1])) > 300) return false;
  return timingSafeEqual(createHmac('sha256', secret).update(`${m[1]}.${body}`).digest(), Buffer.from(m[2]!, 'hex'));
}

/** RFC 6962 §2.1: the Merkle Tree Hash of these leaf hashes. */
function treeRoot(leaves: Buffer[]): Buffer {
  if (leaves.length === 1) return leaves[0]!;
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return createHash('sha256').update(Buffer.concat([Buffer.from([1]), treeRoot(leaves.slice(0, k)), treeRoot(leaves.slice(k))])).digest();
}
