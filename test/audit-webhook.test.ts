// Streaming the audit log out (docs/api.md 5.9): a receiver on the loopback that fails, goes away
// and hangs still ends up with every sealed record, in seq order, every body signed, every
// checkpoint verifiable against the records it holds; the cursor lives in the database, so a
// restart loses nothing; one instance delivers at a time, under a lease another takes over
// once it runs out. The checks here are written from the contract (RFC 6962, C2SP notes, the
// signature header), not with the server's code.
import assert from 'node:assert/strict';
import { createHash, createHmac, createPublicKey, timingSafeEqual, verify as verifySignature } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { recordLeaf, type SealedRecord } from '../src/modules/audit/evidence/record.sealed-form.js';
import { generateEd25519PrivateKeyPem } from '../src/tlog/signed-note.js';
import { createUser, loginAdmin, type Session } from './helpers/client.js';
import { createTestDatabase, startTestServer, type TestDatabase, type TestServer } from './helpers/server.js';

// Short timings, for this file's servers: the defaults back off up to a minute, and a lease lasts 5 s.
const hooks = { webhookTuning: { retryBaseMs: 20, retryCapMs: 250, timeoutMs: 800, leaseMs: 1500, pollMs: 150 } };

const SECRET = 'webhook-secret-for-tests-0123456789';

interface DeliveredRecord { seq: number; leaf_hash: string; record: SealedRecord; sealed: SealedRecord }
interface DeliveredCheckpoint { origin: string; tree_size: number; root_hash: string; prev_checkpoint_hash: string | null; key_id: string; signature: string; created_at: string; note: string }
interface AuditBatch { type: string; records: DeliveredRecord[]; checkpoint?: DeliveredCheckpoint }

/** A webhook receiver on 127.0.0.1 whose behaviour the test steers. */
class Receiver {
  private server: http.Server | undefined;
  port = 0;
  /** Every request, answered or not, and whether its signature verified. */
  readonly requests: Array<{ signatureOk: boolean; json: boolean }> = [];
  /** Bodies answered 2xx, in the order they were answered. */
  readonly accepted: AuditBatch[] = [];
  /** Requests answered 500 before anything else. */
  failNext = 0;
  /** Requests left unanswered (the sender's timeout). */
  hangNext = 0;
  /** Otherwise: accept, or answer 503. */
  accepting = true;
  delayMs = 0;
  inFlight = 0;
  maxInFlight = 0;

  constructor(private readonly path = '/teamlog/audit') {}

  get url() {
    return `http://127.0.0.1:${this.port}${this.path}`;
  }

  /** The receiver the service names its cursor after: the URL without credentials, query or fragment. */
  get receiver() {
    return this.url;
  }

  async up(): Promise<void> {
    const server = http.createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    const address = server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
    this.server = server;
  }

  /** Closed: connections are refused until up() again (on the same port). */
  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    this.requests.push({
      signatureOk: req.method === 'POST' && signatureVerifies(req.headers['x-teamlog-signature'], body),
      json: /^application\/json/.test(req.headers['content-type'] ?? ''),
    });
    if (this.hangNext > 0) {
      this.hangNext--;
      return;
    }
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    if (this.delayMs > 0) await sleep(this.delayMs);
    this.inFlight--;
    if (this.failNext > 0) {
      this.failNext--;
      res.writeHead(500).end('no');
    } else if (!this.accepting) {
      res.writeHead(503).end('later');
    } else {
      this.accepted.push(JSON.parse(body) as AuditBatch);
      res.writeHead(204).end();
    }
  }
}

/** `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`, t recent. */
function signatureVerifies(header: string | string[] | undefined, body: string): boolean {
  const m = typeof header === 'string' ? /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header) : null;
  if (!m) return false;
  if (Math.abs(Date.now() / 1000 - Number(m[1])) > 300) return false;
  const expected = createHmac('sha256', SECRET).update(`${m[1]}.${body}`).digest();
  return timingSafeEqual(expected, Buffer.from(m[2]!, 'hex'));
}

const sha256 = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();

/** RFC 6962 §2.1 Merkle Tree Hash over leaf hashes. */
function treeHash(leaves: Buffer[]): Buffer {
  if (leaves.length === 1) return leaves[0]!;
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return sha256(Buffer.from([1]), treeHash(leaves.slice(0, k)), treeHash(leaves.slice(k)));
}

/** A C2SP signed note: its text, and an Ed25519 signature line under the origin's name. */
function verifyNote(cp: DeliveredCheckpoint, publicKeyPem: string): void {
  const [text, sigLine] = cp.note.split('\n\n') as [string, string];
  const lines = text.split('\n');
  assert.equal(lines[0], cp.origin);
  assert.equal(lines[1], String(cp.tree_size));
  assert.equal(lines[2], cp.root_hash);
  const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)\n$/.exec(sigLine);
  assert.ok(m, `a signature line: ${JSON.stringify(sigLine)}`);
  assert.equal(m[1], cp.origin);
  const sig = Buffer.from(m[2]!, 'base64');
  assert.ok(verifySignature(null, Buffer.from(`${text}\n`), createPublicKey(publicKeyPem), sig.subarray(4)), 'the note verifies under its key');
}

let database: TestDatabase;
const receiver = new Receiver();
const servers: TestServer[] = [];
let env: Record<string, string>;

async function start(extra: Record<string, string> = {}): Promise<TestServer> {
  const server = await startTestServer({ database, env: { ...env, ...extra }, hooks });
  servers.push(server);
  return server;
}

async function stop(server: TestServer): Promise<void> {
  await server.close();
  servers.splice(servers.indexOf(server), 1);
}

interface Head { next_seq: number; last_checkpoint_id: number; sealed: number; unsealed: number; newest_checkpoint: number; newest_size: number | null }

/** Where a receiver's cursor stands (0 and 0 before its row exists), against the log. */
async function head(r: Receiver = receiver): Promise<Head> {
  const [row] = await database.owner.query<Head>(`SELECT COALESCE(c.next_seq, 0)::int AS next_seq, COALESCE(c.last_checkpoint_id, 0)::int AS last_checkpoint_id,
    (SELECT COALESCE(max(seq) + 1, 0) FROM audit_seal) AS sealed,
    (SELECT count(*)::int FROM audit_log a WHERE NOT EXISTS (SELECT 1 FROM audit_seal s WHERE s.record_id = a.id)) AS unsealed,
    (SELECT COALESCE(max(id), 0) FROM audit_checkpoints) AS newest_checkpoint,
    (SELECT tree_size FROM audit_checkpoints ORDER BY id DESC LIMIT 1) AS newest_size
    FROM (SELECT 1) one LEFT JOIN audit_webhook_cursor c ON c.receiver = $1`, [r.receiver]);
  return row!;
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(40);
  }
}

/** Every record sealed, the newest checkpoint covering them all, and both delivered. */
const delivered = (r: Receiver = receiver) =>
  waitFor('the webhook to deliver everything', async () => {
    const h = await head(r);
    return h.unsealed === 0 && h.newest_size === h.sealed && h.next_seq === h.sealed && h.last_checkpoint_id === h.newest_checkpoint && h;
  });

/** Sealed, and a checkpoint covers them (not delivered: the receiver is away). */
const sealed = () =>
  waitFor('the records to be sealed and checkpointed', async () => {
    const h = await head();
    return h.unsealed === 0 && h.newest_size === h.sealed && h;
  });

async function metrics(server: TestServer): Promise<Map<string, number>> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const values = new Map<string, number>();
  for (const m of text.matchAll(/^(teamlog_audit_webhook_\w+(?:\{[^}]*\})?) (\S+)$/gm)) values.set(m[1]!, Number(m[2]));
  return values;
}

async function publicKeys(): Promise<Map<string, string>> {
  const rows = await database.owner.query<{ key_id: string; public_key: string }>('SELECT key_id, public_key FROM audit_signing_keys');
  return new Map(rows.map((r) => [r.key_id, r.public_key]));
}

/**
 * What a receiver does with the stream: appends records in seq order (a duplicate, known by
 * its seq, must say what it said before; a gap is an error), and checks each checkpoint
 * against the records it holds, and its note against the key.
 */
async function replay(batches: AuditBatch[]) {
  const keys = await publicKeys();
  const leaves: Buffer[] = [];
  const checkpoints: DeliveredCheckpoint[] = [];
  for (const batch of batches) {
    assert.equal(batch.type, 'audit-batch');
    assert.ok(batch.records.length <= 100, `${batch.records.length} records in one batch`);
    batch.records.forEach((r, i) => {
      if (i > 0) assert.equal(r.seq, batch.records[i - 1]!.seq + 1, 'a batch is consecutive');
      assert.ok(r.seq <= leaves.length, `seq ${r.seq} arrived before seq ${leaves.length}`);
      const leaf = Buffer.from(r.leaf_hash, 'base64');
      if (r.seq === leaves.length) leaves.push(leaf);
      else assert.deepEqual(leaf, leaves[r.seq], `a duplicate of seq ${r.seq} says the same`);
      assert.deepEqual(recordLeaf(r.sealed), leaf, 'the leaf is the hash of the sealed form');
      assert.equal(r.record.id, r.sealed.id);
    });
    const cp = batch.checkpoint;
    if (cp) {
      assert.ok(cp.tree_size <= leaves.length, `checkpoint of ${cp.tree_size} with only ${leaves.length} records delivered`);
      assert.equal(treeHash(leaves.slice(0, cp.tree_size)).toString('base64'), cp.root_hash, 'the checkpoint\'s root is the tree of the delivered records');
      const key = keys.get(cp.key_id);
      assert.ok(key, `key ${cp.key_id} is registered`);
      verifyNote(cp, key);
      checkpoints.push(cp);
    }
  }
  return { leaves, checkpoints };
}

/** The receiver holds every sealed record and every checkpoint there is. */
async function assertComplete(r: Receiver = receiver): Promise<{ leaves: Buffer[]; checkpoints: DeliveredCheckpoint[] }> {
  const h = await delivered(r);
  const stream = await replay(r.accepted);
  assert.equal(stream.leaves.length, h.sealed, 'every sealed record arrived');
  const stored = await database.owner.query<{ note: string }>('SELECT note FROM audit_checkpoints ORDER BY id');
  const notes = new Set(stream.checkpoints.map((c) => c.note));
  assert.deepEqual(stored.filter((c) => !notes.has(c.note)), [], 'every checkpoint arrived');
  assert.ok(r.requests.every((q) => q.signatureOk), 'every body carries a valid signature');
  assert.ok(r.requests.every((q) => q.json), 'every body is sent as JSON');
  return stream;
}

/** n audited actions, a few at a time. */
async function projects(admin: Session, n: number, name: string): Promise<void> {
  for (let i = 0; i < n; i += 5) {
    const created = await Promise.all(
      Array.from({ length: Math.min(5, n - i) }, (_, j) => admin.client.post('/api/v1/projects', { name: `${name} ${i + j}` }, { token: admin.token })),
    );
    for (const res of created) assert.equal(res.status, 201, res.text);
  }
}

before(async () => {
  // The first requests fail with 500, then the receiver answers 503 until the test says otherwise.
  receiver.failNext = 10;
  receiver.accepting = false;
  await receiver.up();
  env = { AUDIT_CHECKPOINT_INTERVAL_MS: '100', AUDIT_WEBHOOK_URL: receiver.url, AUDIT_WEBHOOK_SECRET: SECRET };
  database = await createTestDatabase();
});

after(async () => {
  for (const s of [...servers]) await s.close();
  await receiver.down();
  await database?.drop();
});

describe('the audit webhook', () => {
  let server: TestServer;
  let admin: Session;

  test('delivers every sealed record and checkpoint, in seq order and signed, through 10 failures, an outage and a timeout', async () => {
    server = await start();
    admin = await loginAdmin(server);
    // Ten 500s, then 503s: then away altogether (connections refused) for a while.
    await waitFor('10 failed deliveries', async () => receiver.requests.length > 10);
    await receiver.down();
    const downAt = Date.now();

    // Records keep coming while nobody receives them.
    const user = await createUser(server, admin);
    await projects(admin, 20, 'Streamed');
    const waiting = await sealed();
    assert.equal(waiting.next_seq, 0, 'nothing delivered yet');
    const during = await waitFor('network failures to show', async () => {
      const m = await metrics(server);
      return (m.get('teamlog_audit_webhook_failed_attempts_total{reason="network"}') ?? 0) > 0 && m;
    });
    assert.equal(during.get('teamlog_audit_webhook_lag_records'), waiting.sealed);
    assert.ok(during.get('teamlog_audit_webhook_lag_seconds')! > 0);
    assert.ok(during.get('teamlog_audit_webhook_failed_attempts_total{reason="status"}')! >= 10);

    await sleep(Math.max(0, 2000 - (Date.now() - downAt)));
    // Back, but the first request gets no answer at all.
    receiver.accepting = true;
    receiver.hangNext = 1;
    await receiver.up();

    const stream = await assertComplete();
    const h = await head();
    assert.equal(h.next_seq, stream.leaves.length, 'the cursor in the database advanced to the head');
    assert.ok(h.last_checkpoint_id > 0);
    const caughtUp = await metrics(server);
    assert.equal(caughtUp.get('teamlog_audit_webhook_lag_records'), 0);
    assert.equal(caughtUp.get('teamlog_audit_webhook_lag_seconds'), 0);
    assert.ok(caughtUp.get('teamlog_audit_webhook_failed_attempts_total{reason="timeout"}')! >= 1);

    // A record as the API shows it (personal values resolved) beside its sealed form (refs).
    const created = receiver.accepted.flatMap((b) => b.records).find((r) => r.record.action === 'CREATE_USER' && r.record.resource_id === user.id);
    assert.ok(created);
    assert.equal(created.record.metadata.email, user.email);
    assert.equal(typeof (created.sealed.metadata.email as Record<string, unknown>).$personal, 'string');
    const api = await admin.client.get(`/api/v1/audit-logs/${created.record.id}`, { token: admin.token });
    assert.deepEqual(created.record, api.body);
  });

  test('a restart of the service loses nothing: what was sealed while the receiver was away arrives from the next instance', async () => {
    await receiver.down();
    await projects(admin, 3, 'Before restart');
    const pending = await sealed();
    assert.ok(pending.next_seq < pending.sealed);
    await stop(server);

    await receiver.up();
    server = await start();
    admin = await loginAdmin(server);
    await projects(admin, 2, 'After restart');
    const stream = await assertComplete();
    assert.ok(stream.leaves.length >= pending.sealed + 3);
  });

  test('a batch holds at most 100 records: 110 sealed under one checkpoint arrive as 100, then the rest with the checkpoint', async () => {
    await delivered();
    await stop(server);
    // An instance that does not seal (nor deliver) writes them; the next one seals them in one go.
    const quiet = await start({ AUDIT_SEALING: 'off' });
    await projects(await loginAdmin(quiet), 110, 'Bulk');
    await stop(quiet);
    const batches = receiver.accepted.length;
    // Sealed and signed before the receiver answers: the batches are then cut by the size limit
    // and the checkpoint alone, not by whether the sealer (on PostgreSQL in a thread of its own)
    // signed before the webhook read its second batch; a checkpoint signed later comes after it,
    // in a batch of no records, as docs/api.md 5.9 allows.
    await receiver.down();
    server = await start();
    await sealed();
    await receiver.up();
    await assertComplete();
    const sizes = receiver.accepted.slice(batches).map((b) => [b.records.length, b.checkpoint !== undefined]);
    assert.deepEqual(sizes.slice(0, 2), [[100, false], [11, true]]);
    admin = await loginAdmin(server);
  });

  test('a checkpoint comes even with no new record: the re-signed head after a key rotation', async () => {
    await delivered();
    await stop(server);
    const batches = receiver.accepted.length;
    const size = (await head()).sealed;
    // Same records, new key: the sealer signs the same head again, under the new key.
    env.AUDIT_SIGNING_KEY = generateEd25519PrivateKeyPem();
    // The operator names the key that signed before, so that the new one may sign over it.
    env.AUDIT_PREVIOUS_VERIFIER_KEYS = (await database.owner.query<{ k: string }>('SELECT note_verifier_key AS k FROM audit_signing_keys')).map((r) => r.k).join(',');
    server = await start();
    const resigned = await waitFor('the re-signed checkpoint', async () => receiver.accepted.slice(batches).find((b) => b.checkpoint && b.records.length === 0));
    assert.equal(resigned.checkpoint!.tree_size, size);
    const oldKeys = new Set(receiver.accepted.slice(0, batches).flatMap((b) => (b.checkpoint ? [b.checkpoint.key_id] : [])));
    assert.ok(!oldKeys.has(resigned.checkpoint!.key_id), 'signed under the new key');
    await assertComplete();
    admin = await loginAdmin(server);
  });

  test('one instance delivers at a time: a live lease is waited out, then taken over once it runs out', async () => {
    await delivered();
    await database.owner.query("UPDATE audit_webhook_cursor SET holder = 'an instance that died', lease_until = clock_timestamp() + interval '1500 milliseconds' WHERE receiver = $1", [receiver.receiver]);
    const heldAt = Date.now();
    const batches = receiver.accepted.length;
    await projects(admin, 2, 'Leased');
    await sealed();
    await sleep(Math.max(0, 900 - (Date.now() - heldAt)));
    assert.equal(receiver.accepted.length, batches, 'nothing is sent while another instance holds the lease');
    await assertComplete();
    assert.ok(Date.now() - heldAt >= 1400, 'taken over once the lease ran out');
    const [row] = await database.owner.query<{ holder: string | null }>('SELECT holder FROM audit_webhook_cursor WHERE receiver = $1', [receiver.receiver]);
    assert.notEqual(row!.holder, 'an instance that died');
  });

  test('AUDIT_WEBHOOK_URL without AUDIT_WEBHOOK_SECRET stops the start, naming the secret: deliveries are never unsigned', async () => {
    // No Redis: the half-built app is never closed (a real start exits), and its client would hold the test open.
    await assert.rejects(startTestServer({ database, env: { AUDIT_CHECKPOINT_INTERVAL_MS: '100', AUDIT_WEBHOOK_URL: receiver.url, REDIS_URL: '' }, hooks }), /AUDIT_WEBHOOK_SECRET/);
  });

  test('two instances never POST at the same time, and the stream stays in seq order', async () => {
    const second = await start();
    const other = await loginAdmin(second);
    receiver.delayMs = 30;
    receiver.maxInFlight = 0;
    await Promise.all([projects(admin, 10, 'First instance'), projects(other, 10, 'Second instance')]);
    await assertComplete();
    assert.equal(receiver.maxInFlight, 1);
    receiver.delayMs = 0;
    await stop(second);
  });

  test('each receiver has its own cursor: a new AUDIT_WEBHOOK_URL gets everything from seq 0; the first, given back with a new token in its query, goes on from where it stood', async () => {
    await delivered();
    const before = await head();
    const firstBatches = receiver.accepted.length;
    await stop(server);
    const other = new Receiver('/siem/teamlog');
    await other.up();
    try {
      env.AUDIT_WEBHOOK_URL = other.url;
      server = await start();
      admin = await loginAdmin(server);
      await projects(admin, 2, 'New receiver');
      // replay() checks that the stream starts at seq 0 and has no gap.
      const stream = await assertComplete(other);
      assert.ok(stream.leaves.length >= before.sealed + 2);
      assert.equal(receiver.accepted.length, firstBatches, 'the first receiver got nothing meanwhile');
      assert.equal((await head(receiver)).next_seq, before.next_seq, "the first receiver's cursor stayed where it was");
      await stop(server);

      env.AUDIT_WEBHOOK_URL = `${receiver.url}?token=rotated`;
      server = await start();
      admin = await loginAdmin(server);
      await projects(admin, 1, 'Back');
      await assertComplete();
      const sent = receiver.accepted.slice(firstBatches).flatMap((b) => b.records.map((r) => r.seq));
      assert.ok(sent.length > 0, 'the first receiver got the records it had not had');
      assert.ok(Math.min(...sent) >= before.next_seq, `nothing it already had: from seq ${Math.min(...sent)}, where it stood at ${before.next_seq}`);
    } finally {
      env.AUDIT_WEBHOOK_URL = receiver.url;
      await other.down();
    }
  });

  test('the one cursor of a database from before cursors were per receiver is adopted, with its place, by the receiver that comes first', async () => {
    await delivered();
    const before = await head();
    await stop(server);
    // What migration 0007 leaves of a database whose webhook ran before it: one row, no receiver.
    await database.owner.query('DELETE FROM audit_webhook_cursor WHERE receiver <> $1', [receiver.receiver]);
    await database.owner.query('UPDATE audit_webhook_cursor SET receiver = NULL');
    const batches = receiver.accepted.length;
    server = await start();
    admin = await loginAdmin(server);
    await projects(admin, 1, 'Adopted');
    await assertComplete();
    const sent = receiver.accepted.slice(batches).flatMap((b) => b.records.map((r) => r.seq));
    assert.ok(sent.length > 0 && Math.min(...sent) >= before.next_seq, `not sent again from seq 0 (from seq ${Math.min(...sent)})`);
    const rows = await database.owner.query<{ receiver: string | null }>('SELECT receiver FROM audit_webhook_cursor');
    assert.deepEqual(rows, [{ receiver: receiver.receiver }]);
  });
});
