// A real `teamlog witness serve` process (src/cli/witness.ts) for the tests that need a witness:
// the witness's own tests, the log's submissions to witnesses, and the console's Verify.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { entryArgs, ROOT } from './paths.js';

export interface WitnessProcess {
  url: string;
  port: number;
  child: ChildProcess;
  exited: Promise<number | null>;
  /** What it has printed so far, stdout and stderr together. */
  output(): string;
}

/**
 * Starts a witness whose directory holds `witness.key`, `logs.txt` and `state/`, on `port` (0: a
 * free one); resolves once it says where it listens, rejects if it exits first.
 */
export function serveWitness(dir: string, opts: { port?: number; extra?: string[] } = {}): Promise<WitnessProcess> {
  const args = ['witness', 'serve', '--key', path.join(dir, 'witness.key'), '--logs', path.join(dir, 'logs.txt'),
    '--port', String(opts.port ?? 0), '--data', path.join(dir, 'state'), ...(opts.extra ?? [])];
  const child = spawn(process.execPath, [...entryArgs('src/cli'), ...args], {
    cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      output += d.toString();
      const url = /listening on (http:\/\/\S+)/.exec(output)?.[1];
      if (url) resolve({ url, port: Number(new URL(url).port), child, exited, output: () => output });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then((code) => reject(new Error(`the witness in ${dir} exited with ${code}: ${output}`)));
  });
}

/** Stops a witness (SIGTERM unless told otherwise) and answers its exit code. */
export async function stopWitnessProcess(w: WitnessProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill(signal);
  return w.exited;
}
