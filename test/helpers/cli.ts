// The `teamlog` CLI as a child process (`node --import tsx src/cli.ts`, so no build is needed),
// with exactly the environment a test gives it: nothing inherited but PATH and HOME, so that a
// developer's own DATABASE_URL or .env never reaches it.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Variables given as undefined are left out (unset), as a shell would. */
export function runTeamlog(args: string[], env: Record<string, string | undefined>): Promise<CliResult> {
  const given = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...given },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
