// Worker threads whose script is a module of this project, run from either of its two forms:
// compiled (dist/…/x.js, what `teamlog` and the server run) or as TypeScript under tsx (src/…/x.ts,
// what the tests and `npm run dev` run).
import path from 'node:path';
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * A worker thread running the module `name` (no extension) that lies beside the calling module
 * (`beside`: its import.meta.url), in the calling module's own form: .js beside a .js, .ts
 * beside a .ts. tsx's `--import` entry registers its hooks on the main thread only (on Node 20),
 * and a worker does not inherit them, so a TypeScript worker registers them itself through tsx's
 * API before it loads its script.
 */
export function moduleWorker(name: string, beside: string, options: WorkerOptions): Worker {
  const extension = path.extname(new URL(beside).pathname);
  const script = new URL(`./${name}${extension}`, beside);
  if (extension !== '.ts') return new Worker(script, options);
  // Resolved here, where tsx is known to be installed (it runs this very module).
  const tsx = import.meta.resolve('tsx/esm/api');
  const bootstrap = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(script.href)}); });`;
  return new Worker(bootstrap, { ...options, eval: true });
}
