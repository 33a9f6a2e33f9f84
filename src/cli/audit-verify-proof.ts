// `teamlog audit verify-proof`: a C2SP tlog-proof (c2sp.org/tlog-proof@v1, as GET
// /audit-logs/:id/proof?format=tlog-proof serves it) checked with nothing but the file and a
// tlog-policy: no database, no network, no configuration. What an outside auditor holding one
// record's proof runs. The proof's `extra` is the record's entry (the JCS of its sealed form) and
// its `index` the record's seq, so the inclusion path authenticates the record itself.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Policy } from '../tlog/policy.js';
import type { TlogProof } from '../tlog/proof-bundle.js';
import type { Checkpoint, OpenedNote } from '../tlog/signed-note.js';
import { cosignaturesNotAfter, readPolicyFile } from './audit-verify-policy.js';
import { CliError, NotCheckedError, UsageError, out, type Command } from './support.js';

const USAGE = 'teamlog audit verify-proof <file.tlog-proof> --policy <policy>';


/** The proof file and the policy file, from the command line. */
function parseCommandLine(args: string[]): { proofFile: string; policyFile: string } {
  let parsed;
  try {
    parsed = parseArgs({ args, options: { policy: { type: 'string' } }, strict: true, allowPositionals: true });
  } catch (err) {
    throw new UsageError((err as Error).message.split('. ')[0]!);
  }
  const [proofFile, ...extra] = parsed.positionals;
  if (proofFile === undefined) throw new UsageError('name the .tlog-proof file to check');
  if (extra.length > 0) throw new UsageError(`one proof file at a time (also given: ${extra.join(' ')})`);
  const policyFile = parsed.values.policy;
  if (policyFile === undefined || policyFile === '') throw new UsageError('--policy is required: a proof is checked against the logs and witnesses you trust');
  return { proofFile, policyFile };
}

/**
 * The file's bytes. A file that cannot be read is never a bad proof: it is an input error (exit 2),
 * as for every command's input files (docs/operations.md, "The command line").
 */
function readBytes(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new UsageError(`cannot read ${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}


async function loadProof(file: string): Promise<TlogProof> {
  const { ProofError, parseTlogProof } = await import('../tlog/proof-bundle.js');
  const bytes = readBytes(file, 'the proof');
  try {
    return parseTlogProof(bytes);
  } catch (err) {
    if (err instanceof ProofError) throw new CliError(`verification FAILED: ${err.message}`);
    throw err;
  }
}

const isoTime = (seconds: number) => new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');

/**
 * What the proof's checkpoint shows, line by line, for the operator: the log's signature, each
 * policy witness's cosignature (valid, invalid or missing) and the quorum. The verdict itself is
 * verifyTlogProof's; this only says why.
 */
async function describeCheckpoint(proof: TlogProof, policy: Policy, notAfter: number): Promise<string[]> {
  const [{ NoteError }, { openNote, parseCheckpoint }, { checkCosignatures }, { describeUnmetQuorum, evaluateQuorum }] = await Promise.all([
    import('../tlog/note-format.js'), import('../tlog/signed-note.js'), import('../tlog/cosignature.js'), import('../tlog/policy.js'),
  ]);
  let opened: OpenedNote;
  let checkpoint: Checkpoint;
  try {
    opened = openNote(proof.checkpoint, policy.logs.map((l) => l.verifier));
    checkpoint = parseCheckpoint(opened.text);
  } catch (err) {
    if (err instanceof NoteError) return [`checkpoint: ${err.message}`];
    throw err;
  }
  const lines = [`checkpoint: ${checkpoint.origin}, ${checkpoint.treeSize.toLocaleString('en')} entries, root ${checkpoint.rootHash.toString('base64')}`];
  const log = opened.signatures.find((s) => s.verifiedBy?.name === checkpoint.origin);
  lines.push(log ? `log signature: verified (${log.name}+${log.keyHash.toString('hex')})` : `log signature: none by a policy log named ${checkpoint.origin}`);

  const checks = checkCosignatures(opened.text, opened.signatures, policy.witnesses.map((w) => w.verifier), notAfter);
  const cosigned: string[] = [];
  policy.witnesses.forEach((w, i) => {
    const { timestamp, problems } = checks[i]!;
    if (problems.length > 0) lines.push(`witness ${w.name}: INVALID (${problems.join('; ')})`);
    else if (timestamp === undefined) lines.push(`witness ${w.name}: missing (no cosignature)`);
    else {
      cosigned.push(w.name);
      lines.push(`witness ${w.name}: cosigned at ${isoTime(timestamp)}`);
    }
  });
  const quorum = evaluateQuorum(policy, cosigned);
  lines.push(`quorum ${policy.quorum}: ${quorum.met ? 'met' : `NOT met (${describeUnmetQuorum(quorum)})`}`);
  return lines;
}

/** "record 12 (CREATE_TASK at 2026-…)" when the entry is a Teamlog record; "" for other logs' entries. */
function describeEntry(entry: Buffer): string {
  try {
    const record = JSON.parse(entry.toString('utf8')) as { id?: unknown; action?: unknown; timestamp?: unknown };
    if (typeof record.id !== 'number' || typeof record.action !== 'string') return '';
    return `record ${record.id} (${record.action}${typeof record.timestamp === 'string' ? ` at ${record.timestamp}` : ''}) is `;
  } catch {
    return '';
  }
}

export const auditVerifyProof: Command = {
  usage: USAGE,
  summary: 'Verify one record\'s c2sp.org/tlog-proof offline against a witness policy',
  details: [
    'Checks a c2sp.org/tlog-proof@v1 file (GET /api/v1/audit-logs/<id>/proof?format=tlog-proof) with',
    'nothing else: no database, no network. The proof\'s checkpoint must be signed by a log of the',
    'policy (its "log <vkey>" lines), cosigned (cosignature/v1) by witnesses meeting its quorum, and',
    'the record it carries (extra: the JCS of its sealed form) must be included at its index (seq).',
    '  --policy <file>   a C2SP tlog-policy: log, witness, group and quorum lines',
    'Prints the log signature, each witness (cosigned, missing or invalid) and the quorum.',
    'Exit code 0 when the proof verifies; 1 when it does not (a malformed proof, a bad signature or',
    'cosignature, an entry not at its index, a quorum not met: the missing witnesses are named);',
    '2 for a file that cannot be read or a policy that does not parse; 3 when the proof carries no',
    'entry (no extra line), so that its inclusion could not be checked.',
  ].join('\n'),
  async run(args) {
    const { proofFile, policyFile } = parseCommandLine(args);
    const policy = await readPolicyFile(policyFile, true);
    const proof = await loadProof(proofFile);
    const notAfter = cosignaturesNotAfter();
    for (const line of await describeCheckpoint(proof, policy, notAfter)) out(line);

    const [{ verifyTlogProof }, { verifyCheckpointWithPolicy }] = await Promise.all([import('../tlog/proof-bundle.js'), import('../tlog/policy.js')]);
    if (proof.extra === undefined) {
      // No entry, no leaf to check the path from: the checkpoint is checked, the inclusion is not
      // made, which is not a bad proof (exit 3, never FAILED).
      const checked = verifyCheckpointWithPolicy(proof.checkpoint, policy, { notAfter });
      if (!checked.ok) throw new CliError(`verification FAILED: ${checked.problem}`);
      throw new NotCheckedError(`the inclusion of entry ${proof.index}: ${proofFile} carries no entry (no "extra" line) to check it from; its checkpoint verified`);
    }
    const verdict = verifyTlogProof(proof, { entry: proof.extra }, policy, { notAfter });
    if (!verdict.ok) throw new CliError(`verification FAILED: ${verdict.problem}`);
    out(`inclusion: entry ${verdict.index} leads to the checkpoint's root hash`);
    const witnesses = verdict.cosignatures.map((c) => c.witness);
    out(`OK: ${describeEntry(proof.extra)}entry ${verdict.index} of ${verdict.checkpoint.origin}'s checkpoint of ${verdict.checkpoint.treeSize.toLocaleString('en')} entries, `
      + `${witnesses.length > 0 ? `cosigned by ${witnesses.join(', ')}` : 'with no cosignature'} (quorum ${policy.quorum} met)`);
  },
};
