#!/usr/bin/env node
// Re-takes the screenshots of docs/console.md, so that they show the console as it is rather than
// as someone once captured it by hand: seeds a fresh embedded database (src/seed.ts, the team of
// `npm run seed`), starts the service on it, and drives Debian's Chromium (playwright-core) through
// the console, wide and phone-sized.
//
//   node scripts/console-screenshots.mjs [--out docs] [--chromium /usr/bin/chromium]
//
// Writes docs/console.png (1400 px wide: a search, the Activity chart, a record open and
// Verified) and docs/console-phone.png (400 px wide: the filters, the chart, the first cards). Takes a minute or
// two, most of it seeding.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const { values: args } = parseArgs({ options: { out: { type: 'string', default: 'docs' }, chromium: { type: 'string', default: '/usr/bin/chromium' } } });
const OUT = path.resolve(ROOT, args.out);
const ADMIN = { email: 'admin@example.com', password: 'console-screenshots-password' };

/** A free TCP port on this machine. */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

/** Runs the service (from its sources, as `npm run dev` does) until the page answers. */
async function startService(env) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] });
  const url = `http://127.0.0.1:${env.PORT}`;
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/health/ready`)).ok) return { url, child };
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  child.kill();
  throw new Error('the service did not become ready within 2 minutes');
}

async function signIn(page) {
  await page.getByLabel('Email').fill(ADMIN.email);
  await page.getByLabel('Password').fill(ADMIN.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('tbody tr').first().waitFor({ timeout: 10_000 });
}

const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-screenshots-'));
const env = {
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? '',
  DATA_DIR: dataDir,
  ADMIN_EMAIL: ADMIN.email,
  ADMIN_PASSWORD: ADMIN.password,
  HOST: '127.0.0.1',
  PORT: String(await freePort()),
  LOG_LEVEL: 'warn',
  AUDIT_CHECKPOINT_INTERVAL_MS: '500',
};
let service;
let browser;
try {
  execFileSync(process.execPath, ['scripts/build-web.mjs', '--if-changed'], { cwd: ROOT, stdio: 'inherit' });
  console.log(`Seeding ${dataDir}…`);
  execFileSync(process.execPath, ['--import', 'tsx', 'src/seed.ts'], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] });
  service = await startService(env);
  browser = await chromium.launch({ executablePath: args.chromium, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });

  // Wide: the team's project work, the Activity chart, and one record open and Verified.
  const wide = await browser.newPage({ viewport: { width: 1400, height: 900 }, timezoneId: 'Europe/Paris', locale: 'en-GB' });
  await wide.goto(`${service.url}/console?q=${encodeURIComponent('resource:TASK')}`);
  await signIn(wide);
  await wide.locator('.activity .bar').first().waitFor({ timeout: 10_000 });
  await wide.locator('tbody tr').nth(3).locator('td:first-child button').click();
  await wide.getByRole('dialog').getByRole('button', { name: 'Verify' }).click();
  await wide.locator('.details .verdict[data-verdict="verified"]').waitFor({ timeout: 20_000 });
  await wide.screenshot({ path: path.join(OUT, 'console.png') });
  console.log(`Wrote ${path.relative(ROOT, path.join(OUT, 'console.png'))}`);

  // A phone: the records as cards, nothing wider than the screen.
  const phone = await browser.newPage({ viewport: { width: 400, height: 860 }, timezoneId: 'America/New_York', locale: 'en-US', deviceScaleFactor: 2 });
  await phone.goto(`${service.url}/console`);
  await signIn(phone);
  await phone.locator('.activity .bar').first().waitFor({ timeout: 10_000 });
  await phone.screenshot({ path: path.join(OUT, 'console-phone.png') });
  console.log(`Wrote ${path.relative(ROOT, path.join(OUT, 'console-phone.png'))}`);
} finally {
  await browser?.close();
  service?.child.kill('SIGTERM');
  if (service) await new Promise((r) => service.child.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
}
