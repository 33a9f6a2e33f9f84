// Runs INSIDE the previous release's tree (test/helpers/old-release.ts runInRelease copies it to
// the same place there), so every relative import below is THAT release's code: it opens the
// database the upgrade test made, starts the old app on it, uses it as a team would, waits
// until the audit log is sealed and signed, and saves what an operator or a client would hold
// from the old release: the last checkpoint note, the public key, a full NDJSON export, and a
// manifest (sizes, credentials, record ids and bodies, the last event_id a client saw). Then it
// makes more events and audited actions, and closes the app and its connections (the database
// is kept) for test/upgrade.test.ts to open it with the new code.
//
// Environment (exactly, from the test): UPGRADE_OUT (output directory), UPGRADE_DB_NAME,
// UPGRADE_SERVER_ENV (JSON: the app's settings, the same on both sides of the upgrade), and
// UPGRADE_PGLITE_DIR (a PGlite data directory) or UPGRADE_DATABASE_URL (an empty PostgreSQL
// database, the owner's URL); TEST_DB, TEST_DATABASE_URL, TEST_REDIS_URL for the helpers.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { databaseSession, migrate, migratePostgres } from '../../src/db/migrate.js';
import { createPgliteDatabase } from '../../src/db/pglite.js';
import { APP_ROLE, createPostgresDatabase } from '../../src/db/postgres.js';
import { settled, type CheckpointJson } from '../helpers/audit-log.js';
import { Client, createUser, loginAdmin, type Session } from '../helpers/client.js';
import { addMember, allPages, createProject, createTask, postMessage, uniqueWord, type AuditRecordBody } from '../helpers/factories.js';
import { SERVICE_LOGIN, startTestServer, type TestDatabase, type TestServer } from '../helpers/server.js';
import { connectRecording, type Received } from '../helpers/sockets.js';

/** Events a reconnecting client gets replayed (README, Real-time): the others carry no stored event_id. */
const REPLAYABLE = ['new-message', 'new-notification', 'post-liked', 'task-created', 'task-updated', 'task-deleted'];

export interface Credentials { id: number; email: string; password: string }
export interface ReplayEvent { name: string; payload: Record<string, unknown> }

/** What the old release leaves for the new one to be checked against (manifest.json). */
export interface UpgradeManifest {
  /** The log's origin and the id of the key that signed the saved checkpoint. */
  origin: string;
  keyId: string;
  /** The saved checkpoint (old.note): every record then was sealed and covered by it. */
  sealedSize: number;
  rootHash: string;
  /** What GET /audit-logs/verify said then. */
  checkpointCount: number;
  recordCount: number;
  /** Every record the saved checkpoint covers, with its seq and leaf hash (from its inclusion proof). */
  sealed: Array<{ id: number; seq: number; leaf_hash: string }>;
  /** Every record when the old app closed (the later ones too, perhaps not sealed yet). */
  recordIds: number[];
  /** A few records as GET /audit-logs/:id showed them (personal data among them). */
  records: AuditRecordBody[];
  /** The address a failed login named, belonging to no user. */
  strangerEmail: string;
  auditor: Credentials;
  owner: Credentials;
  member: Credentials;
  projectId: number;
  /** A task of the project, IN_REVIEW when the old app closed. */
  taskId: number;
  /** The last event_id the member's client received before it disconnected. */
  lastEventIdSeen: number;
  /** What the old release did after that, and every replayable event of the member's rooms after it, in order. */
  afterSeen: { messageIds: number[]; taskId: number; events: ReplayEvent[] };
  /** The newest event_id of the old release (a client connected at the end was told it). */
  newestEventId: number;
  /** The export: how many records it holds and the size of its checkpoint. */
  export: { records: number; treeSize: number };
}

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

/** The database the test made, migrated by this release; `drop` only closes the connections. */
async function openDatabase(name: string): Promise<TestDatabase> {
  const pgliteDir = process.env.UPGRADE_PGLITE_DIR;
  if (pgliteDir) {
    const db = await createPgliteDatabase(pgliteDir, () => {});
    await migrate(databaseSession(db));
    return { name, db, owner: db, databaseUrl: undefined, drop: () => db.close() };
  }
  const url = required('UPGRADE_DATABASE_URL');
  await migratePostgres(url);
  // The service login (a member of teamlog_app) exists: the test made it before running this script.
  const serviceUrl = Object.assign(new URL(url), { username: SERVICE_LOGIN, password: '' }).toString();
  const db = createPostgresDatabase({ url: serviceUrl, poolSize: 10, role: APP_ROLE, onError: () => {} });
  const owner = createPostgresDatabase({ url, poolSize: 3, onError: () => {} });
  return { name, db, owner, databaseUrl: url, drop: async () => void (await Promise.all([db.close(), owner.close()])) };
}

const replayable = (events: Received[]) => events.filter((e) => REPLAYABLE.includes(e.name) && typeof e.payload.event_id === 'number');

async function ok<T = any>(res: Promise<{ status: number; text: string; body: T }>, status = 200): Promise<T> {
  const r = await res;
  assert.equal(r.status, status, r.text);
  return r.body;
}

async function fill(server: TestServer, out: string): Promise<UpgradeManifest> {
  const admin = await loginAdmin(server);
  const auditorPassword = `auditor-password-${uniqueWord()}`;
  const auditor = await createUser(server, admin, { role: 'ADMIN', name: 'Upgrade Auditor', email: `auditor-${uniqueWord()}@upgrade.test`, password: auditorPassword });
  const as = (s: Session) => ({ token: s.token });
  const owner = await createUser(server, auditor, { name: 'Olga Owner', password: 'owner-password-long' });
  const member = await createUser(server, auditor, { name: 'Max Member', password: 'member-password-long' });

  // Failed logins: one naming an address nobody has (personal data with no subject), one a wrong password.
  const strangerEmail = `stranger-${uniqueWord()}@upgrade.test`;
  await ok(new Client(server).post('/api/v1/auth/login', { email: strangerEmail, password: 'not-the-password' }), 401);
  await ok(new Client(server).post('/api/v1/auth/login', { email: member.email, password: 'not-the-password' }), 401);
  // An ADMIN changes the owner's email (UPDATE_USER_EMAIL, old and new address personal).
  const ownerEmail = `olga-${uniqueWord()}@upgrade.test`;
  await ok(auditor.client.put(`/api/v1/users/${owner.id}`, { email: ownerEmail }, as(auditor)));

  const project = await createProject(owner, { name: `Upgrade ${uniqueWord()}`, description: 'made by the previous release' });
  await addMember(owner, project.id, member.id);
  // A refusal: a MEMBER may not delete the project (DENIED).
  await ok(member.client.delete(`/api/v1/projects/${project.id}`, as(member)), 403);

  // The member's client, which will reconnect to the new release with the last event_id it saw,
  // and a witness of the same member that stays connected: what its rooms got after that.
  const client = await connectRecording(member);
  const witness = await connectRecording(member);
  const task = await createTask(owner, project.id, { title: `Upgrade task ${uniqueWord()}` });
  await ok(owner.client.put(`/api/v1/tasks/${task.id}/assignee`, { assignee_id: member.id }, as(owner)));
  await ok(owner.client.put(`/api/v1/tasks/${task.id}/status`, { status: 'IN_PROGRESS' }, as(owner)));
  await postMessage(owner, `project:${project.id}`, `before the upgrade ${uniqueWord()}`);
  const seen = await postMessage(member, 'general', `seen by the client ${uniqueWord()}`);
  await client.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === seen.id, 10_000);
  const received = replayable(client.rec.events);
  const lastEventIdSeen = Math.max(...received.map((e) => e.payload.event_id as number));
  assert.ok(received.some((e) => e.name === 'task-updated' && e.payload.id === task.id), 'the client saw the task change');
  client.socket.close();

  // Sealed and signed; an export; sealed and signed again (the export's own record too).
  await settled(server, auditor);
  const exported = await auditor.client.get('/api/v1/audit-logs/export', as(auditor));
  assert.equal(exported.status, 200, exported.text);
  const exportLines = exported.text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, any>);
  const trailer = exportLines.at(-1)!;
  assert.equal(trailer.type, 'checkpoint', 'the export ends with its checkpoint');
  writeFileSync(path.join(out, 'old-export.ndjson'), exported.text);

  await settled(server, auditor);
  const checkpoint = await ok<CheckpointJson>(auditor.client.get('/api/v1/audit-logs/checkpoints/latest', as(auditor)));
  const note = await auditor.client.get('/api/v1/audit-logs/checkpoints/latest', { ...as(auditor), headers: { accept: 'text/plain' } });
  assert.equal(note.status, 200, note.text);
  assert.equal(note.text, checkpoint.note);
  writeFileSync(path.join(out, 'old.note'), note.text);
  const keys = await ok<Array<{ key_id: string; public_key: string; note_verifier_key: string }>>(auditor.client.get('/api/v1/audit-logs/public-keys', as(auditor)));
  const key = keys.find((k) => k.key_id === checkpoint.key_id);
  assert.ok(key, 'the checkpoint key is listed');
  writeFileSync(path.join(out, 'key.pem'), key.public_key);
  writeFileSync(path.join(out, 'verifier.key'), key.note_verifier_key);
  const verify = await ok<{ ok: boolean; records_checked: number; checkpoints_checked: number; problem?: string }>(auditor.client.get('/api/v1/audit-logs/verify', as(auditor)));
  assert.equal(verify.ok, true, verify.problem);
  assert.equal(verify.records_checked, checkpoint.tree_size);

  // Every record the checkpoint covers, with its seq and leaf (nothing was written meanwhile:
  // reading the log and its proofs records nothing).
  const all = await allPages<AuditRecordBody>(auditor, '/api/v1/audit-logs?limit=100');
  assert.equal(all.length, checkpoint.tree_size, 'every record is sealed and covered');
  const sealed: UpgradeManifest['sealed'] = [];
  for (const r of all) {
    const proof = await ok<{ seq: number; leaf_hash: string }>(auditor.client.get(`/api/v1/audit-logs/${r.id}/proof?tree_size=${checkpoint.tree_size}`, as(auditor)));
    sealed.push({ id: r.id, seq: proof.seq, leaf_hash: proof.leaf_hash });
  }
  sealed.sort((a, b) => a.seq - b.seq);
  assert.deepEqual(sealed.map((s) => s.seq), sealed.map((_, i) => i), 'seqs are dense');

  // A few records as the API shows them, one of each kind worth keeping.
  const one = async (query: string) => {
    const page = await ok<{ data: AuditRecordBody[] }>(auditor.client.get(`/api/v1/audit-logs?${query}&limit=1`, as(auditor)));
    assert.equal(page.data.length, 1, `a record for ${query}`);
    return ok<AuditRecordBody>(auditor.client.get(`/api/v1/audit-logs/${page.data[0]!.id}`, as(auditor)));
  };
  const records = [
    await one('action=LOGIN_FAILURE&result=FAILURE'),
    await one(`action=CREATE_USER&resource_type=USER&resource_id=${member.id}`),
    await one(`action=UPDATE_USER_EMAIL&resource_type=USER&resource_id=${owner.id}`),
    await one(`action=ADD_PROJECT_MEMBER&resource_id=${project.id}`),
    await one('result=DENIED'),
    await one(`action=ASSIGN_TASK&resource_id=${task.id}`),
    await one(`action=CHANGE_TASK_STATUS&resource_id=${task.id}`),
  ];
  const failures = await ok<{ data: AuditRecordBody[] }>(auditor.client.get('/api/v1/audit-logs?action=LOGIN_FAILURE&limit=100', as(auditor)));
  const strangerRecord = failures.data.find((r) => r.metadata.email === strangerEmail);
  assert.ok(strangerRecord, 'the failed login names the address typed');
  records.push(await ok<AuditRecordBody>(auditor.client.get(`/api/v1/audit-logs/${strangerRecord.id}`, as(auditor))));

  // After the client's last event: events in its rooms (and audited actions) for replay to deliver.
  const after1 = await postMessage(owner, `project:${project.id}`, `missed in the project ${uniqueWord()}`);
  const later = await createTask(owner, project.id, { title: `Later task ${uniqueWord()}`, assignee_id: member.id });
  await ok(owner.client.put(`/api/v1/tasks/${task.id}/status`, { status: 'IN_REVIEW' }, as(owner)));
  await createProject(auditor, { name: `Elsewhere ${uniqueWord()}` });
  const after2 = await postMessage(auditor, 'general', `the last word of the old release ${uniqueWord()}`);
  await witness.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === after2.id, 10_000);
  const events = replayable(witness.rec.events).filter((e) => (e.payload.event_id as number) > lastEventIdSeen);
  for (const [what, match] of [
    ['the project message', (e: Received) => e.name === 'new-message' && e.payload.id === after1.id],
    ['the later task', (e: Received) => e.name === 'task-created' && e.payload.id === later.id],
    ['the task moved to IN_REVIEW', (e: Received) => e.name === 'task-updated' && e.payload.id === task.id && e.payload.status === 'IN_REVIEW'],
    ['the last message', (e: Received) => e.name === 'new-message' && e.payload.id === after2.id],
  ] as const) assert.ok(events.some(match), `the witness got ${what}`);
  const ids = events.map((e) => e.payload.event_id as number);
  assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
  // The newest event_id: what a client connecting now is told in its presence snapshot.
  const late = await connectRecording(auditor);
  const snapshot = (await late.rec.waitFor((e) => e.name === 'presence-snapshot', 10_000)).payload;
  const newestEventId = snapshot.event_id as number;
  assert.ok(newestEventId >= ids.at(-1)!, `the snapshot's event_id ${newestEventId} is at least the last message's`);
  late.socket.close();
  witness.socket.close();
  const recordIds = (await allPages<AuditRecordBody>(auditor, '/api/v1/audit-logs?limit=100')).map((r) => r.id).sort((a, b) => a - b);

  return {
    origin: checkpoint.origin,
    keyId: checkpoint.key_id,
    sealedSize: checkpoint.tree_size,
    rootHash: checkpoint.root_hash,
    checkpointCount: verify.checkpoints_checked,
    recordCount: all.length,
    sealed,
    recordIds,
    records,
    strangerEmail,
    auditor: { id: auditor.id, email: auditor.email, password: auditorPassword },
    owner: { id: owner.id, email: ownerEmail, password: owner.password },
    member: { id: member.id, email: member.email, password: member.password },
    projectId: project.id,
    taskId: task.id,
    lastEventIdSeen,
    afterSeen: { messageIds: [after1.id, after2.id], taskId: later.id, events: events.map((e) => ({ name: e.name, payload: e.payload })) },
    newestEventId,
    export: { records: exportLines.filter((l) => l.type === 'record').length, treeSize: trailer.tree_size as number },
  };
}

async function main(): Promise<void> {
  const out = required('UPGRADE_OUT');
  mkdirSync(out, { recursive: true });
  const database = await openDatabase(required('UPGRADE_DB_NAME'));
  let manifest: UpgradeManifest;
  try {
    const server = await startTestServer({ database, env: JSON.parse(required('UPGRADE_SERVER_ENV')) as Record<string, string> });
    try {
      manifest = await fill(server, out);
    } finally {
      // The app and its connections, not the database: the new release opens it next.
      await server.close();
    }
  } finally {
    await database.drop();
  }
  writeFileSync(path.join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  console.log(`filled: ${manifest.sealedSize} records sealed, ${manifest.checkpointCount} checkpoints, ${manifest.recordIds.length} records, last event_id seen ${manifest.lastEventIdSeen}, newest ${manifest.newestEventId}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  },
);
