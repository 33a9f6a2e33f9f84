// The real server process (src/server, compiled or through tsx: helpers/paths.ts), for tests of what only a whole
// process shows: start-up, shutdown, configuration errors, and the log it writes.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { entryArgs, ROOT } from './paths.js';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', () => resolve()));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  exited: Promise<number | null>;
  /** Resolves once the output contains `text`; rejects if the process exits first. */
  waitForOutput(text: string): Promise<void>;
  waitReady(): Promise<void>;
  stop(): Promise<number | null>;
}

export interface SpawnOptions {
  /**
   * The working directory, where the server looks for a .env file. By default the test's own
   * DATA_DIR, so that a developer's .env in the project never reaches a test's server.
   */
  cwd?: string;
}

/**
 * The server's entry (by absolute path: the process may run in any directory) with exactly the given environment (nothing inherited but
 * PATH and HOME), on a free port unless env says PORT.
 */
export async function spawnServer(env: Record<string, string>, opts: SpawnOptions = {}): Promise<ServerProcess> {
  const port = env.PORT !== undefined ? Number(env.PORT) : await freePort();
  const child = spawn(process.execPath, entryArgs('src/server'), {
    cwd: opts.cwd ?? (env.DATA_DIR !== undefined && existsSync(env.DATA_DIR) ? env.DATA_DIR : tmpdir()),
    env: {
      PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json'),
      LOG_LEVEL: 'info', HOST: '127.0.0.1', PORT: String(port), ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    for (const l of listeners) l();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  let code: number | null | undefined;
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (c) => {
      code = c;
      for (const l of listeners) l();
      resolve(c);
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  const proc: ServerProcess = {
    url,
    child,
    output: () => output,
    exited,
    waitForOutput: (text) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (output.includes(text)) {
            listeners.delete(check);
            resolve();
          } else if (code !== undefined) {
            listeners.delete(check);
            reject(new Error(`the server exited (${code}) before writing "${text}":\n${output}`));
          }
        };
        listeners.add(check);
        check();
      }),
    async waitReady() {
      for (let attempt = 0; attempt < 600; attempt++) {
        if (code !== undefined) throw new Error(`the server exited with ${code} before becoming ready:\n${output}`);
        try {
          if ((await fetch(`${url}/health/ready`)).status === 200) return;
        } catch {
          // Not listening yet.
        }
        await sleep(200);
      }
      throw new Error(`the server did not become ready:\n${output}`);
    },
    async stop() {
      if (code === undefined) child.kill('SIGTERM');
      return exited;
    },
  };
  return proc;
}

