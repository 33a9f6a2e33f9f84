// `teamlog audit verify`: against the database (optionally against a checkpoint saved
// outside it), or, with --file, an export with no database at all.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../config.js';
import { CliError, EXPORT_THROUGH_SERVER, UsageError, cliLogger, databaseLabel, lockEmbeddedDatabase, options, out, type Command } from './support.js';

const USAGE = 'teamlog audit verify [--checkpoint <saved.note>] [--public-key <key.pem> | --verifier-key <vkey>] [--file <export.ndjson> [--complete]]';

/** While the server holds the embedded database: its export, verified here with no database at all. */
const WHILE_THE_SERVER_RUNS = [
  'To verify while it runs, verify an export of the running server instead, which needs no database:',
  EXPORT_THROUGH_SERVER,
  '  teamlog audit verify --file export.ndjson --public-key key.pem',
  'with key.pem the public_key of GET /api/v1/audit-logs/public-keys (or --verifier-key <its note_verifier_key>);',
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
    'Against the database (MIGRATION_DATABASE_URL or DATABASE_URL, else the embedded one): recomputes every sealed',
    'record\'s leaf, rebuilds the RFC 6962 tree and checks every signed checkpoint; the newest must verify under',
    'the service\'s signing key (AUDIT_SIGNING_KEY, or the one in DATA_DIR) or under --public-key / --verifier-key.',
    '  --checkpoint <file>    a checkpoint note saved earlier, outside the database (e.g. by the webhook\'s receiver):',
    '                         the log must extend it, so a truncated or rewritten tail is caught',
    '  --file <export>        verify an NDJSON export (GET /audit-logs/export, teamlog audit export) with no',
    '                         database; needs --public-key (PEM, from GET /audit-logs/public-keys) or --verifier-key',
    '  --complete             with --file: the export must hold every record its checkpoint covers (an unfiltered',
    '                         export), so that a removed line is caught whatever the export says of its filters',
    'Exit code 0 when everything verifies, 1 when something does not (the first bad record is named).',
  ].join('\n'),
  async run(args) {
    const opts = options(args, {
      checkpoint: { type: 'string' }, 'public-key': { type: 'string' }, 'verifier-key': { type: 'string' }, file: { type: 'string' }, complete: { type: 'boolean' },
    });
    if (opts['public-key'] !== undefined && opts['verifier-key'] !== undefined) throw new UsageError('give --public-key or --verifier-key, not both');
    if (opts.complete && opts.file === undefined) throw new UsageError('--complete applies to --file');
    const [{ noteVerifier, parseVerifierKey, NoteError }, { createPublicKey }] = await Promise.all([import('../tlog/signed-note.js'), import('node:crypto')]);
    const readText = (file: string, what: string) => {
      try {
        return readFileSync(file, 'utf8');
      } catch (err) {
        throw new CliError(`cannot read ${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
    };
    /** The verifiers the operator named, for a log of this origin. */
    const givenVerifiers = (origin: string) => {
      try {
        if (opts['verifier-key'] !== undefined) return [parseVerifierKey(opts['verifier-key'])];
        if (opts['public-key'] !== undefined) return [noteVerifier(origin, createPublicKey(readText(opts['public-key'], 'the public key')))];
      } catch (err) {
        if (err instanceof CliError) throw err;
        throw new CliError(`the ${opts['verifier-key'] !== undefined ? 'verifier key' : 'public key'} is not an Ed25519 key: ${(err as Error).message}`);
      }
      return undefined;
    };

    if (opts.file !== undefined) {
      if (opts.checkpoint !== undefined) throw new UsageError('--checkpoint applies to the database; an export carries its own checkpoint');
      const { verifyExportFile } = await import('../modules/audit/evidence/export.verifier.js');
      // The key name of a checkpoint is its origin: read from the export's own note for a PEM key.
      const origin = await exportOrigin(opts.file);
      // No signed note, no origin: nothing in the export can be checked against any key.
      if (origin === '') throw new CliError('verification FAILED: the export carries no signed checkpoint (its last line has no note): nothing in it can be checked against a key');
      const verifiers = givenVerifiers(origin);
      if (!verifiers) throw new UsageError('--file needs --public-key or --verifier-key: an export is checked against a key you hold');
      const bar = progress('verifying');
      const report = await verifyExportFile(opts.file, verifiers, (n) => bar.update(n), opts.complete === true).finally(() => bar.end());
      printReport(report.ok, [
        `${report.records_checked.toLocaleString('en')} records verified against the signed checkpoint of ${report.tree_size.toLocaleString('en')} records`,
        ...(report.records_without_proof > 0 ? [`${report.records_without_proof} newer records carry no proof yet (not covered by the checkpoint)`] : []),
      ], report);
      return;
    }

    const config = loadConfig();
    const url = config.migrationDatabaseUrl ?? config.databaseUrl;
    const log = await cliLogger();
    const [{ openDatabase }, { loadSigningKey, SIGNING_KEY_FILE }, { resolveOrigin }, { verifyDatabase }, fs] = await Promise.all([
      import('../db/open.js'), import('../modules/audit/evidence/signing-key.loader.js'), import('../modules/audit/evidence/log.identity.js'),
      import('../modules/audit/evidence/log.verifier.js'), import('node:fs'),
    ]);
    const external = opts.checkpoint !== undefined ? readText(opts.checkpoint, 'the checkpoint') : undefined;
    const unlock = url ? () => {} : lockEmbeddedDatabase(config.dataDir, WHILE_THE_SERVER_RUNS);
    const db = await openDatabase(config, (err) => log.warn(`database connection error: ${(err as Error).message}`));
    try {
      const origin = await resolveOrigin(db, config.auditLogOrigin);
      let anchors = givenVerifiers(origin);
      if (!anchors) {
        // The service's own key: never generate one here (it could not have signed anything).
        if (!config.auditSigningKey && !fs.existsSync(path.join(config.dataDir, SIGNING_KEY_FILE))) {
          throw new CliError(`no signing key: AUDIT_SIGNING_KEY is unset and ${path.join(config.dataDir, SIGNING_KEY_FILE)} does not exist; pass --public-key or --verifier-key`);
        }
        anchors = [noteVerifier(origin, loadSigningKey(config, () => {}).privateKey)];
      }
      const { personalDataKeysOnDisk } = await import('../secrets.js');
      const personalDataKeys = personalDataKeysOnDisk(config);
      const bar = progress('verifying');
      const report = await verifyDatabase(db, { anchors, origin, external, personalDataKeys, onProgress: (n, total) => bar.update(n, total) })
        .catch((err: unknown) => {
          if (err instanceof NoteError) throw new CliError(`the saved checkpoint: ${err.message}`);
          throw err;
        })
        .finally(() => bar.end());
      printReport(report.ok, [
        `${report.records_checked.toLocaleString('en')} records and ${report.checkpoints_checked.toLocaleString('en')} checkpoints verified in ${databaseLabel(config, url)}`,
        report.head ? `head: seq ${report.head.seq}, root ${report.head.root_hash}` : 'nothing is sealed yet',
        report.personal_values_checked === null
          ? 'personal values: not checked (no JWT_SECRET, AUDIT_PERSONAL_DATA_SECRET or DATA_DIR/jwt-secret to check them with)'
          : `personal values: ${report.personal_values_checked.toLocaleString('en')} checked against their records' refs`,
        ...(external !== undefined && report.ok ? ['the log extends the saved checkpoint'] : []),
      ], report);
    } finally {
      await db.close();
      unlock();
    }
  },
};

/** The origin, first line of the checkpoint note on the export's last line: the name a PEM key is given. */
async function exportOrigin(file: string): Promise<string> {
  const { lastLine } = await import('../modules/audit/evidence/export.verifier.js');
  let last: string;
  try {
    last = await lastLine(file);
  } catch (err) {
    throw new CliError(`cannot read the export ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    const note = (JSON.parse(last) as { note?: unknown }).note;
    return typeof note === 'string' ? note.slice(0, note.indexOf('\n')) : '';
  } catch {
    return '';
  }
}

function printReport(ok: boolean, lines: string[], report: { first_bad_id?: number; problem?: string; line?: number }): void {
  if (ok) {
    out(`OK: ${lines.join('; ')}`);
    return;
  }
  const where = [report.first_bad_id !== undefined ? `first bad record: ${report.first_bad_id}` : '', report.line ? `line ${report.line}` : ''].filter(Boolean).join(', ');
  throw new CliError(`verification FAILED: ${report.problem}${where ? ` (${where})` : ''}`);
}
