// Where the tests run from, and how they start the service's own processes. `npm test` runs the
// suite compiled (scripts/build-tests.mjs: a mirror of the repository with each TypeScript file's
// .js beside it), so that no test process, and no server or CLI process a test starts, pays
// tsx's compilation; `node --import tsx --test <file>` runs a test file from its TypeScript.
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The tree this module runs in: the repository, or the compiled mirror of it. */
const TREE = fileURLToPath(new URL('../..', import.meta.url));
/** Whether the suite runs compiled (this module is JavaScript). */
export const COMPILED = import.meta.url.endsWith('.js');
/** The repository itself: in the mirror, its package.json is a link to the repository's. */
export const ROOT = COMPILED ? path.dirname(realpathSync(path.join(TREE, 'package.json'))) : TREE;

const TSX = import.meta.resolve('tsx');
/** The node options the suite runs with (scripts/test.mjs says them), passed on to the processes it starts. */
const SUITE_OPTIONS = (process.env.TEST_NODE_OPTIONS ?? '').split(' ').filter(Boolean);

/** The node options that load an entry point in the suite's own form: none compiled, tsx otherwise. */
export const NODE_ARGS: string[] = COMPILED ? SUITE_OPTIONS : ['--import', TSX];

/** The file of one of the service's entry points, in the suite's own form. */
export function entryFile(entry: 'src/server' | 'src/cli'): string {
  return path.join(TREE, `${entry}.${COMPILED ? 'js' : 'ts'}`);
}

/** The node arguments that run an entry point: `[...NODE_ARGS, entryFile(entry)]`. */
export function entryArgs(entry: 'src/server' | 'src/cli'): string[] {
  return [...NODE_ARGS, entryFile(entry)];
}
