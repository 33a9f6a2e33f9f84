// `teamlog witness keygen|serve`: a C2SP tlog-witness (C2SP/C2SP tlog-witness.md) that cosigns
// other logs' checkpoints (docs/audit-integrity.md, "Running a witness").
import { readFileSync, writeFileSync } from 'node:fs';
import { ConfigError, loadConfig } from '../config.js';
import { CliError, UsageError, options, out, type Command, type CommandGroup } from './support.js';

const LOGS_FORMAT =
  'The logs file names the logs this witness cosigns for in C2SP tlog-policy syntax: a line\n' +
  '"log <vkey>" each (the log\'s note verifier key, name+hash+base64; its name is the checkpoints\'\n' +
  'origin). A log\'s own policy file will do: its witness, group and quorum lines are skipped, as are\n' +
  'blank lines and lines starting with #.';

function requireOption(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`--${flag} is required`);
  return value;
}

/** The witness's key and name from the file keygen wrote (PRIVATE+KEY+<name>+…). */
async function loadCosigner(keyFile: string) {
  const { parseCosignerKey } = await import('../tlog/cosignature.js');
  let text: string;
  try {
    text = readFileSync(keyFile, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read the key file ${keyFile}: ${(err as Error).message}`);
  }
  try {
    return parseCosignerKey(text);
  } catch (err) {
    throw new ConfigError(`${keyFile}: ${(err as Error).message} (teamlog witness keygen writes one)`);
  }
}

const keygen: Command = {
  usage: 'teamlog witness keygen --name <witness name> --key <file>',
  summary: 'Create a witness\'s Ed25519 key and print its vkey for a log\'s policy',
  details:
    'Writes a new Ed25519 key to --key (mode 0600), with the witness\'s name, as one line\n' +
    'PRIVATE+KEY+<name>+<hex key ID>+<base64 key> (Go\'s note signer key form), and refuses to\n' +
    'overwrite an existing file (exit code 1). Prints the witness\'s cosignature verifier key (type\n' +
    '0x04), the vkey a log\'s tlog-policy "witness" line names.',
  async run(args) {
    const opts = options(args, { key: { type: 'string' }, name: { type: 'string' } });
    const keyFile = requireOption(opts.key, 'key');
    const name = requireOption(opts.name, 'name');
    const [{ cosigner, formatCosignatureVerifierKey, formatCosignerKey }, { generateEd25519PrivateKeyPem, loadEd25519PrivateKey }] = await Promise.all([
      import('../tlog/cosignature.js'), import('../tlog/signed-note.js'),
    ]);
    let signer;
    try {
      signer = cosigner(name, loadEd25519PrivateKey(generateEd25519PrivateKeyPem()));
    } catch (err) {
      throw new UsageError(`--name: ${(err as Error).message}`);
    }
    const vkey = formatCosignatureVerifierKey(signer);
    try {
      writeFileSync(keyFile, `${formatCosignerKey(signer)}\n`, { flag: 'wx', mode: 0o600 });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') throw new CliError(`${keyFile} exists already; nothing was written (a witness's key is never replaced by accident)`);
      throw new CliError(`cannot write ${keyFile}: ${(err as Error).message}`);
    }
    out(vkey);
  },
};

const serve: Command = {
  usage: 'teamlog witness serve --key <file> --logs <file> --port <n> --data <dir>',
  summary: 'Run a C2SP tlog-witness: POST /add-checkpoint cosigns checkpoints that extend what it saw',
  details:
    `${LOGS_FORMAT}\n\n` +
    'The data directory keeps, per log, the size and root of the latest checkpoint cosigned; a new\n' +
    'state is on disk (written, fsynced, renamed, directory fsynced) before its cosignature is sent.\n' +
    'An unreadable state file stops the start (exit code 1). It listens on HOST (as the service does;\n' +
    'default 127.0.0.1); --port 0 takes a free port, and the address is printed once listening.\n' +
    'SIGTERM or SIGINT stops it.',
  async run(args) {
    const opts = options(args, { key: { type: 'string' }, logs: { type: 'string' }, port: { type: 'string' }, data: { type: 'string' } });
    const keyFile = requireOption(opts.key, 'key');
    const logsFile = requireOption(opts.logs, 'logs');
    const dataDir = requireOption(opts.data, 'data');
    const portText = requireOption(opts.port, 'port');
    if (!/^(?:0|[1-9][0-9]{0,4})$/.test(portText) || Number(portText) > 65535) throw new UsageError('--port must be 0 to 65535');
    const { host } = loadConfig();

    const [{ parseWitnessedLogs }, { startWitnessServer }, { WitnessStateError, ensureDataDir }, { DataDirLockedError, lockDataDir }, { formatCosignatureVerifierKey }] =
      await Promise.all([
        import('../tlog/witness.js'), import('../witness/witness.server.js'), import('../witness/witness.state.js'),
        import('../ops/data-dir-lock.js'), import('../tlog/cosignature.js'),
      ]);
    const signer = await loadCosigner(keyFile);
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
