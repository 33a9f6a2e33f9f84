// The witness's state on disk: per log, the latest checkpoint it cosigned ({size, root}), one JSON
// file each in the data directory. A new state replaces the old by rename, after its bytes and
// before the answer are made durable, so that after a crash (kill -9, power loss) the file holds
// either the old state or the new one, and never a state older than a cosignature it sent.
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import path from 'node:path';
import { INITIAL_STATE, type WitnessState } from '../tlog/witness.js';

/** A state file that exists but cannot be read: the witness must not start on a guess. */
export class WitnessStateError extends Error {}

/** The file of one log's state: named by its origin's SHA-256, since an origin may hold any character. */
export function stateFile(dataDir: string, origin: string): string {
  return path.join(dataDir, `log-${createHash('sha256').update(origin).digest('hex')}.json`);
}

/** The log's state, or the initial one if the witness never cosigned for it. */
export function readState(dataDir: string, origin: string): WitnessState {
  const file = stateFile(dataDir, origin);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return INITIAL_STATE;
    throw new WitnessStateError(`cannot read ${file}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new WitnessStateError(`${file} is not JSON`);
  }
  const s = parsed as { origin?: unknown; size?: unknown; root?: unknown };
  const root = typeof s.root === 'string' ? Buffer.from(s.root, 'base64') : undefined;
  if (
    typeof parsed !== 'object' || parsed === null || s.origin !== origin || typeof s.size !== 'number' ||
    !Number.isSafeInteger(s.size) || s.size < 0 || !root || root.length !== 32 || root.toString('base64') !== s.root
  ) {
    throw new WitnessStateError(`${file} is not the state of the log "${origin}" ({origin, size, root})`);
  }
  return { size: s.size, root };
}

function fsyncPath(p: string, flags: string): void {
  const fd = openSync(p, flags);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Replaces the log's state: a temporary file written and fsynced, renamed over the state file,
 * then the directory fsynced so that the rename itself survives a crash. Returns once durable.
 */
export function writeState(dataDir: string, origin: string, state: WitnessState): void {
  const file = stateFile(dataDir, origin);
  const temp = `${file}.tmp`;
  const text = `${JSON.stringify({ origin, size: state.size, root: state.root.toString('base64') })}\n`;
  const fd = openSync(temp, 'w', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temp, file);
  fsyncPath(dataDir, 'r');
}

export function ensureDataDir(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
}
