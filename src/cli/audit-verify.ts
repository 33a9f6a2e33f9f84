// `teamlog audit verify`: against the database (optionally against a checkpoint saved
// outside it), or, with --file, an export with no database at all.
import { readFileSync } from 'node:fs';
import { loadConfig } from '../config.js';
import type { Policy } from '../tlog/policy.js';
import type { NoteVerifier } from '../tlog/signed-note.js';
import { databaseQuorumVerdict, noteQuorumVerdict, readPolicyFile } from './audit-verify-policy.js';
import { conclude, openForVerification, personalValueKeys, trustedAnchors, type Verdict } from './audit-verify-checks.js';
import { CliError, EXPORT_THROUGH_SERVER, NotCheckedError, UsageError, cliLogger, databaseLabel, lockEmbeddedDatabase, options, type Command } from './support.js';

const USAGE = 'teamlog audit verify [--checkpoint <saved.note>] [--public-key <key.pem> | --verifier-key <vkey>] [--file <export.ndjson> [--complete]] [--policy <policy>]';

/** While the server holds the embedded database: its export, verified here with no database at all. */
const WHILE_THE_SERVER_RUNS = [
  'To verify while it runs, verify an export of the running server instead, which needs no database:',
  EXPORT_THROUGH_SERVER,
  '  teamlog audit verify --file export.ndjson --public-key key.pem',
  'with key.pem the public_key of GET /api/v1/audit-logs/public-keys',
  '(or --verifier-key <its note_verifier_key>);',
  'add --complete to an unfiltered export so that a removed line is caught too.',
].join('\n');

/** A progress line on a terminal (stderr), redrawn in place at most every 200 ms; nothing when piped. */
function progress(label: string) {
  const tty = process.stderr.isTTY;
  const started = Date.now();
  let drawn = 0;
  return {
    update(done: number, total?: number) {
      if (!tty || Date.now() - drawn < 200) return;
      drawn = Date.now();
      const rate = Math.round(done / Math.max(0.001, (Date.now() - started) / 1000));
      const width = 30;
      const bar = total ? `[${'#'.repeat(Math.round((done / total) * width)).padEnd(width, '.')}] ${Math.floor((done / total) * 100)}% ` : '';
      process.stderr.write(`\r${label} ${bar}${done.toLocaleString('en')}${total ? `/${total.toLocaleString('en')}` : ''} records, ${rate.toLocaleString('en')}/s `);
    },
    end() {
      if (tty && drawn > 0) process.stderr.write('\r\x1b[K');
    },
  };
}

export const auditVerify: Command = {
  usage: USAGE,
  summary: 'Verify the audit log (or an export) against its signed checkpoints',
  details: [
    'Against the database (MIGRATION_DATABASE_URL or DATABASE_URL, else the embedded one): recomputes',
    'every sealed record\'s leaf, rebuilds the RFC 6962 tree and checks every signed checkpoint; the',
    'newest must verify under the service\'s signing key (AUDIT_SIGNING_KEY, or the one in its secrets',
    'directory) or under --public-key / --verifier-key. Personal values are checked against their',
    'records\' refs with JWT_SECRET or AUDIT_PERSONAL_DATA_SECRET (and ..._PREVIOUS_SECRETS).',
    '  --checkpoint <file>    a checkpoint note saved earlier, outside the database (e.g. by the',
    '                         webhook\'s receiver): the log must extend it, so a truncated or',
    '                         rewritten tail is caught',
    '  --file <export>        verify an NDJSON export (GET /audit-logs/export, teamlog audit export)',
    '                         with no database; needs --public-key (PEM, from GET',
    '                         /audit-logs/public-keys) or --verifier-key',
    '  --complete             with --file: the export must hold every record its checkpoint covers (an',
    '                         unfiltered export), so that a removed line is caught whatever it says of',
    '                         its filters',
    '  --policy <file>        a C2SP tlog-policy (witness, group, quorum lines): the checkpoint',
    '                         verified against must carry cosignatures meeting its quorum: the',
    '                         newest witnessed one in the database (the checkpoints after it may',
    '                         wait AUDIT_WITNESS_MAX_AGE_MS for witnesses), the saved one, or the',
    '                         export\'s; the missing witnesses are named',
    'Exit codes: 0 everything verified; 1 something did not (FAILED, naming the first bad record);',
    '2 a usage error or an input file that cannot be read; 3 a check could not be made (no key for',
    'personal values, or not this deployment\'s; no trusted signing key; the database not reachable):',
    'everything else was verified, and what was not checked is said, never reported as FAILED.',
  ].join('\n'),
  async run(args) {
    const opts = options(args, {
      checkpoint: { type: 'string' }, 'public-key': { type: 'string' }, 'verifier-key': { type: 'string' }, file: { type: 'string' }, complete: { type: 'boolean' },
      policy: { type: 'string' },
    });
    if (opts['public-key'] !== undefined && opts['verifier-key'] !== undefined) throw new UsageError('give --public-key or --verifier-key, not both');
    if (opts.complete && opts.file === undefined) throw new UsageError('--complete applies to --file');
    const [{ noteVerifier, parseVerifierKey }, { createPublicKey }] = await Promise.all([import('../tlog/signed-note.js'), import('node:crypto')]);
    /** The verifiers the operator named, for a log of this origin. */
    const givenVerifiers = (origin: string) => {
      try {
        if (opts['verifier-key'] !== undefined) return [parseVerifierKey(opts['verifier-key'])];
        if (opts['public-key'] !== undefined) return [noteVerifier(origin, createPublicKey(readText(opts['public-key'], 'the public key')))];
      } catch (err) {
        if (err instanceof UsageError) throw err;
        throw new CliError(`the ${opts['verifier-key'] !== undefined ? 'verifier key' : 'public key'} is not an Ed25519 key: ${(err as Error).message}`);
      }
      return undefined;
    };

    const policy = opts.policy !== undefined ? await readPolicyFile(opts.policy, false) : undefined;
    if (opts.file !== undefined) {
      if (opts.checkpoint !== undefined) throw new UsageError('--checkpoint applies to the database; an export carries its own checkpoint');
      return verifyExport(opts.file, opts.complete === true, givenVerifiers, policy);
    }
    const external = opts.checkpoint !== undefined ? readText(opts.checkpoint, 'the checkpoint') : undefined;
    return verifyTheDatabase(external, givenVerifiers, policy);
  },
};

/** An input file's text; one that cannot be read is a usage error (exit 2), never a failed verification. */
function readText(file: string, what: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** --file: an export, against the key the operator holds, with no database. */
async function verifyExport(file: string, complete: boolean, givenVerifiers: (origin: string) => NoteVerifier[] | undefined, policy: Policy | undefined): Promise<number> {
  const { verifyExportFile } = await import('../modules/audit/evidence/export.verifier.js');
  // The key name of a checkpoint is its origin: read from the export's own note for a PEM key.
  const origin = await exportOrigin(file);
  // No signed note, no origin: nothing in the export can be checked against any key.
  if (origin === '') throw new CliError('verification FAILED: the export carries no signed checkpoint (its last line has no note): nothing in it can be checked against a key');
  const verifiers = givenVerifiers(origin);
  if (!verifiers) throw new UsageError('--file needs --public-key or --verifier-key: an export is checked against a key you hold');
  const bar = progress('verifying');
  const report = await verifyExportFile(file, verifiers, (n) => bar.update(n), complete).finally(() => bar.end());
  const verdicts: Verdict[] = [
    report.ok
      ? {
          check: 'the export', outcome: 'passed',
          said: [
            `${report.records_checked.toLocaleString('en')} records verified against the signed checkpoint of ${report.tree_size.toLocaleString('en')} records`,
            ...(report.records_without_proof > 0 ? [`${report.records_without_proof} newer records carry no proof yet (not covered by the checkpoint)`] : []),
          ].join('; '),
        }
      : { check: 'the export', outcome: 'failed', problem: problemOf(report) },
  ];
  if (policy) verdicts.push(await noteQuorumVerdict(await exportNote(file), policy, verifiers, "the export's checkpoint"));
  return conclude(verdicts, (problem) => new CliError(`verification FAILED: ${problem}`));
}

/**
 * The database's log, as checks with a verdict each (audit-verify-checks.ts): the records, tree,
 * tiles and checkpoints; the newest checkpoint under a key held outside the database; the
 * personal values under the deployment's key. A check that cannot be made is said, and the others
 * are made all the same.
 */
async function verifyTheDatabase(external: string | undefined, givenVerifiers: (origin: string) => NoteVerifier[] | undefined, policy: Policy | undefined): Promise<number> {
  const config = loadConfig();
  const url = config.migrationDatabaseUrl ?? config.databaseUrl;
  const log = await cliLogger();
  const [{ openDatabase }, { resolveOrigin }, { verifyDatabase, verificationAnswer }, { NoteError }] = await Promise.all([
    import('../db/open.js'), import('../modules/audit/evidence/log.identity.js'), import('../modules/audit/evidence/log.verifier.js'), import('../tlog/signed-note.js'),
  ]);
  const unlock = url ? () => {} : lockEmbeddedDatabase(config.dataDir, WHILE_THE_SERVER_RUNS, NotCheckedError);
  try {
    const db = await openForVerification(config, () => openDatabase(config, (err) => log.warn(`database connection error: ${(err as Error).message}`)));
    try {
      const origin = await resolveOrigin(db, config.auditLogOrigin);
      const anchor = await trustedAnchors(db, config, origin, givenVerifiers(origin));
      const personal = await personalValueKeys(db, config);
      const bar = progress('verifying');
      const report = await verifyDatabase(db, {
        anchors: anchor.anchors, origin, external, personalDataKeys: personal.keys, sealStallMs: config.auditSealStallMs, onProgress: (n, total) => bar.update(n, total),
      })
        .catch((err: unknown) => {
          if (err instanceof NoteError) throw new CliError(`the saved checkpoint: ${err.message}`);
          throw err;
        })
        .finally(() => bar.end());
      // As GET /audit-logs/verify answers it (log.verifier.ts, verificationAnswer): records
      // committed after the last seal, with no server running to seal them, are records there is
      // nothing to check against yet (not_checked), not records found changed.
      const answer = verificationAnswer(report);
      const verdicts: Verdict[] = [
        answer.ok
          ? {
              check: 'the log', outcome: 'passed',
              said: [
                `${report.records_checked.toLocaleString('en')} records and ${report.checkpoints_checked.toLocaleString('en')} checkpoints verified in ${databaseLabel(config, url)}`,
                report.head ? `head: seq ${report.head.seq}, root ${report.head.root_hash}` : 'nothing is sealed yet',
                ...(external !== undefined ? ['the log extends the saved checkpoint'] : []),
              ].join('; '),
            }
          : { check: 'the log', outcome: 'failed', problem: problemOf(answer) },
      ];
      // Beside a failure, the failure is the news (and stderr says only it).
      if (answer.ok) {
        for (const n of answer.not_checked ?? []) {
          verdicts.push({ check: n.what, outcome: 'not-made', why: `${n.why}, so there is nothing to check them against yet. Start the service, let it seal them, and verify again` });
        }
      }
      // Nothing signed yet: there is no newest checkpoint to hold to a key.
      if (anchor.notMade && report.checkpoints_checked > 0) verdicts.push(anchor.notMade);
      if (policy) {
        // A saved checkpoint is the one verified against: it must carry the quorum itself.
        verdicts.push(external !== undefined
          ? await noteQuorumVerdict(external, policy, anchor.anchors, 'the saved checkpoint')
          : await databaseQuorumVerdict(db, policy, anchor.anchors, config.auditWitnessMaxAgeMs));
      }
      if (personal.notMade) verdicts.push(personal.notMade);
      else if (answer.ok) {
        verdicts.push({
          check: 'personal values', outcome: 'passed',
          said: personal.stored ? `personal values: ${(report.personal_values_checked ?? 0).toLocaleString('en')} checked against their records' refs` : 'personal values: none stored',
        });
      }
      return conclude(verdicts, (problem) => new CliError(`verification FAILED: ${problem}`));
    } finally {
      await db.close();
    }
  } finally {
    unlock();
  }
}

/** The origin, first line of the checkpoint note on the export's last line: the name a PEM key is given. */
async function exportOrigin(file: string): Promise<string> {
  const note = await exportNote(file);
  return note.slice(0, Math.max(0, note.indexOf('\n')));
}

/** The checkpoint note (with its cosignature lines) on the export's last line, or '' when it carries none. */
async function exportNote(file: string): Promise<string> {
  const { lastLine } = await import('../modules/audit/evidence/export.verifier.js');
  let last: string;
  try {
    last = await lastLine(file);
  } catch (err) {
    throw new UsageError(`cannot read the export ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    const note = (JSON.parse(last) as { note?: unknown }).note;
    return typeof note === 'string' ? note : '';
  } catch {
    return '';
  }
}

/** A failed report's problem, with the record (and the export's line) it names. */
function problemOf(report: { first_bad_id?: number; problem?: string; line?: number }): string {
  const where = [report.first_bad_id !== undefined ? `first bad record: ${report.first_bad_id}` : '', report.line ? `line ${report.line}` : ''].filter(Boolean).join(', ');
  return `${report.problem}${where ? ` (${where})` : ''}`;
}
