// `teamlog witness keygen|serve`, a C2SP tlog-witness (C2SP/C2SP tlog-witness.md), as an operator
// runs it: real processes, real HTTP, a log made here with src/tlog/ and its own key.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseCosignatureVerifierKey, verifyCosignature, type CosignatureVerifier } from '../src/tlog/cosignature.js';
import { consistencyProof, leafHash, nodeHash, rootHash, type Hash, type NodeKey } from '../src/tlog/merkle.js';
import {
  formatCheckpoint, formatVerifierKey, generateEd25519PrivateKeyPem, loadEd25519PrivateKey, noteSigner, openNote, parseVerifierKey,
  signNote, type NoteSigner,
} from '../src/tlog/signed-note.js';
import { stateFile } from '../src/witness/witness.state.js';
import { runTeamlog } from './helpers/cli.js';
import { serveWitness, stopWitnessProcess } from './helpers/witness.js';

const ORIGIN = 'log.example/witnessed';
const WITNESS = 'witness.example/w1';

/** A log of `entry <i>` leaves, with the node hashes merkle.ts asks for. */
const leaves: Hash[] = Array.from({ length: 40 }, (_, i) => leafHash(`entry ${i}`));
function node({ level, index }: NodeKey, from: Hash[] = leaves): Hash {
  if (level === 0) return from[index]!;
  return nodeHash(node({ level: level - 1, index: 2 * index }, from), node({ level: level - 1, index: 2 * index + 1 }, from));
}
const rootOf = (size: number, from: Hash[] = leaves): Hash => rootHash(size, (k) => node(k, from));

function checkpoint(signer: NoteSigner, size: number, root = rootOf(size), origin = ORIGIN): { text: string; note: string } {
  const text = formatCheckpoint({ origin, treeSize: size, rootHash: root, extensions: [] });
  return { text, note: signNote(text, signer) };
}

const body = (old: number, proof: Hash[], note: string): string => `old ${old}\n${proof.map((h) => `${h.toString('base64')}\n`).join('')}\n${note}`;

interface Answer { status: number; type: string | null; text: string }
async function post(url: string, payload: string, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(`${url}/add-checkpoint`, { method: 'POST', body: payload, ...init });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

/** The witness's cosignatures in a 200's body, each checked against its vkey. */
function assertCosigned(answer: Answer, cp: { text: string; note: string }, witness: CosignatureVerifier, logVerifier = log.verifier): void {
  assert.equal(answer.status, 200, answer.text);
  assert.match(answer.text, /^(?:— \S+ \S+\n)+$/);
  const opened = openNote(cp.note + answer.text, [logVerifier]);
  const cosignatures = opened.signatures.filter((s) => s.verifiedBy === undefined);
  assert.equal(cosignatures.length, 1);
  const verdict = verifyCosignature(cp.text, cosignatures[0]!, witness, Math.floor(Date.now() / 1000) + 1);
  assert.ok(verdict.ok, JSON.stringify(verdict));
  assert.ok(Math.abs(verdict.timestamp - Date.now() / 1000) < 600, 'dated now');
}

function assertConflict(answer: Answer, size: number): void {
  assert.equal(answer.status, 409, answer.text);
  assert.equal(answer.type, 'text/x.tlog.size');
  assert.equal(answer.text, `${size}\n`);
}

const log = (() => {
  const signer = noteSigner(ORIGIN, loadEd25519PrivateKey(generateEd25519PrivateKeyPem()));
  const vkey = formatVerifierKey(ORIGIN, signer.publicKeyRaw);
  return { signer, vkey, verifier: parseVerifierKey(vkey) };
})();

let dir: string;
let witnessKey: CosignatureVerifier;
before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'teamlog-witness-'));
  // tlog-policy syntax: a log's own policy file will do (its witness and quorum lines are skipped).
  writeFileSync(path.join(dir, 'logs.txt'), `# the logs this witness cosigns for\nlog ${log.vkey}\nquorum none\n`);
  const made = await runTeamlog(['witness', 'keygen', '--name', WITNESS, '--key', path.join(dir, 'witness.key')], {});
  assert.equal(made.code, 0, made.stderr);
  witnessKey = parseCosignatureVerifierKey(made.stdout.trim());
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('teamlog witness keygen', () => {
  test('prints a vkey that parseCosignatureVerifierKey reads, and writes the key readable by its owner only', () => {
    assert.equal(witnessKey.name, WITNESS);
    assert.equal(statSync(path.join(dir, 'witness.key')).mode & 0o777, 0o600);
    // Go's note signer key form, carrying the name: serve needs nothing else.
    assert.match(readFileSync(path.join(dir, 'witness.key'), 'utf8'), new RegExp(`^PRIVATE\\+KEY\\+${WITNESS.replace(/[.+]/g, '\\$&')}\\+[0-9a-f]{8}\\+[A-Za-z0-9+/]+=*\\n$`));
  });

  test('refuses to overwrite an existing key file (exit 1), and leaves it as it was', async () => {
    const before = readFileSync(path.join(dir, 'witness.key'), 'utf8');
    const again = await runTeamlog(['witness', 'keygen', '--name', WITNESS, '--key', path.join(dir, 'witness.key')], {});
    assert.equal(again.code, 1);
    assert.match(again.stderr, /exists already/);
    assert.equal(again.stdout, '');
    assert.equal(readFileSync(path.join(dir, 'witness.key'), 'utf8'), before);
  });
});

describe('teamlog witness serve', () => {
  test('refuses a malformed logs file with exit 2, naming the line', async () => {
    const bad = mkdtempSync(path.join(tmpdir(), 'teamlog-witness-bad-'));
    try {
      writeFileSync(path.join(bad, 'logs.txt'), `log ${log.vkey}\n\nnot-a-vkey-line\n`);
      const res = await runTeamlog(['witness', 'serve', '--key', path.join(dir, 'witness.key'), '--logs', path.join(bad, 'logs.txt'),
        '--port', '0', '--data', path.join(bad, 'state')], {});
      assert.equal(res.code, 2, res.stderr);
      assert.match(res.stderr, /line 3/);
    } finally {
      rmSync(bad, { recursive: true, force: true });
    }
  });

  test('cosigns a first checkpoint and a consistent later one, and refuses each bad request with the spec\'s status', async () => {
    const w = await serveWitness(dir);
    try {
      const cp5 = checkpoint(log.signer, 5);
      assertCosigned(await post(w.url, body(0, [], cp5.note)), cp5, witnessKey);

      const cp12 = checkpoint(log.signer, 12);
      const proof = consistencyProof(5, 12, (k) => node(k));
      assertCosigned(await post(w.url, body(5, proof, cp12.note)), cp12, witnessKey);

      // Refusals: each cosigns nothing, so that the state stays at 12.
      const cp20 = checkpoint(log.signer, 20);
      const proof20 = consistencyProof(12, 20, (k) => node(k));
      assertConflict(await post(w.url, body(5, consistencyProof(5, 20, (k) => node(k)), cp20.note)), 12);
      assertConflict(await post(w.url, body(0, [], cp20.note)), 12);

      const wrongProof = proof20.map((h, i) => (i === 0 ? leafHash('not in the log') : h));
      assert.equal((await post(w.url, body(12, wrongProof, cp20.note))).status, 422);

      // Another log's history: a checkpoint at 20 that does not extend the 12 the witness cosigned.
      const other = leaves.map((h, i) => (i === 3 ? leafHash('rewritten') : h));
      const forked = checkpoint(log.signer, 20, rootOf(20, other));
      assert.equal((await post(w.url, body(12, consistencyProof(12, 20, (k) => node(k, other)), forked.note))).status, 422);
      // The spec answers a different root at the size it holds with 409.
      assertConflict(await post(w.url, body(12, [], checkpoint(log.signer, 12, rootOf(12, other)).note)), 12);

      const stranger = noteSigner(ORIGIN, loadEd25519PrivateKey(generateEd25519PrivateKeyPem()));
      assert.equal((await post(w.url, body(12, proof20, checkpoint(stranger, 20).note))).status, 403);
      const tampered = cp20.note.replace(/ (\S+)\n$/, (_, sig: string) => ` ${Buffer.from(sig, 'base64').fill(7, 10, 20).toString('base64')}\n`);
      assert.equal((await post(w.url, body(12, proof20, tampered))).status, 403);

      const otherOrigin = noteSigner('log.example/unknown', loadEd25519PrivateKey(generateEd25519PrivateKeyPem()));
      assert.equal((await post(w.url, body(0, [], checkpoint(otherOrigin, 3, rootOf(3), 'log.example/unknown').note))).status, 404);

      assert.equal((await post(w.url, body(21, [], cp20.note))).status, 400);
      for (const malformed of ['', 'old 12\n', `old 012\n\n${cp20.note}`, `old 12\nnot-base64\n\n${cp20.note}`, `old 12\n\n${cp20.text}`]) {
        assert.equal((await post(w.url, malformed)).status, 400, JSON.stringify(malformed));
      }
      assert.equal((await post(w.url, 'a'.repeat(70 * 1024))).status, 413);
      assert.equal((await fetch(`${w.url}/add-checkpoint`)).status, 405);
      assert.equal((await fetch(`${w.url}/other`, { method: 'POST', body: 'x' })).status, 404);

      // Nothing of the above moved the state: 12 → 20 is still what it takes.
      assertCosigned(await post(w.url, body(12, proof20, cp20.note)), cp20, witnessKey);
      // The same checkpoint again is cosigned again; it is still the latest.
      assertCosigned(await post(w.url, body(20, [], cp20.note)), cp20, witnessKey);
    } finally {
      assert.equal(await stopWitnessProcess(w), 0);
    }
  });

  test('keeps its state across a restart: the old size it cosigned is required', async () => {
    const w = await serveWitness(dir);
    try {
      assertConflict(await post(w.url, body(0, [], checkpoint(log.signer, 25).note)), 20);
      // A signature by a key it does not know is ignored, as the spec says: the log's own suffices.
      const stranger = noteSigner('someone.example/else', loadEd25519PrivateKey(generateEd25519PrivateKeyPem()));
      const cp25 = checkpoint(log.signer, 25);
      const twice = { text: cp25.text, note: signNote(signNote(cp25.text, stranger), log.signer) };
      const answer = await post(w.url, body(20, consistencyProof(20, 25, (k) => node(k)), twice.note));
      assert.equal(answer.status, 200, answer.text);
      assert.equal(verifyCosignature(cp25.text, openNote(cp25.note + answer.text, [log.verifier]).signatures.at(-1)!, witnessKey).ok, true);
    } finally {
      await stopWitnessProcess(w);
    }
  });

  test('after a kill -9 during or right after a cosignature, it never cosigns a smaller size or another root at a size it cosigned', async () => {
    let held = 25;
    for (const target of [30, 35]) {
      const w = await serveWitness(dir);
      const cp = checkpoint(log.signer, target);
      const pending = post(w.url, body(held, consistencyProof(held, target, (k) => node(k)), cp.note)).catch(() => undefined);
      // The first round is killed as soon as the request is sent; the second right after its answer.
      const answered = target === 30 ? undefined : await pending;
      w.child.kill('SIGKILL');
      await w.exited;
      const first = answered ?? (await pending);

      const again = await serveWitness(dir);
      try {
        const probe = await post(again.url, body(0, [], checkpoint(log.signer, 1).note));
        assert.equal(probe.status, 409);
        const size = Number(probe.text);
        assert.ok(size === held || size === target, `the state is ${size}, neither ${held} nor ${target}`);
        if (first?.status === 200) assert.equal(size, target, 'a cosignature was sent for a state that was not kept');
        // A smaller size than the one it holds, and another root at the size it holds: refused.
        assertConflict(await post(again.url, body(held - 5, consistencyProof(held - 5, held, (k) => node(k)), checkpoint(log.signer, held).note)), size);
        const other = leaves.map((h, i) => (i === 0 ? leafHash('rewritten') : h));
        const forked = checkpoint(log.signer, size, rootOf(size, other));
        assertConflict(await post(again.url, body(size, [], forked.note)), size);
        if (size === held) {
          assert.equal((await post(again.url, body(held, consistencyProof(held, target, (k) => node(k, other)), checkpoint(log.signer, target, rootOf(target, other)).note))).status, 422);
        }
        held = size;
      } finally {
        await stopWitnessProcess(again);
      }
    }
  });

  test('refuses to start on an unreadable state file (exit 1), never resetting it', async () => {
    const stateDir = path.join(dir, 'state');
    const file = stateFile(stateDir, ORIGIN);
    const kept = readFileSync(file, 'utf8');
    writeFileSync(file, '{"origin":');
    try {
      const res = await runTeamlog(['witness', 'serve', '--key', path.join(dir, 'witness.key'), '--logs', path.join(dir, 'logs.txt'),
        '--port', '0', '--data', stateDir], {});
      assert.equal(res.code, 1, res.stderr);
      assert.match(res.stderr, /cannot be read/);
      assert.equal(readFileSync(file, 'utf8'), '{"origin":');
    } finally {
      writeFileSync(file, kept);
    }
  });
});
