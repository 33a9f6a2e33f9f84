// An upgrade loses nothing. The previous release (PREVIOUS_RELEASE, its code taken from git)
// fills a database and seals it (test/upgrade/fill-previous-release.ts, run in that release's
// tree); then THIS checkout's code opens the very same database (in place: transaction ids do
// not survive a dump and restore), migrates it, starts on it, and is checked through the public
// API and the CLI only, so that the test holds before and after the schema changes:
//   1. every record the old release sealed keeps its seq and leaf, and the log verifies;
//   2. the old release's last checkpoint note verifies against the database (CLI --checkpoint);
//   3. the old release's export verifies offline with the new CLI (--file, --complete);
//   4. the new newest checkpoint extends the old one (RFC 9162 consistency, checked here);
//   5. what is audited after the upgrade is sealed after everything older;
//   6. a client that last saw an event of the old release gets all it missed, in order, from
//      the new one (or is told to resync), and one that saw the newest gets the new events;
//   7. an old record reads the same by id.
// On PGlite the database is DATA_DIR/pglite, as the CLI finds it; on PostgreSQL, a database
// made for this file and dropped after it.
import assert from 'node:assert/strict';
import { createHash, createPublicKey, randomBytes, verify as verifySignature } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { CheckpointJson } from './helpers/audit-log.js';
import { runTeamlog, type CliResult } from './helpers/cli.js';
import { Client, login, type Session } from './helpers/client.js';
import { allPages, createProject, createTask, postMessage, uniqueWord, type AuditRecordBody } from './helpers/factories.js';
import { extractRelease, openExistingDatabase, releaseUnavailable, runInRelease, type ExistingDatabase } from './helpers/old-release.js';
import { ROOT } from './helpers/paths.js';
import { adminQuery, databaseUrl as databaseUrlOf } from './helpers/postgres.js';
import { DB_KIND, ensureServiceLogin, onPostgres, PG_BASE_URL, SERVICE_LOGIN, startTestServer, TEST_REDIS_URL, TEST_SIGNING_KEY, type TestDatabase, type TestServer } from './helpers/server.js';
import { connectRecording, sleep, type ClientSocket, type Received } from './helpers/sockets.js';
import type { ReplayEvent, UpgradeManifest } from './upgrade/fill-previous-release.js';

/** The release upgraded from: bump it when a release is cut. */
const PREVIOUS_RELEASE = 'c340417';

/** The repository's own file (the run copies it into the release's tree), also when the suite runs compiled. */
const FILL_SCRIPT = path.join(ROOT, 'test/upgrade/fill-previous-release.ts');
/** Events a reconnecting client gets replayed (README, Real-time). */
const REPLAYABLE = ['new-message', 'new-notification', 'post-liked', 'task-created', 'task-updated', 'task-deleted'];
/** Secrets both releases are given: the same service before and after the upgrade. */
const JWT_SECRET = 'upgrade-test-jwt-secret-'.padEnd(48, 'u');
const unavailable = releaseUnavailable(PREVIOUS_RELEASE);

// ---------------------------------------------------------------------------------------
// RFC 9162 (RFC 6962 bis) proof verification, written here from the RFC, not the server's code.

const sha256 = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();
const nodeHash = (left: Buffer, right: Buffer) => sha256(Buffer.from([1]), left, right);
const b64 = (s: string) => Buffer.from(s, 'base64');
const half = (n: number) => Math.floor(n / 2);
const odd = (n: number) => n % 2 === 1;

/** §2.1.3.2: the root an inclusion proof leads to, or undefined when the proof has the wrong shape. */
function rootFromInclusion(leaf: Buffer, index: number, size: number, proof: Buffer[]): Buffer | undefined {
  if (index >= size) return undefined;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return undefined;
    if (odd(fn) || fn === sn) {
      r = nodeHash(p, r);
      while (!odd(fn) && fn !== 0) [fn, sn] = [half(fn), half(sn)];
    } else {
      r = nodeHash(r, p);
    }
    [fn, sn] = [half(fn), half(sn)];
  }
  return sn === 0 ? r : undefined;
}

/** §2.1.4.2: whether `proof` shows the tree of `second` leaves (secondRoot) extends the tree of `first` (firstRoot). */
function verifyConsistency(first: number, second: number, firstRoot: Buffer, secondRoot: Buffer, proof: Buffer[]): boolean {
  if (first < 1 || first > second) return false;
  if (first === second) return proof.length === 0 && firstRoot.equals(secondRoot);
  if (proof.length === 0) return false;
  const path_ = (first & (first - 1)) === 0 ? [firstRoot, ...proof] : proof;
  let fn = first - 1;
  let sn = second - 1;
  while (odd(fn)) [fn, sn] = [half(fn), half(sn)];
  let fr = path_[0]!;
  let sr = path_[0]!;
  for (const c of path_.slice(1)) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while (!odd(fn) && fn !== 0) [fn, sn] = [half(fn), half(sn)];
    } else {
      sr = nodeHash(sr, c);
    }
    [fn, sn] = [half(fn), half(sn)];
  }
  return fr.equals(firstRoot) && sr.equals(secondRoot) && sn === 0;
}

/** The hash with one bit flipped: a root that must not verify. */
const flipped = (h: Buffer) => Buffer.from(h.map((b, i) => (i === 0 ? b ^ 1 : b)));

// ---------------------------------------------------------------------------------------
// Helpers

interface RecordLine { type: 'record'; record: AuditRecordBody; sealed: Record<string, unknown>; seq: number | null; leaf_hash: string | null; audit_path: string[] | null }
interface CheckpointLine { type: 'checkpoint'; tree_size: number; root_hash?: string; note: string | null; export: { filters: Record<string, unknown>; records: number } }

function parseExport(text: string): { records: RecordLine[]; checkpoint: CheckpointLine } {
  const lines = text.trim().split('\n').map((l) => JSON.parse(l) as RecordLine | CheckpointLine);
  const checkpoint = lines.at(-1);
  assert.equal(checkpoint?.type, 'checkpoint', 'an export ends with its checkpoint');
  return { records: lines.filter((l): l is RecordLine => l.type === 'record'), checkpoint: checkpoint as CheckpointLine };
}

const replayable = (events: Received[]): ReplayEvent[] =>
  events.filter((e) => REPLAYABLE.includes(e.name) && typeof e.payload.event_id === 'number').map((e) => ({ name: e.name, payload: e.payload }));

const auth = (s: Session) => ({ token: s.token });

async function okBody<T = any>(res: Promise<{ status: number; text: string; body: T }>, status = 200): Promise<T> {
  const r = await res;
  assert.equal(r.status, status, r.text);
  return r.body;
}

/**
 * Waits, through the API only, until the newest record is sealed and covered by a checkpoint (its
 * inclusion proof is 404 until then); records are sealed in commit order, so all older ones are.
 */
async function sealedThrough(admin: Session): Promise<CheckpointJson> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const newest = await okBody<{ data: AuditRecordBody[] }>(admin.client.get('/api/v1/audit-logs?limit=1', auth(admin)));
    const proof = await admin.client.get(`/api/v1/audit-logs/${newest.data[0]!.id}/proof`, auth(admin));
    if (proof.status === 200) {
      const head = await admin.client.get<CheckpointJson>('/api/v1/audit-logs/checkpoints/latest', auth(admin));
      if (head.status === 200 && head.body.tree_size >= proof.body.tree_size) return head.body;
    } else {
      assert.equal(proof.status, 404, proof.text);
    }
    if (Date.now() > deadline) throw new Error(`record ${newest.data[0]!.id} was not sealed and covered by a checkpoint within 20 s`);
    await sleep(50);
  }
}


const output = (r: CliResult) => `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

// ---------------------------------------------------------------------------------------

describe(`an upgrade from ${PREVIOUS_RELEASE} to this checkout (${DB_KIND}) loses nothing`, { skip: unavailable }, () => {
  let work: string;
  /** The CLI's DATA_DIR: on PGlite the database is DATA_DIR/pglite. */
  let dataDir: string;
  /** What the old release saved. */
  let old: string;
  const name = `teamlog_upgrade_${process.pid}_${randomBytes(4).toString('hex')}`;
  let databaseUrl: string | undefined;
  let pgCreated = false;
  let manifest: UpgradeManifest;
  let database: TestDatabase | undefined;
  let server: TestServer | undefined;
  const sockets: ClientSocket[] = [];
  let auditor: Session;
  let member: Session;
  /** The new release's events in the member's rooms, in order, as a connected client of the member got them. */
  let newEvents: ReplayEvent[];
  let newProjectId: number;
  let newTaskId: number;
  /** The newest checkpoint once the new release sealed what it did. */
  let head: CheckpointJson;

  /** Closes the new app and its connections (PGlite: one process at a time, and the CLI is next). */
  async function closeServer(): Promise<void> {
    sockets.splice(0).forEach((s) => s.close());
    await server?.close();
    await database?.drop();
  }

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'teamlog-upgrade-'));
    dataDir = path.join(work, 'data');
    old = path.join(work, 'old');
    mkdirSync(dataDir);
    if (onPostgres) {
      await adminQuery(`CREATE DATABASE ${name}`); // generated above, never input
      pgCreated = true;
      databaseUrl = databaseUrlOf(name);
    }
    const serverEnv: Record<string, string> = {
      JWT_SECRET,
      AUDIT_SIGNING_KEY: TEST_SIGNING_KEY,
      AUDIT_CHECKPOINT_INTERVAL_MS: '100',
      ...(onPostgres && TEST_REDIS_URL ? { REDIS_URL: TEST_REDIS_URL, REDIS_KEY_PREFIX: `${name}:` } : {}),
    };
    const target: ExistingDatabase = onPostgres ? { name, databaseUrl } : { name, pgliteDir: path.join(dataDir, 'pglite') };

    // The old release fills the database, in its own process, with its own code (as the login
    // the test services use, which this checkout makes).
    if (onPostgres) await ensureServiceLogin();
    const tree = await extractRelease(PREVIOUS_RELEASE, path.join(work, 'release'));
    await runInRelease(tree, FILL_SCRIPT, {
      TEST_DB: DB_KIND,
      TEST_DATABASE_URL: PG_BASE_URL,
      TEST_REDIS_URL,
      TEST_LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      UPGRADE_OUT: old,
      UPGRADE_DB_NAME: name,
      UPGRADE_SERVER_ENV: JSON.stringify(serverEnv),
      ...(target.databaseUrl ? { UPGRADE_DATABASE_URL: target.databaseUrl } : { UPGRADE_PGLITE_DIR: target.pgliteDir! }),
    });
    manifest = JSON.parse(readFileSync(path.join(old, 'manifest.json'), 'utf8')) as UpgradeManifest;

    // This checkout opens the same database.
    database = await openExistingDatabase(target);
    server = await startTestServer({ database, env: serverEnv });
    auditor = await login(server, manifest.auditor.email, manifest.auditor.password);
    const owner = await login(server, manifest.owner.email, manifest.owner.password);
    member = await login(server, manifest.member.email, manifest.member.password);

    // The new release at work: events in the member's rooms (watched by a client of the member) and audited actions.
    const witness = await connectRecording(member);
    sockets.push(witness.socket);
    await witness.rec.waitFor((e) => e.name === 'presence-snapshot', 10_000);
    const message = await postMessage(owner, `project:${manifest.projectId}`, `after the upgrade ${uniqueWord()}`);
    newTaskId = (await createTask(owner, manifest.projectId, { title: `New task ${uniqueWord()}`, assignee_id: member.id })).id;
    await okBody(owner.client.put(`/api/v1/tasks/${manifest.taskId}/status`, { status: 'DONE' }, auth(owner)));
    newProjectId = (await createProject(auditor, { name: `New ${uniqueWord()}` })).id;
    await okBody(new Client(server).post('/api/v1/auth/login', { email: manifest.member.email, password: 'still-not-the-password' }), 401);
    const last = await postMessage(member, 'general', `the first words of the new release ${uniqueWord()}`);
    await witness.rec.waitFor((e) => e.name === 'new-message' && e.payload.id === last.id, 10_000);
    newEvents = replayable(witness.rec.events);
    for (const [what, match] of [
      ['the project message', (e: ReplayEvent) => e.name === 'new-message' && e.payload.id === message.id],
      ['the new task', (e: ReplayEvent) => e.name === 'task-created' && e.payload.id === newTaskId],
      ['the old task moved to DONE', (e: ReplayEvent) => e.name === 'task-updated' && e.payload.id === manifest.taskId && e.payload.status === 'DONE'],
      ['the general message', (e: ReplayEvent) => e.name === 'new-message' && e.payload.id === last.id],
    ] as const) assert.ok(newEvents.some(match), `the member's client got ${what}`);
    witness.socket.close();
    head = await sealedThrough(auditor);
  });

  after(async () => {
    try {
      await closeServer();
    } finally {
      if (pgCreated) await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      if (work) rmSync(work, { recursive: true, force: true });
    }
  });

  test('1. every record the old release sealed keeps its seq and leaf; the log verifies, counting at least the old records and checkpoints', async () => {
    assert.equal(manifest.sealed.length, manifest.sealedSize);
    const report = await okBody<{ ok: boolean; records_checked: number; checkpoints_checked: number; problem?: string }>(auditor.client.get('/api/v1/audit-logs/verify', auth(auditor)));
    assert.equal(report.ok, true, `the upgraded log does not verify: ${report.problem}`);
    assert.ok(report.records_checked >= manifest.sealedSize, `records_checked ${report.records_checked} < ${manifest.sealedSize} sealed before`);
    assert.ok(report.records_checked > manifest.recordCount, 'the records made after the upgrade are checked too');
    assert.ok(report.checkpoints_checked >= manifest.checkpointCount, `checkpoints_checked ${report.checkpoints_checked} < ${manifest.checkpointCount} before`);

    // Each one's proof in the old tree: the same seq, the same leaf, and it leads to the old root.
    const oldRoot = b64(manifest.rootHash);
    for (const s of manifest.sealed) {
      const proof = await okBody<{ id: number; seq: number; tree_size: number; leaf_hash: string; audit_path: string[] }>(
        auditor.client.get(`/api/v1/audit-logs/${s.id}/proof?tree_size=${manifest.sealedSize}`, auth(auditor)),
      );
      assert.deepEqual({ id: proof.id, seq: proof.seq, tree_size: proof.tree_size, leaf_hash: proof.leaf_hash }, { id: s.id, seq: s.seq, tree_size: manifest.sealedSize, leaf_hash: s.leaf_hash });
      const root = rootFromInclusion(b64(proof.leaf_hash), proof.seq, manifest.sealedSize, proof.audit_path.map(b64));
      assert.ok(root?.equals(oldRoot), `record ${s.id}'s proof does not lead to the old root`);
    }
    // And nothing the old release wrote is missing from the log.
    const listed = new Set((await allPages<AuditRecordBody>(auditor, '/api/v1/audit-logs?limit=100')).map((r) => r.id));
    assert.deepEqual(manifest.recordIds.filter((id) => !listed.has(id)), [], 'records of the old release missing after the upgrade');
  });

  test('7. a record made by the old release reads the same by id, personal data included', async () => {
    assert.ok(manifest.records.some((r) => r.action === 'LOGIN_FAILURE' && r.actor_id === null && r.metadata.email === manifest.strangerEmail), 'a failed login naming an address is among them');
    assert.ok(manifest.records.some((r) => r.action === 'UPDATE_USER_EMAIL' && r.metadata.newEmail === manifest.owner.email), 'an email change is among them');
    assert.ok(manifest.records.some((r) => r.result === 'DENIED'), 'a refusal is among them');
    for (const before of manifest.records) {
      const now = await okBody<AuditRecordBody>(auditor.client.get(`/api/v1/audit-logs/${before.id}`, auth(auditor)));
      assert.deepEqual(now, before, `record ${before.id} (${before.action}) changed`);
    }
  });

  test('4. the newest checkpoint extends the old one: the consistency proof between their sizes verifies against both roots', async () => {
    // The saved note says what the manifest says: origin, size, root.
    const note = readFileSync(path.join(old, 'old.note'), 'utf8');
    assert.deepEqual(note.split('\n').slice(0, 3), [manifest.origin, String(manifest.sealedSize), manifest.rootHash]);
    assert.equal(head.origin, manifest.origin, 'the log keeps its origin');
    assert.ok(head.tree_size > manifest.sealedSize, `the new head (${head.tree_size}) is past the old one (${manifest.sealedSize})`);

    const res = await okBody<{ from: number; to: number; proof: string[] }>(
      auditor.client.get(`/api/v1/audit-logs/proofs/consistency?from=${manifest.sealedSize}&to=${head.tree_size}`, auth(auditor)),
    );
    assert.deepEqual([res.from, res.to], [manifest.sealedSize, head.tree_size]);
    const oldRoot = b64(manifest.rootHash);
    const newRoot = b64(head.root_hash);
    const proof = res.proof.map(b64);
    assert.equal(verifyConsistency(manifest.sealedSize, head.tree_size, oldRoot, newRoot, proof), true, 'the new tree does not extend the old one');
    // The check can fail: not with either root changed.
    assert.equal(verifyConsistency(manifest.sealedSize, head.tree_size, flipped(oldRoot), newRoot, proof), false);
    assert.equal(verifyConsistency(manifest.sealedSize, head.tree_size, oldRoot, flipped(newRoot), proof), false);

    // The new head is signed under the old release's published key, still listed.
    const keys = await okBody<Array<{ key_id: string; public_key: string }>>(auditor.client.get('/api/v1/audit-logs/public-keys', auth(auditor)));
    const pem = readFileSync(path.join(old, 'key.pem'), 'utf8');
    assert.equal(keys.find((k) => k.key_id === manifest.keyId)?.public_key, pem, 'the old key is still published');
    assert.equal(head.key_id, manifest.keyId);
    const [text, sigLine] = head.note.split('\n\n') as [string, string];
    const sig = b64(sigLine.trim().split(' ').at(-1)!);
    assert.ok(verifySignature(null, Buffer.from(`${text}\n`), createPublicKey(pem), sig.subarray(4)), 'the new head verifies under the old key');
  });

  test('5. what is audited after the upgrade is sealed after everything the old release wrote, in one dense sequence', async () => {
    const res = await auditor.client.get('/api/v1/audit-logs/export', auth(auditor));
    assert.equal(res.status, 200, res.text);
    const { records, checkpoint } = parseExport(res.text);
    const withSeq = records.filter((r) => r.seq !== null);
    assert.deepEqual(withSeq.map((r) => r.seq), withSeq.map((_, i) => i), 'the export\'s seqs are 0, 1, 2, … in order');
    assert.equal(withSeq.length, checkpoint.tree_size);

    const byId = new Map(records.map((r) => [r.record.id, r]));
    for (const s of manifest.sealed) {
      const line = byId.get(s.id);
      assert.deepEqual({ seq: line?.seq, leaf_hash: line?.leaf_hash }, { seq: s.seq, leaf_hash: s.leaf_hash }, `record ${s.id} in the new export`);
    }
    const oldIds = new Set(manifest.recordIds);
    const oldSeqs = manifest.recordIds.map((id) => byId.get(id)?.seq);
    assert.ok(oldSeqs.every((seq) => typeof seq === 'number'), 'every record of the old release is sealed now (those it left unsealed too)');
    const lastOld = Math.max(...(oldSeqs as number[]));
    assert.ok(lastOld >= manifest.sealedSize - 1);
    const fresh = withSeq.filter((r) => !oldIds.has(r.record.id));
    for (const [what, match] of [
      ['CREATE_PROJECT of the new project', (r: RecordLine) => r.record.action === 'CREATE_PROJECT' && r.record.resource_id === newProjectId],
      ['CREATE_TASK of the new task', (r: RecordLine) => r.record.action === 'CREATE_TASK' && r.record.resource_id === newTaskId],
      ['CHANGE_TASK_STATUS to DONE', (r: RecordLine) => r.record.action === 'CHANGE_TASK_STATUS' && r.record.resource_id === manifest.taskId && r.record.metadata.newStatus === 'DONE'],
      ['the failed login', (r: RecordLine) => r.record.action === 'LOGIN_FAILURE' && r.record.metadata.email === manifest.member.email && !oldIds.has(r.record.id)],
    ] as const) assert.ok(fresh.some(match), `${what} is sealed`);
    for (const r of fresh) {
      assert.ok(r.seq! > lastOld && r.seq! >= manifest.sealedSize, `record ${r.record.id} (${r.record.action}) has seq ${r.seq}, not after the old records' ${lastOld}`);
    }
  });

  test('6. a client that last saw an event of the old release gets everything after it from the new one, in order (or resync-required), and one that saw the newest gets the new events', async () => {
    const E = manifest.lastEventIdSeen;
    const missedOld = manifest.afterSeen.events;
    // What it must get: the old release's events after E (those named here among them), then the new release's.
    for (const [what, match] of [
      ['the project message', (e: ReplayEvent) => e.name === 'new-message' && e.payload.id === manifest.afterSeen.messageIds[0]],
      ['the last message', (e: ReplayEvent) => e.name === 'new-message' && e.payload.id === manifest.afterSeen.messageIds[1]],
      ['the later task', (e: ReplayEvent) => e.name === 'task-created' && e.payload.id === manifest.afterSeen.taskId],
      ['the move to IN_REVIEW', (e: ReplayEvent) => e.name === 'task-updated' && e.payload.id === manifest.taskId && e.payload.status === 'IN_REVIEW'],
    ] as const) assert.ok(missedOld.some(match), `the old release made ${what} after E`);
    assert.ok(missedOld.every((e) => (e.payload.event_id as number) > E && (e.payload.event_id as number) <= manifest.newestEventId));
    assert.ok(newEvents.every((e) => (e.payload.event_id as number) > manifest.newestEventId), 'the new release numbers after the old one');
    const expected = [...missedOld, ...newEvents];
    const lastExpected = expected.at(-1)!;

    const again = await connectRecording(member, { lastEventId: E });
    sockets.push(again.socket);
    await again.rec.waitFor((e) => e.name === 'resync-required' || (e.name === lastExpected.name && e.payload.event_id === lastExpected.payload.event_id), 10_000, 'the replay or resync-required');
    await sleep(300); // anything more (a duplicate, a stray event) would arrive by now
    const resync = again.rec.events.findIndex((e) => e.name === 'resync-required');
    if (resync >= 0) {
      // Told to refetch, before any replayed event: no silent gap.
      const firstReplayed = again.rec.events.findIndex((e) => REPLAYABLE.includes(e.name));
      assert.ok(firstReplayed === -1 || firstReplayed > resync, 'events were replayed before resync-required');
      assert.equal(typeof again.rec.events[resync]!.payload.event_id, 'number');
    } else {
      assert.deepEqual(replayable(again.rec.events), expected, 'the replay across the upgrade is not exactly what the client missed, in order');
    }

    // A client that had seen the old release's newest event gets the new release's, exactly.
    const caughtUp = await connectRecording(member, { lastEventId: manifest.newestEventId });
    sockets.push(caughtUp.socket);
    await caughtUp.rec.waitFor((e) => e.name === 'resync-required' || (e.name === lastExpected.name && e.payload.event_id === lastExpected.payload.event_id), 10_000, 'the new events');
    await sleep(300);
    assert.equal(caughtUp.rec.named('resync-required').length, 0, 'a client up to date with the old release was told to resync');
    assert.deepEqual(replayable(caughtUp.rec.events), newEvents);
  });

  test('3. the old release\'s export verifies offline with this checkout\'s CLI, also as complete; an edited one does not', async () => {
    const file = path.join(old, 'old-export.ndjson');
    const exported = parseExport(readFileSync(file, 'utf8'));
    assert.deepEqual(exported.checkpoint.export.filters, {}, 'the old export is unfiltered');
    assert.ok(exported.records.filter((r) => r.seq !== null).length === exported.checkpoint.tree_size && exported.checkpoint.tree_size === manifest.export.treeSize);
    const offline = path.join(work, 'offline');
    mkdirSync(offline, { recursive: true });
    const env = { DATA_DIR: offline };
    const key = path.join(old, 'key.pem');
    const plain = await runTeamlog(['audit', 'verify', '--file', file, '--public-key', key], env);
    assert.equal(plain.code, 0, output(plain));
    const complete = await runTeamlog(['audit', 'verify', '--file', file, '--public-key', key, '--complete'], env);
    assert.equal(complete.code, 0, output(complete));
    const verifierKey = readFileSync(path.join(old, 'verifier.key'), 'utf8').trim();
    const byVerifierKey = await runTeamlog(['audit', 'verify', '--file', file, '--verifier-key', verifierKey, '--complete'], env);
    assert.equal(byVerifierKey.code, 0, output(byVerifierKey));

    // The check can fail: one sealed record's request id edited.
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    const i = lines.findIndex((l) => (JSON.parse(l) as RecordLine).seq === 1);
    const line = JSON.parse(lines[i]!) as RecordLine;
    line.record.request_id = line.sealed.request_id = `edited-${uniqueWord()}`;
    lines[i] = JSON.stringify(line);
    const edited = path.join(offline, 'edited.ndjson');
    writeFileSync(edited, `${lines.join('\n')}\n`);
    const refused = await runTeamlog(['audit', 'verify', '--file', edited, '--public-key', key], env);
    assert.equal(refused.code, 1, output(refused));
  });

  test('2. the last checkpoint note of the old release verifies against the upgraded database with this checkout\'s CLI; an edited one does not', async () => {
    await closeServer(); // PGlite: the CLI must be the only process on the database
    const env = {
      DATA_DIR: dataDir,
      JWT_SECRET,
      AUDIT_SIGNING_KEY: TEST_SIGNING_KEY,
      ...(databaseUrl ? { DATABASE_URL: Object.assign(new URL(databaseUrl), { username: SERVICE_LOGIN, password: '' }).toString(), MIGRATION_DATABASE_URL: databaseUrl } : {}),
    };
    const note = path.join(old, 'old.note');
    const verified = await runTeamlog(['audit', 'verify', '--checkpoint', note], env);
    assert.equal(verified.code, 0, output(verified));
    assert.match(verified.stdout, /^OK\b/);

    // The check can fail: the note with another root (its signature no longer holds).
    const text = readFileSync(note, 'utf8').split('\n');
    text[2] = flipped(b64(text[2]!)).toString('base64');
    const edited = path.join(work, 'edited.note');
    writeFileSync(edited, text.join('\n'));
    const refused = await runTeamlog(['audit', 'verify', '--checkpoint', edited], env);
    assert.equal(refused.code, 1, output(refused));
  });
});
