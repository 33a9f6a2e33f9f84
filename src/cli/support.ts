// What every `teamlog` command shares: its errors (and their exit codes), option parsing, and
// how it prints. A command lives in a file of its own under src/cli/ and imports what it
// needs when it runs, so that --help and usage errors answer at once.
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.js';
import { DataDirLockedError, lockDataDir } from '../ops/data-dir-lock.js';

/** A refusal the operator can act on: printed without a stack trace, exit code 1. */
export class CliError extends Error {}
/** Wrong command line: printed with the command's usage, exit code 2. */
export class UsageError extends Error {}

export interface Command {
  usage: string;
  summary: string;
  details: string;
  run(args: string[]): Promise<void>;
}

/** `teamlog audit verify|export|redact`: commands under one name. */
export interface CommandGroup {
  subcommands: Record<string, Command>;
}

export const out = (line: string) => process.stdout.write(`${line}\n`);

/** Warnings of the shared runtime (e.g. "JWT_SECRET is not set") as plain lines on stderr. */
export async function cliLogger(): Promise<FastifyBaseLogger> {
  const { pino } = await import('pino');
  const log: FastifyBaseLogger = pino(
    { level: 'warn', base: undefined, timestamp: false },
    { write: (line: string) => void process.stderr.write(`teamlog: ${(JSON.parse(line) as { msg?: string }).msg ?? line.trim()}\n`) },
  );
  return log;
}

export function databaseLabel(config: Config, url: string | undefined): string {
  if (!url) return `the embedded database in ${path.join(config.dataDir, 'pglite')}`;
  const u = new URL(url);
  return `PostgreSQL ${u.hostname}${u.port ? `:${u.port}` : ''}${u.pathname}`; // never the password
}

export function options<T extends Record<string, { type: 'string' | 'boolean' }>>(args: string[], spec: T) {
  try {
    return parseArgs({ args, options: spec, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw new UsageError((err as Error).message.split('. ')[0]!);
  }
}

/**
 * Takes the embedded database's lock (ops/data-dir-lock.ts) for a command that needs it. Refused
 * while the server holds it: the refusal then also says how to get the same done through the
 * running server (`instead`), since stopping the service is rarely what the operator wants.
 */
export function lockEmbeddedDatabase(dataDir: string, instead: string): () => void {
  try {
    return lockDataDir(dataDir);
  } catch (err) {
    if (err instanceof DataDirLockedError) throw new CliError(`${err.message}.\n${instead}`);
    throw err;
  }
}

/** The export, through the running server, as an ADMIN (GET /audit-logs/export: the same NDJSON as `teamlog audit export`). */
export const EXPORT_THROUGH_SERVER =
  '  curl -fsS -H "Authorization: Bearer <an ADMIN\'s access token>" <server>/api/v1/audit-logs/export -o export.ndjson';
