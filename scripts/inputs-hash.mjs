// What a build's --if-changed compares with its stamp (scripts/build.mjs, scripts/build-web.mjs):
// a hash of the contents of its input files, named by their paths from the repository's root.
// Contents, not times: a checkout, a copy or a touch does not set off a build, and an edit
// reverted does not leave a stale one.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function listFiles(p) {
  if (!existsSync(p)) return [];
  if (!statSync(p).isDirectory()) return [p];
  return readdirSync(p)
    .sort()
    .flatMap((name) => listFiles(path.join(p, name)));
}

/** The hash of every file under `inputs` (paths from the repository's root: files or folders). */
export function inputsHash(inputs) {
  const hash = createHash('sha256');
  for (const file of inputs.flatMap((input) => listFiles(path.join(ROOT, input)))) {
    hash.update(path.relative(ROOT, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex');
}
