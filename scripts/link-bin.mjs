#!/usr/bin/env node
// Run by `npm install` (the prepare script): links node_modules/.bin/teamlog to bin/teamlog.js.
// npm links the commands of a project's dependencies, never the project's own: without the link,
// `npx teamlog` has npm read the whole installed tree to find the command before running it, 35 s
// of CPU on a busy two-core machine against 2.6 s for all of `npx teamlog --version` with it
// (docs/operations.md, "The command line"). Run again, it leaves a link that is right alone.
import { mkdirSync, readlinkSync, symlinkSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = path.join(ROOT, 'node_modules', '.bin');
const LINK = path.join(BIN, 'teamlog');
const TARGET = path.relative(BIN, path.join(ROOT, 'bin', 'teamlog.js'));

function current() {
  try {
    return readlinkSync(LINK);
  } catch (err) {
    if (err.code === 'ENOENT') return undefined;
    if (err.code === 'EINVAL') return ''; // a file, not a link: replaced
    throw err;
  }
}

const found = current();
if (found !== TARGET) {
  mkdirSync(BIN, { recursive: true });
  if (found !== undefined) unlinkSync(LINK);
  try {
    symlinkSync(TARGET, LINK);
  } catch (err) {
    // Without links (some Windows setups) npx still finds the command, only slower.
    console.warn(`could not link ${LINK} (${err.code}): npx teamlog will be slower to start; node bin/teamlog.js is the same command`);
  }
}
