// `teamlog witness keygen|serve`: a C2SP tlog-witness (C2SP/C2SP tlog-witness.md) that cosigns
// other logs' checkpoints (docs/audit-integrity.md, "Running a witness").
import { readFileSync, writeFileSync } from 'node:fs';
import { ConfigError } from '../config.js';
import { CliError, UsageError, options, out, type Command, type CommandGroup } from './support.js';

const LOGS_FORMAT =
  'The logs file names the logs this witness cosigns for, one a line: "<origin> <log vkey>", the\n' +
  'checkpoint\'s origin line and the log\'s note verifier key (name+hash+base64), separated by a space.\n' +
  'Blank lines and lines starting with # are skipped; an origin given twice trusts each key.';

function requireOption(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`--${flag} is required`);
  return value;
}

async function loadCosigner(keyFile: string, name: string) {
  const [{ cosigner }, { loadEd25519PrivateKey }] = await Promise.all([import('../tlog/cosignature.js'), import('../tlog/signed-note.js')]);
  let pem: string;
  try {
    pem = readFileSync(keyFile, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read the key file ${keyFile}: ${(err as Error).message}`);
  }
  try {
    return cosigner(name, loadEd25519PrivateKey(pem));
  } catch (err) {
    throw new ConfigError(`${keyFile}: ${(err as Error).message}`);
  }
}

const keygen: Command = {
  usage: 'teamlog witness keygen --key <file> --name <witness name>',
  summary: 'Create a witness\'s Ed25519 key and print its vkey for a log\'s policy',
  details:
    'Writes a new Ed25519 private key (PKCS#8 PEM, mode 0600) to --key, and refuses to overwrite an\n' +
    'existing file (exit code 1). Prints the witness\'s cosignature verifier key (type 0x04), the\n' +
    'vkey a log\'s tlog-policy "witness" line names.',
  async run(args) {
    const opts = options(args, { key: { type: 'string' }, name: { type: 'string' } });
    const keyFile = requireOption(opts.key, 'key');
    const name = requireOption(opts.name, 'name');
    const [{ cosigner, formatCosignatureVerifierKey }, { generateEd25519PrivateKeyPem, loadEd25519PrivateKey }] = await Promise.all([
      import('../tlog/cosignature.js'), import('../tlog/signed-note.js'),
    ]);
    const pem = generateEd25519PrivateKeyPem();
    let vkey: string;
    try {
      vkey = formatCosignatureVerifierKey(cosigner(name, loadEd25519PrivateKey(pem)));
    } catch (err) {
      throw new UsageError(`--name: ${(err as Error).message}`);
    }
    try {
      writeFileSync(keyFile, pem, { flag: 'wx', mode: 0o600 });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') throw new CliError(`${keyFile} exists already; nothing was written (a witness's key is never replaced by accident)`);
      throw new CliError(`cannot write ${keyFile}: ${(err as Error).message}`);
    }
    out(vkey);
  },
};

const serve: Command = {
  usage: 'teamlog witness serve --key <file> --name <name> --logs <file> --port <n> --data-dir <dir> [--host 127.0.0.1]',
  summary: 'Run a C2SP tlog-witness: POST /add-checkpoint cosigns checkpoints that extend what it saw',
  details:
    `${LOGS_FORMAT}\n\n` +
    'The data directory keeps, per log, the size and root of the latest checkpoint cosigned; a new\n' +
    'state is on disk (written, fsynced, renamed, directory fsynced) before its cosignature is sent.\n' +
    'An unreadable state file stops the start (exit code 1). --port 0 takes a free port; the address\n' +
    'is printed once listening. SIGTERM or SIGINT stops it.',
  async run(args) {
    const opts = options(args, {
      key: { type: 'string' }, name: { type: 'string' }, logs: { type: 'string' }, port: { type: 'string' },
      'data-dir': { type: 'string' }, host: { type: 'string' },
    });
    const keyFile = requireOption(opts.key, 'key');
    const name = requireOption(opts.name, 'name');
    const logsFile = requireOption(opts.logs, 'logs');
    const dataDir = requireOption(opts['data-dir'], 'data-dir');
    const portText = requireOption(opts.port, 'port');
    if (!/^(?:0|[1-9][0-9]{0,4})$/.test(portText) || Number(portText) > 65535) throw new UsageError('--port must be 0 to 65535');
    const host = opts.host ?? '127.0.0.1';

    const [{ parseWitnessedLogs }, { startWitnessServer }, { WitnessStateError, ensureDataDir }, { DataDirLockedError, lockDataDir }, { formatCosignatureVerifierKey }] =
      await Promise.all([
        import('../tlog/witness.js'), import('../witness/witness.server.js'), import('../witness/witness.state.js'),
        import('../ops/data-dir-lock.js'), import('../tlog/cosignature.js'),
      ]);
    const signer = await loadCosigner(keyFile, name);
    let logsText: string;
    try {
      logsText = readFileSync(logsFile, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read the logs file ${logsFile}: ${(err as Error).message}`);
    }
    let logs;
    try {
      logs = parseWitnessedLogs(logsText);
    } catch (err) {
      throw new ConfigError(`${logsFile}, ${(err as Error).message}\n${LOGS_FORMAT}`);
    }

    ensureDataDir(dataDir);
    let unlock: () => void;
    try {
      unlock = lockDataDir(dataDir);
    } catch (err) {
      if (err instanceof DataDirLockedError) throw new CliError(`another process holds the witness data directory ${dataDir}`);
      throw err;
    }
    try {
      let server;
      try {
        server = await startWitnessServer({ cosigner: signer, logs, dataDir, host, port: Number(portText), log: (line) => process.stderr.write(`${line}\n`) });
      } catch (err) {
        if (err instanceof WitnessStateError) throw new CliError(`the witness state cannot be read, and is never reset: ${err.message}`);
        throw new CliError(`cannot start: ${(err as Error).message}`);
      }
      out(`teamlog witness ${formatCosignatureVerifierKey(signer)} cosigns for ${logs.length} log${logs.length === 1 ? '' : 's'}`);
      out(`teamlog witness listening on ${server.url}`);
      await new Promise<void>((resolve) => {
        const stop = () => {
          process.off('SIGTERM', stop);
          process.off('SIGINT', stop);
          resolve();
        };
        process.on('SIGTERM', stop);
        process.on('SIGINT', stop);
      });
      await server.close();
    } finally {
      unlock();
    }
  },
};

export const witnessCommand: CommandGroup = { subcommands: { keygen, serve } };
