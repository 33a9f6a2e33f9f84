// An earlier release of Teamlog beside this checkout, for the upgrade test (test/upgrade.test.ts):
// its tree taken from git (`git archive <commit>`: the sources, migrations and test helpers),
// sharing this checkout's node_modules (the dependencies are the same), and a script run inside
// it with that release's code. And the other half: a database the old release filled, opened as
// a TestDatabase with THIS checkout's code (migrated by it, as an upgraded service would be).
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, realpathSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './paths.js';
import { openTestDatabase, type TestDatabase } from './server.js';

/** What the old code needs to run its app and its test helpers (no build: tsx runs the sources). */
export const RELEASE_PATHS = ['package.json', 'tsconfig.json', 'src', 'migrations', 'test/helpers'];

/**
 * Why an earlier release cannot be extracted here (for a test's `skip`), or false when it can:
 * git and tar must run, and the commit must be in this clone (a shallow one may lack it).
 */
export function releaseUnavailable(commit: string): string | false {
  const tar = spawnSync('tar', ['--version'], { stdio: 'ignore' });
  if (tar.error || tar.status !== 0) return `tar is not available${tar.error ? ` (${tar.error.message})` : ''}`;
  const git = spawnSync('git', ['-C', ROOT, 'cat-file', '-e', `${commit}^{commit}`], { stdio: 'ignore' });
  if (git.error) return `git is not available (${git.error.message})`;
  if (git.status !== 0) return `commit ${commit} is not in this repository (a shallow clone, or not a git checkout)`;
  return false;
}

/** Runs a child process to its end; rejects naming the command with what it wrote, unless it exits 0. */
function finished(child: ReturnType<typeof spawn>, what: string, timeoutMs: number): Promise<{ stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${what} did not finish within ${timeoutMs} ms\n--- stdout\n${stdout}\n--- stderr\n${stderr}`));
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve({ stdout, stderr });
      else reject(new Error(`${what} exited with ${code ?? signal}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`));
    });
  });
}

/**
 * Extracts `commit`'s tree (RELEASE_PATHS) into `dir` with `git archive | tar -x`, which
 * touches no worktree, index or ref, and links `dir/node_modules` to this checkout's.
 * Answers `dir`.
 */
export async function extractRelease(commit: string, dir: string): Promise<string> {
  mkdirSync(dir, { recursive: true });
  const git = spawn('git', ['-C', ROOT, 'archive', '--format=tar', commit, '--', ...RELEASE_PATHS], { stdio: ['ignore', 'pipe', 'pipe'] });
  const tar = spawn('tar', ['-x', '-f', '-', '-C', dir], { stdio: ['pipe', 'pipe', 'pipe'] });
  git.stdout!.pipe(tar.stdin!);
  await Promise.all([finished(git, `git archive ${commit}`, 60_000), finished(tar, 'tar -x', 60_000)]);
  for (const p of ['package.json', 'src', 'migrations']) {
    if (!existsSync(path.join(dir, p))) throw new Error(`git archive ${commit} gave no ${p}`);
  }
  symlinkSync(realpathSync(path.join(ROOT, 'node_modules')), path.join(dir, 'node_modules'), 'dir');
  return dir;
}

/**
 * Copies `scriptPath` (a file of this checkout) to the same place in the release's tree, so that
 * its relative imports (../../src/…, ../helpers/…) reach the release's code, and runs it there
 * with `node --import tsx` (cwd: the release's tree) and exactly `env` plus PATH and HOME.
 * Resolves with what it wrote; rejects with it on a non-zero exit (or after `timeoutMs`).
 */
export async function runInRelease(
  dir: string, scriptPath: string, env: Record<string, string>, timeoutMs = 120_000,
): Promise<{ stdout: string; stderr: string }> {
  const relative = path.relative(ROOT, path.resolve(scriptPath));
  if (relative.startsWith('..') || path.isAbsolute(relative)) throw new Error(`${scriptPath} is not a file of this checkout`);
  const target = path.join(dir, relative);
  mkdirSync(path.dirname(target), { recursive: true });
  copyFileSync(scriptPath, target);
  const child = spawn(process.execPath, ['--import', 'tsx', relative], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return finished(child, `${relative} in the release at ${dir}`, timeoutMs);
}

export interface ExistingDatabase {
  /** The TestDatabase name (names Redis keys too): the same on both sides of the upgrade. */
  name: string;
  /** PGlite: its data directory (DATA_DIR/pglite, where the CLI looks). */
  pgliteDir?: string;
  /** PostgreSQL: the owner's connection string of an existing database. */
  databaseUrl?: string;
}

/**
 * An existing database (filled by an earlier release), opened and migrated with this checkout's
 * code as createTestDatabase does a new one. `drop` closes the connections and keeps the database.
 */
export async function openExistingDatabase(target: ExistingDatabase, onError: (err: unknown) => void = () => {}): Promise<TestDatabase> {
  if (target.pgliteDir === undefined && target.databaseUrl === undefined) throw new Error('openExistingDatabase needs pgliteDir or databaseUrl');
  return openTestDatabase(target, onError);
}
