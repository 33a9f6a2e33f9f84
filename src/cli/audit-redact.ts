// `teamlog audit redact --user <id>`: erases a user's personal data from the audit log
// (docs/api.md 5.10) through the same use case as any other change (audit/redaction.service.ts).
// Erasure is the operator's act, not the service's: the service's role has no DELETE on
// audit_personal_data, so this connects as `teamlog migrate` does, with the owner's login.
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { loadConfig } from '../config.js';
import { pgErrorCode, type Database } from '../db/database.js';
import { lockDataDir } from '../ops/data-dir-lock.js';
import { CliError, UsageError, cliLogger, databaseLabel, options, out, type Command } from './support.js';

/** Ids are positive integers within the API's range (1 … 2^53 - 1). */
function userIdOf(text: string): number {
  const id = /^[1-9][0-9]*$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(id)) throw new UsageError(`--user must be a user id (a positive integer), not "${text}"`);
  return id;
}

/** An email address as the API takes one (at most 254 characters, one @, no spaces). */
function emailOf(text: string): string {
  if (text.length > 254 || !/^[^\s@]+@[^\s@]+$/.test(text)) throw new UsageError(`--email must be an email address, not "${text}"`);
  return text;
}

export const auditRedact: Command = {
  usage: 'teamlog audit redact --user <id> | --email <address>',
  summary: "Erase a user's personal data, or an email address, from the audit log (audited as REDACT_PERSONAL_DATA)",
  details:
    '--user: deletes every personal value (email addresses) that audit records name for that\n' +
    'user. --email: deletes every stored value equal to that address (case-insensitively),\n' +
    'whoever it was about: an address typed into a failed login names no user. Either way it\n' +
    'writes one REDACT_PERSONAL_DATA record with how many (never the values), in one\n' +
    'transaction. The records are not changed: they hold keyed hashes, and the API shows\n' +
    '"[redacted]" where the value was. Later records naming the same values keep theirs.\n' +
    'The user may already be deleted.\n' +
    'Connects as `teamlog migrate` does: MIGRATION_DATABASE_URL (an owner connection), else\n' +
    "DATABASE_URL, else the embedded database under DATA_DIR. The service's own role may not\n" +
    'delete personal data, on purpose.',
  async run(args) {
    const opts = options(args, { user: { type: 'string' }, email: { type: 'string' } });
    if ((opts.user === undefined) === (opts.email === undefined)) throw new UsageError('give --user <id> or --email <address>, one of them');
    const target: { userId: number } | { email: string } = opts.user !== undefined ? { userId: userIdOf(opts.user) } : { email: emailOf(opts.email!) };
    const config = loadConfig();
    const url = config.migrationDatabaseUrl ?? config.databaseUrl;
    const [{ databaseSession, migrate, migratePostgres }, { createDeps }, { createServices }, { systemContext }] = await Promise.all([
      import('../db/migrate.js'), import('../runtime.js'), import('../services.js'), import('../context.js'),
    ]);
    const log = await cliLogger();
    const onError = (err: unknown) => log.warn(`database connection error: ${(err as Error).message}`);
    const where = databaseLabel(config, url);

    // The service's own login fails here: on the migrations (not the owner), else on the DELETE.
    const refused = (err: unknown): never => {
      const code = pgErrorCode(err) ?? pgErrorCode((err as { cause?: unknown } | undefined)?.cause);
      if (code !== '42501') throw err;
      throw new CliError(
        `${where} refused (${(err as Error).message}): erasure needs the owner's login, since the service's own role ` +
          "may not delete personal data, on purpose. Set MIGRATION_DATABASE_URL to the owner's connection. Nothing was changed.",
      );
    };

    // As the server and create-admin do, the schema is brought up to date first.
    let db: Database;
    let unlock = () => {};
    if (url) {
      await migratePostgres(url).catch(refused);
      const { createPostgresDatabase } = await import('../db/postgres.js');
      db = createPostgresDatabase({ url, poolSize: 1, onError }); // no role: the login's own rights
    } else {
      const { createPgliteDatabase } = await import('../db/pglite.js');
      unlock = lockDataDir(config.dataDir);
      try {
        db = await createPgliteDatabase(path.join(config.dataDir, 'pglite'), onError);
      } catch (err) {
        unlock();
        throw err;
      }
    }
    try {
      if (!url) await migrate(databaseSession(db));
      // The runtime's warnings (keys read from files, to share between instances) are a server's concern.
      const { redaction } = createServices(createDeps(config, db, await cliLogger('error')));
      const requestId = `cli-${randomUUID()}`;
      const ctx = systemContext(requestId);
      const { valuesErased } = await ('userId' in target ? redaction.redactUser(ctx, target.userId) : redaction.redactEmail(ctx, target.email)).catch(refused);
      // The address is the operator's own input: echoing it on their terminal keeps nothing.
      const whose = 'userId' in target ? `of user ${target.userId}` : `equal to ${target.email}`;
      out(`Erased ${valuesErased} personal value${valuesErased === 1 ? '' : 's'} ${whose} from the audit log in ${where}; audit request id ${requestId}.`);
    } finally {
      await db.close();
      unlock();
    }
  },
};
