// What every `teamlog` command shares: its errors (and their exit codes), option parsing, and
// how it prints. A command lives in a file of its own under src/cli/ and imports what it
// needs when it runs, so that --help and usage errors answer at once.
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.js';
import { DataDirLockedError, lockDataDir } from '../ops/data-dir-lock.js';

/**
 * The exit codes of every command (docs/operations.md, "The command line"): done; refused, or
 * failed (a verification that found something wrong); a usage or configuration error, or an
 * input file that cannot be read; a check that could not be made (a key not at hand, the
 * database not reachable), which a verification never reports as a failure.
 */
export const EXIT = { done: 0, failed: 1, usage: 2, notChecked: 3 } as const;

/** A refusal the operator can act on: printed without a stack trace, exit code 1. */
export class CliError extends Error {}
/** Wrong command line: printed with the command's usage, exit code 2. */
export class UsageError extends Error {}
/** A check that could not be made at all, and why: exit code 3, never "FAILED". */
export class NotCheckedError extends Error {}

export interface Command {
  usage: string;
  summary: string;
  details: string;
  /** Its exit code when it is not 0 without an error (a verification with a check not made). */
  run(args: string[]): Promise<void | number>;
}

/** The width --help is written for: a terminal's, with room to spare. */
export const COLUMNS = 100;

/**
 * `text` with every line longer than `columns` wrapped at spaces. A continuation is indented to
 * its line's text: a usage's options after its command's name ("teamlog audit export [--format…"),
 * an option's description column ("  --file <export>   verify an…"), else the line's own indent.
 */
export function fitColumns(text: string, columns = COLUMNS): string {
  return text.split('\n').flatMap((line) => wrapLine(line, columns)).join('\n');
}

function wrapLine(line: string, columns: number): string[] {
  if (line.length <= columns) return [line];
  const usage = /^(?:Usage: |\s*)teamlog [a-z-]+(?: [a-z][a-z-]*)? /.exec(line)?.[0].length;
  const column = /^(\s*\S.*?\s{2,})\S/.exec(line)?.[1]?.length;
  const own = /^\s*/.exec(line)![0].length;
  const indent = usage ?? (column !== undefined && column <= columns / 2 ? column : own);
  const lines: string[] = [];
  let rest = line;
  while (rest.length > columns) {
    const at = rest.lastIndexOf(' ', columns);
    const cut = at > indent ? at : columns;
    lines.push(rest.slice(0, cut).trimEnd());
    rest = ' '.repeat(indent) + rest.slice(cut).trimStart();
  }
  return [...lines, rest];
}

/** `teamlog audit verify|export|redact`: commands under one name. */
export interface CommandGroup {
  subcommands: Record<string, Command>;
}

export const out = (line: string) => process.stdout.write(`${line}\n`);

/**
 * The shared runtime's log as plain lines on stderr: its warnings (a database connection lost),
 * or, at 'error', only its errors: for createDeps, whose warnings (a JWT_SECRET read from a file,
 * to be shared between instances) speak to a server, not to a command.
 */
export async function cliLogger(level: 'warn' | 'error' = 'warn'): Promise<FastifyBaseLogger> {
  const { pino } = await import('pino');
  const log: FastifyBaseLogger = pino(
    { level, base: undefined, timestamp: false },
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
export function lockEmbeddedDatabase(dataDir: string, instead: string, refusal: typeof CliError | typeof NotCheckedError = CliError): () => void {
  try {
    return lockDataDir(dataDir);
  } catch (err) {
    if (err instanceof DataDirLockedError) throw new refusal(`${err.message}.\n${instead}`);
    throw err;
  }
}

/** The export, through the running server, as an ADMIN (GET /audit-logs/export: the same NDJSON as `teamlog audit export`). */
export const EXPORT_THROUGH_SERVER =
  '  curl -fsS -H "Authorization: Bearer <an ADMIN\'s access token>" <server>/api/v1/audit-logs/export -o export.ndjson';
