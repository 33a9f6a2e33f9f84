// The `teamlog` command (bin/teamlog.js runs the compiled dist/cli.js). It reads the same
// environment as the server and runs the same code: loadConfig, the migrations, createDeps,
// the users repository and the audit writer. Exit codes (cli/support.ts, EXIT): 0 done,
// 1 refused or failed, 2 a usage or configuration error, 3 a check that could not be made.
import './process/heap-settings.js';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { ConfigError, loadConfig, loadEnvFile, unknownEnvFileKeys, type Config } from './config.js';
import { DataDirLockedError, lockDataDir } from './ops/data-dir-lock.js';
import { auditCommand } from './cli/audit.js';
import { witnessCommand } from './cli/witness.js';
import { CliError, EXIT, NotCheckedError, UsageError, cliLogger, databaseLabel, fitColumns, options, out, type Command, type CommandGroup } from './cli/support.js';

// Each command imports what it needs when it runs, so that --help and usage errors answer at
// once instead of first loading the database drivers and the whole app.

const COMMANDS: Record<string, Command | CommandGroup> = {
  migrate: {
    usage: 'teamlog migrate',
    summary: 'Apply pending schema migrations and list what was applied',
    details:
      'Migrates MIGRATION_DATABASE_URL (an owner connection), else DATABASE_URL, else the embedded\n' +
      'database under DATA_DIR. Running it again applies nothing. A server start applies pending\n' +
      'migrations only with MIGRATION_DATABASE_URL, or a DATABASE_URL login allowed to; on a current\n' +
      'schema it runs nothing.',
    async run(args) {
      options(args, {});
      const config = loadConfig();
      const url = config.migrationDatabaseUrl ?? config.databaseUrl;
      const { databaseSession, migrate, migratePostgres } = await import('./db/migrate.js');
      let applied: string[];
      if (url) {
        applied = await migratePostgres(url);
      } else {
        // The same directory openDatabase() uses for the embedded database.
        const { createPgliteDatabase } = await import('./db/pglite.js');
        const unlock = lockDataDir(config.dataDir);
        const db = await createPgliteDatabase(path.join(config.dataDir, 'pglite'), () => {});
        try {
          applied = await migrate(databaseSession(db));
        } finally {
          await db.close();
          unlock();
        }
      }
      const where = databaseLabel(config, url);
      if (applied.length === 0) out(`Nothing to apply: ${where} is up to date.`);
      else out(`Applied ${applied.length} migration${applied.length === 1 ? '' : 's'} to ${where}:\n${applied.map((v) => `  ${v}`).join('\n')}`);
    },
  },

  'create-admin': {
    usage: 'teamlog create-admin --email <email> [--name <name>]',
    summary: 'Create an ADMIN user (audited as CREATE_USER with no actor)',
    details:
      'The password is taken from ADMIN_PASSWORD (at least 10 characters) and is never printed;\n' +
      'when ADMIN_PASSWORD is unset, a random one is generated and printed once. Refuses an email\n' +
      'that is already taken (exit code 1).',
    async run(args) {
      const opts = options(args, { email: { type: 'string' }, name: { type: 'string' } });
      if (opts.email === undefined) throw new UsageError('--email is required');
      const [{ Value }, { Email, NewPassword }, { UserName }] = await Promise.all([
        import('typebox/value'), import('./http/schemas.js'), import('./modules/users/users.schemas.js'),
      ]);
      const email = opts.email.trim().toLowerCase();
      const name = (opts.name ?? 'Administrator').trim();
      if (!Value.Check(Email, email)) throw new CliError(`"${opts.email}" is not an email address`);
      if (!Value.Check(UserName, name)) throw new CliError('--name must have 1 to 100 characters');
      const config = loadConfig();
      const [{ openDatabase }, { createDeps }, { createServices }, { generatePassword }, { hashPassword }, { systemContext }] = await Promise.all([
        import('./db/open.js'), import('./runtime.js'), import('./services.js'), import('./first-admin.js'), import('./modules/auth/auth.passwords.js'), import('./context.js'),
      ]);
      const generated = config.adminPassword === undefined;
      const password = config.adminPassword ?? generatePassword();
      if (!Value.Check(NewPassword, password)) throw new ConfigError('ADMIN_PASSWORD must have 10 to 1024 characters and no NUL');

      await requireDeploymentKey(config);
      const log = await cliLogger();
      const unlock = config.databaseUrl ? () => {} : lockDataDir(config.dataDir);
      const db = await openDatabase(config, (err) => log.warn(`database connection error: ${(err as Error).message}`));
      try {
        // The service's warnings (a JWT_SECRET from a file, to share between instances) are for a server's log.
        const { users } = createServices(createDeps(config, db, await cliLogger('error')));
        const passwordHash = await hashPassword(password, config.passwordHashCost);
        const requestId = `cli-${randomUUID()}`;
        const user = await users.createAdmin(systemContext(requestId), { email, name, passwordHash, via: 'cli' });
        if (!user) throw new CliError(`a user with the email ${email} already exists; nothing was changed`);
        out(`Created ADMIN ${user.email} (id ${user.id}) in ${databaseLabel(config, config.databaseUrl)}; audit request id ${requestId}.`);
        if (generated) out(`Generated password (shown only this once, store it now): ${password}`);
        else out('The password is the one in ADMIN_PASSWORD.');
      } finally {
        await db.close();
        unlock();
      }
    },
  },

  audit: auditCommand,
  witness: witnessCommand,
};

/**
 * The CREATE_USER record commits to the email under the deployment's personal-data key. On the
 * embedded database the CLI and the server share DATA_DIR, and its key; a DATABASE_URL
 * deployment's key is in its instances' environment, or its own secrets directory: one made up
 * here would be no instance's, and that record would later fail verification.
 */
async function requireDeploymentKey(config: Config): Promise<void> {
  if (!config.databaseUrl || config.auditPersonalDataSecret !== undefined || config.jwtSecret !== undefined) return;
  const { existsSync } = await import('node:fs');
  const { JWT_SECRET_FILE, secretsDir } = await import('./secrets.js');
  const file = path.join(secretsDir(config), JWT_SECRET_FILE);
  if (existsSync(file)) return;
  throw new CliError(
    `the record of the new ADMIN commits to its email under this deployment's key, and none is at hand: JWT_SECRET and ` +
      `AUDIT_PERSONAL_DATA_SECRET are unset, and ${file} does not exist. Run it with the JWT_SECRET (or AUDIT_PERSONAL_DATA_SECRET) ` +
      "that this database's instances have. Nothing was changed.",
  );
}

/** Every command, a group's subcommands in its place. */
const listed = (): Command[] => Object.values(COMMANDS).flatMap((c) => ('subcommands' in c ? Object.values(c.subcommands) : [c]));

/** Each command's usage, its summary under it: a usage as long as audit export's does not fit beside it. */
function help(): string {
  return fitColumns([
    'Usage: teamlog <command> [options]',
    '       teamlog --version',
    '',
    'Commands:',
    ...listed().flatMap((c) => [`  ${c.usage}`, `        ${c.summary}`]),
    '',
    'Configuration is read from the environment (and ./.env), as for the server: DATABASE_URL (and',
    'MIGRATION_DATABASE_URL) for PostgreSQL, else the embedded database under DATA_DIR',
    '(default ./data). The embedded database allows one process at a time: stop the server first.',
    '',
    'Run "teamlog <command> --help" for details.',
  ].join('\n'));
}

/** "teamlog 0.1.0 (commit 1c49ad4…)": the commit from TEAMLOG_COMMIT or the build, when known. */
async function version(): Promise<string> {
  const { versionInfo } = await import('./ops/version.js');
  let commit: string | undefined;
  try {
    loadEnvFile();
    commit = loadConfig().commit;
  } catch {
    commit = undefined; // a configuration error is for the commands to report, not --version
  }
  const info = versionInfo(commit);
  return `teamlog ${info.version}${info.commit ? ` (commit ${info.commit})` : ''}`;
}

/** "audit verify …" → the audit group's verify command, named "audit verify" in messages. */
function resolve(argv: string[]): { name: string; command: Command | undefined; args: string[] } | 'group-help' {
  const [name = '', ...rest] = argv;
  const entry = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (entry && 'subcommands' in entry) {
    const [sub, ...args] = rest;
    if (sub === undefined || sub === '--help' || sub === '-h') return 'group-help';
    return { name: `${name} ${sub}`, command: Object.hasOwn(entry.subcommands, sub) ? entry.subcommands[sub] : undefined, args };
  }
  return { name, command: entry, args: rest };
}

export async function main(argv: string[]): Promise<number> {
  const [first] = argv;
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    (first === undefined ? process.stderr : process.stdout).write(`${help()}\n`);
    return first === undefined ? 2 : 0;
  }
  if (first === '--version' || first === '-v') {
    out(await version());
    return 0;
  }
  const resolved = resolve(argv);
  if (resolved === 'group-help') {
    out(help());
    return argv.length > 1 ? 0 : 2;
  }
  const { name, command, args } = resolved;
  if (!command) {
    process.stderr.write(`teamlog: unknown command "${name}"\n\n${help()}\n`);
    return 2;
  }
  if (args.includes('--help') || args.includes('-h')) {
    out(fitColumns(`Usage: ${command.usage}\n\n${command.summary}.\n${command.details}`));
    return 0;
  }
  try {
    const envFile = loadEnvFile();
    if (envFile) for (const warning of unknownEnvFileKeys(envFile)) process.stderr.write(`teamlog: ${warning}\n`);
    return (await command.run(args)) ?? EXIT.done;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`teamlog ${name}: ${err.message}\n${fitColumns(`Usage: ${command.usage}`)}\n`);
      return 2;
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`teamlog ${name}: configuration error: ${err.message}\n`);
      return 2;
    }
    if (err instanceof NotCheckedError) {
      process.stderr.write(`teamlog ${name}: could not check: ${err.message}\n`);
      return EXIT.notChecked;
    }
    if (err instanceof CliError || err instanceof DataDirLockedError) {
      process.stderr.write(`teamlog ${name}: ${err.message}\n`);
      return 1;
    }
    process.stderr.write(`teamlog ${name} failed: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
