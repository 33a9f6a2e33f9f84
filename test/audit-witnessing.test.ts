// The log asks witnesses to cosign its checkpoints (docs/api.md 5.11, docs/audit-integrity.md
// "Witnessing"), against real `teamlog witness serve` processes: two witnesses under a
// `group 2 of 2` quorum, one that holds a checkpoint this log never signed, and one whose key is
// not the one the policy names. Their cosignatures are kept append-only and served in every
// note; a stopped witness is named, degrades /health/ready, and is caught up when it is back.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cosigner, formatCosignatureVerifierKey, formatCosignerKey, parseCosignatureVerifierKey, verifyCosignature } from '../src/tlog/cosignature.js';
import { splitNote } from '../src/tlog/note-format.js';
import { parsePolicy, verifyCheckpointWithPolicy, type Policy } from '../src/tlog/policy.js';
import { parseTlogProof, verifyTlogProof } from '../src/tlog/proof-bundle.js';
import { ed25519PublicKeyRaw, formatVerifierKey, loadEd25519PrivateKey, openNote, parseVerifierKey } from '../src/tlog/signed-note.js';
import { stateFile } from '../src/witness/witness.state.js';
import { auditedActions, settled, type CheckpointJson } from './helpers/audit-log.js';
import { fetchExport, parseNdjsonExport } from './helpers/audit-export.js';
import { runTeamlog } from './helpers/cli.js';
import { loginAdmin, type Session } from './helpers/client.js';
import { serveWitness, stopWitnessProcess, type WitnessProcess } from './helpers/witness.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { needsPostgres, startTestServer, TEST_SIGNING_KEY, type TestServer } from './helpers/server.js';

const ORIGIN = `teamlog.test/witnessed-${process.pid}`;
const LOG_VKEY = formatVerifierKey(ORIGIN, ed25519PublicKeyRaw(loadEd25519PrivateKey(TEST_SIGNING_KEY)));
const INTERVAL_MS = 300;
const MAX_AGE_MS = 2500;

interface WitnessSetup { name: string; dir: string; vkey: string; running?: WitnessProcess }

/** `teamlog witness serve` for one witness's directory, on `port` (0: a free one). */
const startWitness = (w: WitnessSetup, port = 0) => serveWitness(w.dir, { port });

async function stopWitness(w: WitnessSetup): Promise<void> {
  if (w.running) await stopWitnessProcess(w.running);
  w.running = undefined;
}

/** A witness's directory: its key (as `teamlog witness keygen` writes it) and the log it witnesses; `policyKeyOf` gives the policy another key of the same name. */
function witnessDir(root: string, name: string, opts: { policyKeyOf?: boolean } = {}): WitnessSetup {
  const dir = path.join(root, name);
  mkdirSync(path.join(dir, 'state'), { recursive: true, mode: 0o700 });
  const own = cosigner(name, generateKeyPairSync('ed25519').privateKey);
  writeFileSync(path.join(dir, 'witness.key'), `${formatCosignerKey(own)}\n`, { mode: 0o600 });
  writeFileSync(path.join(dir, 'logs.txt'), `log ${LOG_VKEY}\n`);
  const named = opts.policyKeyOf ? cosigner(name, generateKeyPairSync('ed25519').privateKey) : own;
  return { name, dir, vkey: formatCosignatureVerifierKey(named) };
}

interface WitnessesBody {
  policy: string;
  quorum_met: boolean;
  newest_witnessed: { tree_size: number; created_at: string } | null;
  witnesses: Array<{ name: string; vkey: string; url: string | null; last_cosigned_size: number | null; last_cosigned_at: string | null; last_error: string | null }>;
}
interface CheckpointBody extends CheckpointJson { witnessed: boolean; cosignatures: Array<{ name: string; key_id: string; time: string; signature: string }> }

let root: string;
let w1: WitnessSetup;
let w2: WitnessSetup;
let liar: WitnessSetup;
let impostor: WitnessSetup;
let policy: Policy;
let server: TestServer;
let admin: Session;

const api = (p: string) => `/api/v1/audit-logs${p}`;
const witnesses = async () => {
  const res = await admin.client.get<WitnessesBody>(api('/witnesses'), { token: admin.token });
  assert.equal(res.status, 200, res.text);
  return res.body;
};
const stateOf = (body: WitnessesBody, w: WitnessSetup) => body.witnesses.find((s) => s.name === w.name)!;
const latest = async () => {
  const res = await admin.client.get<CheckpointBody>(api('/checkpoints/latest'), { token: admin.token });
  assert.equal(res.status, 200, res.text);
  return res.body;
};

/** Every record sealed, the newest checkpoint covering them all, and cosigned by both witnesses of the quorum. */
async function witnessedHead(): Promise<CheckpointBody> {
  const head = await settled<CheckpointBody>(server, admin);
  return until('the newest checkpoint to be witnessed', async () => {
    const c = await latest();
    return c.tree_size === head.tree_size && c.witnessed ? c : undefined;
  });
}

/** Polls `check` until it answers a value, for up to `ms`. */
async function until<T>(what: string, check: () => Promise<T | undefined | false>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'teamlog-witnessing-'));
  w1 = witnessDir(root, 'w1.test');
  w2 = witnessDir(root, 'w2.test');
  liar = witnessDir(root, 'liar.test');
  impostor = witnessDir(root, 'impostor.test', { policyKeyOf: true });
  // The liar has cosigned a checkpoint of this origin at size 1 that this log never signed (another root).
  writeFileSync(stateFile(path.join(liar.dir, 'state'), ORIGIN), `${JSON.stringify({ origin: ORIGIN, size: 1, root: Buffer.alloc(32, 7).toString('base64') })}\n`);
  for (const w of [w1, w2, liar, impostor]) w.running = await startWitness(w);

  const policyText =
    `log ${LOG_VKEY}\n` +
    [w1, w2, liar, impostor].map((w) => `witness ${w.name} ${w.vkey} ${w.running!.url}\n`).join('') +
    `group both 2 ${w1.name} ${w2.name}\nquorum both\n`;
  writeFileSync(path.join(root, 'policy.txt'), policyText);
  policy = parsePolicy(policyText);
  server = await startTestServer({
    env: {
      AUDIT_LOG_ORIGIN: ORIGIN,
      AUDIT_WITNESS_POLICY: path.join(root, 'policy.txt'),
      AUDIT_WITNESS_INTERVAL_MS: String(INTERVAL_MS),
      AUDIT_WITNESS_MAX_AGE_MS: String(MAX_AGE_MS),
      AUDIT_CHECKPOINT_INTERVAL_MS: '200',
    },
  });
  admin = await loginAdmin(server);
});

after(async () => {
  await server?.close();
  for (const w of [w1, w2, liar, impostor]) if (w) await stopWitness(w);
  rmSync(root, { recursive: true, force: true });
});

describe('witnessing, both witnesses up', () => {
  test('cosignatures are kept, and every note served carries them after the log\'s own signature', async () => {
    await auditedActions(admin, 3);
    // Writes stop: the newest checkpoint is soon submitted and cosigned by both.
    const cp = await witnessedHead();
    assert.deepEqual(cp.cosignatures.map((c) => c.name).sort(), [w1.name, w2.name]);
    for (const c of cp.cosignatures) {
      const vkey = parseCosignatureVerifierKey([w1, w2].find((w) => w.name === c.name)!.vkey);
      assert.equal(c.key_id, vkey.keyHash.toString('hex'));
      assert.match(c.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/);
      assert.equal(Buffer.from(c.signature, 'base64').length, 64);
    }
    // The note: the log's line first, then the cosignatures, each verifying; the policy's quorum met.
    const { text, lines } = splitNote(cp.note);
    assert.equal(lines.length, 3);
    assert.equal(lines[0]!.name, ORIGIN);
    const opened = openNote(cp.note, [parseVerifierKey(LOG_VKEY)]);
    assert.ok(opened.signatures[0]!.verifiedBy);
    for (const [i, c] of cp.cosignatures.entries()) {
      const line = lines[i + 1]!;
      assert.equal(line.name, c.name);
      const verdict = verifyCosignature(text, line, parseCosignatureVerifierKey([w1, w2].find((w) => w.name === c.name)!.vkey), Math.ceil(Date.now() / 1000));
      assert.ok(verdict.ok, JSON.stringify(verdict));
      assert.equal(new Date(verdict.timestamp * 1000).toISOString(), c.time);
    }
    const checked = verifyCheckpointWithPolicy(cp.note, policy);
    assert.ok(checked.ok, JSON.stringify(checked));

    // The same note as text, from checkpoints/latest and from tlog/checkpoint (the newest witnessed one).
    const asText = await admin.client.get(api('/checkpoints/latest'), { token: admin.token, headers: { accept: 'text/plain' } });
    assert.equal(asText.text, cp.note);
    const tlog = await admin.client.get(api('/tlog/checkpoint'), { token: admin.token });
    assert.equal(tlog.status, 200, tlog.text);
    assert.equal(tlog.text, cp.note);

    // The export's last line: the newest witnessed checkpoint (the export's own record may be
    // witnessed by the time it is read), its cosignatures in its note and beside it.
    const exp = parseNdjsonExport((await fetchExport(server, admin)).text);
    const line = exp.checkpoint as unknown as CheckpointBody;
    assert.ok(line.tree_size >= cp.tree_size);
    assert.equal(line.witnessed, true);
    assert.deepEqual(line.cosignatures.map((c) => c.name).sort(), [w1.name, w2.name]);
    assert.deepEqual(splitNote(line.note).lines.map((l) => l.line).slice(1), line.cosignatures.map((c) => splitNote(line.note).lines.find((l) => l.name === c.name)!.line));
    assert.ok(verifyCheckpointWithPolicy(line.note, policy).ok);
    if (line.tree_size === cp.tree_size) assert.equal(line.note, cp.note);

    // Kept append-only beside their checkpoint: one row per witness key, none by the impostor.
    const rows = await server.owner.query<{ witness: string; tree_size: number }>(
      'SELECT witness, tree_size::int AS tree_size FROM audit_cosignatures WHERE tree_size = $1 ORDER BY witness', [cp.tree_size],
    );
    assert.deepEqual(rows.map((r) => r.witness), [w1.name, w2.name]);
    assert.equal((await server.owner.query(`SELECT 1 FROM audit_cosignatures WHERE witness = $1`, [impostor.name])).length, 0);
  });

  test('GET /audit-logs/witnesses shows the policy and each witness\'s state, naming the refusals', async () => {
    const cp = await witnessedHead();
    const body = await until('every witness to have been asked', async () => {
      const b = await witnesses();
      return b.witnesses.every((w) => w.last_cosigned_size !== null || w.last_error !== null) && b.newest_witnessed?.tree_size === cp.tree_size ? b : undefined;
    });
    assert.equal(body.policy, readFileSync(path.join(root, 'policy.txt'), 'utf8'));
    assert.equal(body.quorum_met, true);
    assert.equal(body.newest_witnessed?.tree_size, cp.tree_size);
    for (const w of [w1, w2]) {
      const s = stateOf(body, w);
      assert.equal(s.vkey, w.vkey);
      assert.equal(s.url, w.running!.url);
      assert.equal(s.last_cosigned_size, cp.tree_size);
      assert.ok(s.last_cosigned_at);
      assert.equal(s.last_error, null);
    }
    // The liar named size 1 (409), and the proof from there does not lead to its other root (422).
    const lied = stateOf(body, liar);
    assert.equal(lied.last_cosigned_size, null);
    assert.match(lied.last_error ?? '', /^(422|409)\b/);
    // The impostor's cosignature verifies under its own key, not the policy's: not kept.
    const forged = stateOf(body, impostor);
    assert.equal(forged.last_cosigned_size, null);
    assert.match(forged.last_error ?? '', /no valid cosignature/);
  });

  test('a record\'s tlog-proof verifies with the policy alone', async () => {
    const cp = await witnessedHead();
    const [record] = await server.owner.query<{ id: number }>('SELECT a.id::int AS id FROM audit_log a ORDER BY a.id LIMIT 1 OFFSET 2');
    const json = await admin.client.get<{ seq: number; tree_size: number }>(api(`/${record!.id}/proof?tree_size=${cp.tree_size}`), { token: admin.token });
    assert.equal(json.status, 200, json.text);
    const res = await admin.client.get(api(`/${record!.id}/proof?format=tlog-proof`), { token: admin.token, headers: { accept: 'text/plain' } });
    assert.equal(res.status, 200, res.text);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    const proof = parseTlogProof(res.text);
    assert.equal(proof.index, json.body.seq);
    assert.equal(proof.checkpoint, (await admin.client.get(api('/tlog/checkpoint'), { token: admin.token })).text);
    const verdict = verifyTlogProof(proof, { entry: proof.extra! }, policy);
    assert.ok(verdict.ok, JSON.stringify(verdict));
    assert.deepEqual(verdict.cosignatures.map((c) => c.witness).sort(), [w1.name, w2.name]);
    // The entry is the record's sealed form, canonical.
    assert.equal(JSON.parse(proof.extra!.toString('utf8')).id, record!.id);
    // Against the checkpoint of a size asked for: the same proof here, the newest being witnessed.
    const sized = await admin.client.get(api(`/${record!.id}/proof?format=tlog-proof&tree_size=${cp.tree_size}`), { token: admin.token, headers: { accept: 'text/plain' } });
    assert.equal(sized.text, res.text);
    const none = await admin.client.get(api(`/${record!.id}/proof?format=tlog-proof&tree_size=1`), { token: admin.token, headers: { accept: 'text/plain' } });
    assert.equal(none.status, 404, 'no checkpoint was signed at size 1');
  });
});

describe('the policy, read at start', () => {
  test('an unreadable or malformed policy stops the start, naming AUDIT_WITNESS_POLICY and the line', () => {
    assert.throws(() => loadConfig({ AUDIT_WITNESS_POLICY: path.join(root, 'missing.txt') }), (err: Error) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.message, /AUDIT_WITNESS_POLICY: .*missing\.txt could not be read/);
      return true;
    });
    writeFileSync(path.join(root, 'bad-policy.txt'), `witness ${w1.name} ${w1.vkey}\nwitness ${w2.name} not-a-vkey\nquorum ${w1.name}\n`);
    assert.throws(() => loadConfig({ AUDIT_WITNESS_POLICY: path.join(root, 'bad-policy.txt') }), /AUDIT_WITNESS_POLICY \(.*bad-policy\.txt\): policy line 2/);
  });

  test('without a policy the log asks no witness: /witnesses says so, checkpoints are served unwitnessed', async () => {
    const plain = await startTestServer();
    try {
      const who = await loginAdmin(plain);
      const res = await who.client.get<WitnessesBody>(api('/witnesses'), { token: who.token });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, { policy: null, quorum_met: false, newest_witnessed: null, witnesses: [] });
      const head = await settled<CheckpointBody>(plain, who);
      assert.equal(head.witnessed, false);
      assert.deepEqual(head.cosignatures, []);
      assert.equal((await who.client.get(api('/tlog/checkpoint'), { token: who.token })).text, head.note);
    } finally {
      await plain.close();
    }
  });

  test('a policy whose log line is not the service\'s own key stops the start, naming both', async () => {
    const other = formatVerifierKey(ORIGIN, ed25519PublicKeyRaw(generateKeyPairSync('ed25519').privateKey));
    writeFileSync(path.join(root, 'other-log.txt'), `log ${other}\nwitness ${w1.name} ${w1.vkey} ${w1.running!.url}\nquorum ${w1.name}\n`);
    await assert.rejects(
      startTestServer({ env: { AUDIT_LOG_ORIGIN: ORIGIN, AUDIT_WITNESS_POLICY: path.join(root, 'other-log.txt') } }),
      (err: Error) => {
        assert.match(err.message, /AUDIT_WITNESS_POLICY names the log/);
        assert.ok(err.message.includes(other) && err.message.includes(LOG_VKEY), err.message);
        return true;
      },
    );
  });
});

describe('the cosignatures are append-only', () => {
  test('UPDATE, DELETE and TRUNCATE are refused through the service connection and, by trigger, to the owner', async () => {
    const before = await server.owner.query<{ r: string }>('SELECT s::text AS r FROM audit_cosignatures s ORDER BY checkpoint_id, witness');
    assert.ok(before.length >= 2);
    const refused = /permission denied|append-only/;
    await assert.rejects(server.db.query(`UPDATE audit_cosignatures SET witness = 'someone.else'`), refused);
    await assert.rejects(server.db.query('DELETE FROM audit_cosignatures'), refused);
    await assert.rejects(server.db.query('TRUNCATE audit_cosignatures'), refused);
    await assert.rejects(server.owner.query(`UPDATE audit_cosignatures SET cosigned_at = 0`), /audit_cosignatures is append-only: UPDATE/);
    await assert.rejects(server.owner.query('DELETE FROM audit_cosignatures'), /audit_cosignatures is append-only: DELETE/);
    await assert.rejects(server.owner.query('TRUNCATE audit_cosignatures'), /audit_cosignatures is append-only: TRUNCATE/);
    await assert.rejects(
      server.owner.transaction(async (tx) => {
        await tx.query('SET LOCAL session_replication_role = replica');
        await tx.query('DELETE FROM audit_cosignatures');
      }),
      /audit_cosignatures is append-only: DELETE/,
    );
    assert.deepEqual(await server.owner.query<{ r: string }>('SELECT s::text AS r FROM audit_cosignatures s ORDER BY checkpoint_id, witness'), before);
  });

  test('the service role may only SELECT and INSERT cosignatures, and update witness state', { skip: needsPostgres }, async () => {
    const privileges = async (table: string) =>
      (await server.owner.query<Record<string, boolean>>(
        `SELECT has_table_privilege('teamlog_app', $1::text, 'INSERT') AS "insert", has_table_privilege('teamlog_app', $1::text, 'SELECT') AS "select",
                has_table_privilege('teamlog_app', $1::text, 'UPDATE') AS "update", has_any_column_privilege('teamlog_app', $1::text, 'UPDATE') AS "update_any_column",
                has_table_privilege('teamlog_app', $1::text, 'DELETE') AS "delete", has_table_privilege('teamlog_app', $1::text, 'TRUNCATE') AS "truncate"`,
        [table],
      ))[0];
    assert.deepEqual(await privileges('audit_cosignatures'), { insert: true, select: true, update: false, update_any_column: false, delete: false, truncate: false });
    assert.equal((await privileges('audit_witness_state'))!.update, true, 'a witness\'s state is working state');
    await assert.rejects(server.db.query('DELETE FROM audit_cosignatures'), /permission denied/);
    await assert.rejects(server.db.query('ALTER TABLE audit_cosignatures DISABLE TRIGGER audit_cosignatures_no_update'), /must be owner|permission denied/);
  });
});

describe('a witness that stops, and comes back', () => {
  test('the quorum is not met, the witness\'s error is named, /health/ready is degraded; once back it is caught up', async () => {
    const port = w2.running!.port;
    const before = await witnessedHead();
    await stopWitness(w2);
    await auditedActions(admin, 2);
    const missing = await until('the stopped witness\'s error', async () => {
      const b = await witnesses();
      return stateOf(b, w2).last_error !== null && !b.quorum_met ? b : undefined;
    });
    assert.match(stateOf(missing, w2).last_error!, /^network: /);
    assert.equal(stateOf(missing, w2).last_cosigned_size, before.tree_size, 'it keeps the size it last cosigned');
    assert.ok(missing.newest_witnessed!.tree_size <= before.tree_size);
    // Still cosigned by w1 alone: not witnessed.
    const newest = await settled<CheckpointBody>(server, admin);
    assert.ok(newest.tree_size > before.tree_size);
    assert.equal(newest.witnessed, false);
    // tlog/checkpoint stays on the newest witnessed checkpoint.
    const tlog = await admin.client.get(api('/tlog/checkpoint'), { token: admin.token });
    assert.match(tlog.text, new RegExp(`^${ORIGIN.replace(/[.]/g, '\\.')}\\n${before.tree_size}\\n`));

    const degraded = await until('/health/ready to say degraded', async () => {
      const res = await admin.client.get('/health/ready');
      return res.body?.status === 'degraded' ? res.body : undefined;
    }, MAX_AGE_MS * 4 + 10_000);
    assert.equal(degraded.witnessing.stale, true);
    assert.equal(degraded.witnessing.newest_witnessed.tree_size, before.tree_size);
    assert.ok(degraded.witnessing.unwitnessed_seconds >= 2);
    assert.equal(degraded.sealing, undefined, 'sealing goes on');
    const metrics = await admin.client.get('/metrics');
    assert.match(metrics.text, new RegExp(`teamlog_audit_witness_submissions_total\\{witness="${w2.name.replace('.', '\\.')}",outcome="network"\\} [1-9]`));
    assert.match(metrics.text, /teamlog_audit_witness_lag_seconds [1-9]/);

    // Back on the same address, with the state it had: caught up with one consistency proof.
    w2.running = await startWitness(w2, port);
    const caughtUp = await until('the witness to be caught up', async () => {
      const b = await witnesses();
      const s = stateOf(b, w2);
      return s.last_error === null && s.last_cosigned_size === newest.tree_size && b.quorum_met ? b : undefined;
    });
    assert.equal(caughtUp.newest_witnessed?.tree_size, newest.tree_size);
    assert.equal((await latest()).witnessed, true);
    const ready = await until('/health/ready to be ready', async () => {
      const res = await admin.client.get('/health/ready');
      return res.body?.status === 'ready' ? res.body : undefined;
    });
    assert.equal(ready.witnessing, undefined);
  });
});

describe('teamlog audit verify --policy', () => {
  /** The CLI as the deployment's operator runs it, beside the running server (PostgreSQL: the embedded database admits one process). */
  const verify = (args: string[], env: Record<string, string> = {}) =>
    runTeamlog(['audit', 'verify', ...args], {
      DATA_DIR: path.join(root, 'cli-data'), DATABASE_URL: server.databaseUrl ?? '', AUDIT_SIGNING_KEY: TEST_SIGNING_KEY, JWT_SECRET: server.config.jwtSecret ?? '',
      AUDIT_LOG_ORIGIN: ORIGIN, ...env,
    });
  const policyFile = () => path.join(root, 'policy.txt');

  test('the database: passes while the newest witnessed checkpoint meets the quorum; fails, naming the witness, once the rest waited too long', { skip: needsPostgres }, async () => {
    const head = await witnessedHead();
    const ok = await verify(['--policy', policyFile()]);
    assert.equal(ok.code, 0, ok.stderr + ok.stdout);
    assert.match(ok.stdout, new RegExp(`newest witnessed checkpoint \\(${head.tree_size.toLocaleString('en')} records\\) is cosigned by ${w1.name} .*${w2.name}`));

    const port = w2.running!.port;
    await stopWitness(w2);
    try {
      await auditedActions(admin, 2);
      await until('a newer checkpoint that only w1 cosigned', async () => {
        const c = await latest();
        return c.tree_size > head.tree_size && !c.witnessed && c.cosignatures.some((s) => s.name === w1.name) ? c : undefined;
      });
      // Within AUDIT_WITNESS_MAX_AGE_MS the witnesses have time to catch up: not a failure.
      const waiting = await verify(['--policy', policyFile()], { AUDIT_WITNESS_MAX_AGE_MS: '3600000' });
      assert.equal(waiting.code, 0, waiting.stderr + waiting.stdout);
      assert.match(waiting.stdout, /records after it are not witnessed yet/);
      await new Promise((r) => setTimeout(r, 1100));
      const late = await verify(['--policy', policyFile()], { AUDIT_WITNESS_MAX_AGE_MS: '1000' });
      assert.equal(late.code, 1, late.stderr + late.stdout);
      assert.match(late.stderr, /verification FAILED: .*waited \d+ s for witnesses/);
      assert.match(late.stderr, new RegExp(`no cosignature from ${w2.name.replace('.', '\\.')}`), 'the missing witness is named');
    } finally {
      w2.running = await startWitness(w2, port);
    }
  });

  test('an export, offline: its last line must carry cosignatures meeting the quorum', async () => {
    await witnessedHead();
    const file = path.join(root, 'export.ndjson');
    writeFileSync(file, (await fetchExport(server, admin)).text);
    const offline = (args: string[]) => runTeamlog(['audit', 'verify', '--file', file, '--verifier-key', LOG_VKEY, ...args], { DATA_DIR: path.join(root, 'offline-data') });
    const ok = await offline(['--policy', policyFile()]);
    assert.equal(ok.code, 0, ok.stderr + ok.stdout);
    assert.match(ok.stdout, new RegExp(`is witnessed: cosigned by ${w1.name.replace('.', '\\.')}`));
    // A stricter policy: a quorum of a witness that never cosigned this log.
    const strict = path.join(root, 'strict-policy.txt');
    writeFileSync(strict, `log ${LOG_VKEY}\nwitness ${impostor.name} ${impostor.vkey}\nquorum ${impostor.name}\n`);
    const refused = await offline(['--policy', strict]);
    assert.equal(refused.code, 1, refused.stderr + refused.stdout);
    assert.match(refused.stderr, new RegExp(`does not meet the witness policy \\(quorum ${impostor.name.replace('.', '\\.')}\\)`));
    const unreadable = await offline(['--policy', path.join(root, 'no-such-policy.txt')]);
    assert.equal(unreadable.code, 2, unreadable.stderr);
  });
});
