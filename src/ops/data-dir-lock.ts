// The embedded database (PGlite) must be opened by one process at a time: PGlite takes no
// lock of its own, and two processes writing the same files corrupt them. Whoever opens it
// (the server, the CLI) holds DATA_DIR/teamlog.pid while it does. A lock left by a process
// that no longer runs (a crash, a kill -9) is taken over. This guards against an operator's
// slip (a CLI command against a running server), not against a determined race.
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const LOCK_FILE = 'teamlog.pid';

export class DataDirLockedError extends Error {}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it runs, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock or throws DataDirLockedError; returns the release function (also run at exit). */
export function lockDataDir(dataDir: string): () => void {
  const file = path.join(dataDir, LOCK_FILE);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let holder = Number.NaN;
    try {
      holder = Number.parseInt(readFileSync(file, 'utf8'), 10);
    } catch {
      // Removed in between: try again.
    }
    // In a container a restarted server often gets the pid its crashed predecessor had.
    const stale = !Number.isInteger(holder) || holder <= 0 || holder === process.pid || !running(holder);
    if (!stale || attempt >= 3) {
      throw new DataDirLockedError(
        `the embedded database in ${dataDir} is in use by another Teamlog process (pid ${holder}); ` +
          `stop it first (or, if no such process runs, remove ${file})`,
      );
    }
    try {
      // Only the stale holder's file: another process may have taken it over meanwhile.
      if (Number.parseInt(readFileSync(file, 'utf8'), 10) === holder || !Number.isInteger(holder)) unlinkSync(file);
    } catch {
      // Gone already; the next attempt creates it.
    }
  }
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    process.off('exit', release);
    try {
      if (Number.parseInt(readFileSync(file, 'utf8'), 10) === process.pid) unlinkSync(file);
    } catch {
      // Already gone.
    }
  };
  process.on('exit', release);
  return release;
}
