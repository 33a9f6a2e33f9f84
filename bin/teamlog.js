#!/usr/bin/env node
// The `teamlog` command (npx teamlog …): runs the compiled CLI, dist/cli.js.
import { existsSync } from 'node:fs';

const cli = new URL('../dist/cli.js', import.meta.url);
if (!existsSync(cli)) {
  console.error('teamlog: dist/cli.js is missing; run "npm run build" in the project first');
  process.exit(1);
}
await import(cli.href);
