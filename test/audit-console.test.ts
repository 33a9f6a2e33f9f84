// GET /console (src/modules/audit/console.routes.ts, web/console/) in a real browser: headless
// Chromium driven by playwright-core, found by the accessible names docs/api.md gives the page.
// Signing in as an ADMIN and as a USER; the search narrowing the rows, kept in the URL and
// reopened from it; a refused query's detail; the actor pivot; Live, holding still while the
// reader is scrolled down; Verify on a sealed record, on answers changed in flight (each step
// of the page's own check), on a record changed behind the database's back (PostgreSQL pass),
// on a record not sealed yet and outside a secure context; Export CSV; the keyboard; axe-core;
// each row's actor and resource by name and its sentence; the filter controls writing q; the
// Activity chart and its bars; a notice going with its query; a phone-sized screen in another
// time zone (cards, no sideways scroll, local times with UTC on hover);
// and, all along, no console error and no CSP violation. Both passes; skipped when Debian's
// Chromium is not installed. The console's files are built first (scripts/build-web.mjs).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, test } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Page, type Route } from 'playwright-core';
import { cosigner, formatCosignatureVerifierKey, formatCosignerKey } from '../src/tlog/cosignature.js';
import { ed25519PublicKeyRaw, formatVerifierKey, loadEd25519PrivateKey } from '../src/tlog/signed-note.js';
import { committed, settled } from './helpers/audit-log.js';
import { loginAdmin, type Session } from './helpers/client.js';
import { serveWitness, stopWitnessProcess } from './helpers/witness.js';
import { createProject, uniqueWord, type AuditRecordBody, type PageBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { TcpProxy } from './helpers/tcp-proxy.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, needsPostgres, startTestServer, TEST_SIGNING_KEY, type TestServer } from './helpers/server.js';

const CHROMIUM = '/usr/bin/chromium';
const skip = existsSync(CHROMIUM) ? false : `Chromium not found at ${CHROMIUM} (apt-get install chromium)`;
/** A name that resolves to this machine but is not localhost: a page served from it is not a secure context. */
const PLAIN_HOST = 'console.example.test';

// The page's files, as `npm run build` makes them (a no-op when they are current).
if (!skip) execFileSync(process.execPath, ['scripts/build-web.mjs', '--if-changed'], { stdio: 'inherit' });

const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0', AUDIT_CHECKPOINT_INTERVAL_MS: '100' } });

let browser: Browser | undefined;
const servers: TestServer[] = [];
after(async () => {
  await browser?.close();
  for (const s of servers) await s.close();
});

const api = async <T = unknown>(who: Session, path: string) => {
  const res = await who.client.get<T>(`/api/v1${path}`, { token: who.token });
  assert.equal(res.status, 200, `${path}: ${res.text}`);
  return res.body;
};

/** Ids of the table's rows, top to bottom. */
const rowIds = async (page: Page) => (await page.locator('tbody tr').evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-id')))));

async function waitForRows(page: Page, expected: number[], ms = 5000): Promise<void> {
  try {
    await page.waitForFunction(
      (want) => JSON.stringify([...document.querySelectorAll('tbody tr')].map((r) => Number(r.getAttribute('data-id')))) === JSON.stringify(want),
      expected,
      { timeout: ms },
    );
  } catch {
    assert.deepEqual(await rowIds(page), expected, 'the rows shown');
  }
}

/**
 * What the browser itself reports and is no fault of the page: the failed requests (a 401, the
 * refused query's 400, the unsealed record's 404), and, on plain http:// to another host, that
 * the service's Cross-Origin-Opener-Policy header does not apply there.
 */
const EXPECTED_CONSOLE = /^(?:Failed to load resource|The Cross-Origin-Opener-Policy header has been ignored, because the URL's origin was untrustworthy)/;
/** And, while the network is cut on purpose, the socket's failed reconnections. */
const CUT_CONSOLE = /^WebSocket connection to '.*' failed/;

/** Problems a page reports: errors it throws, console errors, dialogs (an XSS alert). */
function watch(page: Page, problems: string[], cut = false): void {
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !EXPECTED_CONSOLE.test(m.text()) && !(cut && CUT_CONSOLE.test(m.text()))) problems.push(`console: ${m.text()}`);
  });
  page.on('dialog', (d) => {
    problems.push(`dialog: ${d.message()}`);
    void d.dismiss();
  });
}

async function cspViolations(page: Page): Promise<string[]> {
  return page.evaluate(() => (window as unknown as { __csp?: string[] }).__csp ?? []);
}

async function newPage(context: BrowserContext, problems: string[], cut = false): Promise<Page> {
  const page = await context.newPage();
  watch(page, problems, cut);
  // Every violation of the page's policy, as the page itself sees it (an init script is not under the page's CSP).
  await page.addInitScript(() => {
    const seen: string[] = ((window as unknown as { __csp: string[] }).__csp = []);
    document.addEventListener('securitypolicyviolation', (e) => seen.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  return page;
}

async function signIn(page: Page, email: string, password: string): Promise<void> {
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

async function searchFor(page: Page, q: string): Promise<void> {
  await page.getByRole('searchbox', { name: 'Search' }).fill(q);
  await page.getByRole('searchbox', { name: 'Search' }).press('Enter');
}

const verdict = (page: Page) => page.locator('.details .verdict');

/** Waits until the page's address holds the query `q`. */
async function queryIs(page: Page, q: string | RegExp): Promise<string> {
  await page.waitForFunction(
    ({ text, pattern }) => {
      const got = new URL(location.href).searchParams.get('q') ?? '';
      return pattern === undefined ? got === text : new RegExp(pattern).test(got);
    },
    typeof q === 'string' ? { text: q, pattern: undefined } : { text: '', pattern: q.source },
    { timeout: 5000 },
  );
  return new URL(page.url()).searchParams.get('q') ?? '';
}

/** How far the page scrolls sideways (0: it fits). */
const sideways = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

async function verifyRow(page: Page, id: number): Promise<string> {
  await page.locator(`tbody tr[data-id="${id}"] td:first-child button`).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Verify' }).click();
  await page.waitForFunction(() => (document.querySelector('.details .verdict')?.getAttribute('data-verdict') ?? '') !== '', undefined, { timeout: 10_000 });
  const text = (await verdict(page).textContent()) ?? '';
  await page.getByRole('dialog').getByRole('button', { name: 'Close' }).click();
  await page.getByRole('dialog').waitFor({ state: 'detached' });
  return text;
}

/** Waits until the record is sealed and covered by a checkpoint (its proof is served). */
async function sealed(who: Session, id: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const res = await who.client.get(`/api/v1/audit-logs/${id}/proof`, { token: who.token });
    if (res.status === 200) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`record ${id} was not sealed within 10 s`);
}

/** Runs axe-core in the page (evaluated through the debugger: the page's CSP allows no injected script): every violation, whatever its impact. */
async function axeViolations(page: Page): Promise<string[]> {
  const source = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(source);
  const result = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(): Promise<{ violations: Array<{ id: string; impact: string; help: string; nodes: unknown[] }> }> } }).axe;
    return (await axe.run()).violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length }));
  });
  return result.map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes} nodes)`);
}

test('the audit console, in headless Chromium', { skip }, async (t) => {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync',
      `--host-resolver-rules=MAP ${PLAIN_HOST} 127.0.0.1`,
    ],
  });
  const context = await browser.newContext({ viewport: { width: 1200, height: 700 }, acceptDownloads: true });
  const problems: string[] = [];
  const page = await newPage(context, problems);
  const url = `${h.server.url}/console`;
  const user = await h.newUser();
  // A few dozen records of the user's, so that a search has something to narrow and the table can scroll.
  const projects = [];
  for (let i = 0; i < 6; i++) projects.push(await createProject(user, { name: `Console ${uniqueWord()}` }));
  for (let i = 0; i < 40; i++) await createProject(h.admin, { name: `Filler ${i}` });

  await t.test('served as a page under the pages\' policy, its files named by their content and cached for good', async () => {
    const res = await page.goto(url);
    assert.equal(res?.status(), 200);
    const headers = res!.headers();
    assert.equal(headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(headers['cache-control'], 'no-cache');
    assert.match(headers['content-security-policy'] ?? '', /script-src 'self'/);
    assert.doesNotMatch(headers['content-security-policy'] ?? '', /unsafe-inline|unsafe-eval/);
    const html = await res!.text();
    assert.doesNotMatch(html, /<script>|<style|\son\w+=|\sstyle=/i, 'no inline script, style or handler');
    const script = /src="(\/console\/console-[A-Z0-9]+\.js)"/.exec(html)?.[1];
    assert.ok(script, 'the page names its hashed script');
    const asset = await fetch(h.server.url + script);
    assert.equal(asset.status, 200);
    assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal((await fetch(`${h.server.url}/console/..%2Fbuild.json`)).status, 404);
    assert.equal((await fetch(`${h.server.url}/console/nothing-here.js`)).status, 404);
    const docs = (await (await fetch(`${h.server.url}/api/v1/openapi.json`)).json()) as { info: { description: string } };
    assert.match(docs.info.description, /\[\/console\]\(\/console\)/, 'the docs page links to the console');
  });

  await t.test('a USER who signs in is told that only administrators can read the audit log', async () => {
    await signIn(page, user.email, user.password);
    await page.getByRole('alert').filter({ hasText: 'Only administrators can read the audit log.' }).waitFor({ timeout: 5000 });
    assert.equal(await page.getByRole('searchbox', { name: 'Search' }).count(), 0);
    // The page kept no session: it logged the USER's out again.
    const logouts = await api<PageBody<AuditRecordBody>>(h.admin, `/audit-logs?action=LOGOUT&actor_id=${user.id}`);
    assert.equal(logouts.data.length, 1);
  });

  let signInId = 0;
  await t.test('an ADMIN signs in and sees the records newest first, their own sign-in on top', async () => {
    await signIn(page, ADMIN_EMAIL, ADMIN_PASSWORD);
    await page.getByRole('searchbox', { name: 'Search' }).waitFor({ timeout: 5000 });
    for (const name of ['Time', 'Actor', 'Action', 'Resource', 'Result', 'IP']) assert.equal(await page.getByRole('columnheader', { name, exact: true }).count(), 1, name);
    const newest = await api<PageBody<AuditRecordBody>>(h.admin, '/audit-logs?action=LOGIN_SUCCESS&limit=1');
    signInId = newest.data[0]!.id;
    await page.locator(`tbody tr[data-id="${signInId}"]`).waitFor({ timeout: 5000 });
    const ids = await rowIds(page);
    assert.equal(ids[0], signInId);
    const listed = await api<PageBody<AuditRecordBody>>(h.admin, `/audit-logs?limit=${ids.length}`);
    assert.deepEqual(ids, listed.data.map((r) => r.id));
    assert.equal(ids.length, 50);
    await page.getByRole('button', { name: 'Load more' }).click();
    await page.waitForFunction(() => document.querySelectorAll('tbody tr').length > 50, undefined, { timeout: 5000 });
  });

  const userQuery = () => `action:CREATE_PROJECT actor:${user.id}`;
  let userRecords: number[] = [];
  await t.test('the search narrows the rows, and the URL reopens the same query', async () => {
    userRecords = (await api<PageBody<AuditRecordBody>>(h.admin, `/audit-logs?action=CREATE_PROJECT&actor_id=${user.id}`)).data.map((r) => r.id);
    assert.equal(userRecords.length, projects.length);
    await searchFor(page, userQuery());
    await waitForRows(page, userRecords);
    assert.equal(new URL(page.url()).searchParams.get('q'), userQuery());
    const again = await newPage(context, problems);
    await again.goto(page.url());
    await signIn(again, ADMIN_EMAIL, ADMIN_PASSWORD);
    await waitForRows(again, userRecords);
    assert.equal(await again.getByRole('searchbox', { name: 'Search' }).inputValue(), userQuery());
    await again.getByRole('button', { name: 'Sign out' }).click();
    await again.getByLabel('Email').waitFor();
    await again.close();
  });

  await t.test('a query the service refuses shows the detail of its 400', async () => {
    const bad = 'colour:blue';
    const res = await h.admin.client.get(`/api/v1/audit-logs?q=${encodeURIComponent(bad)}`, { token: h.admin.token });
    assert.equal(res.status, 400);
    await searchFor(page, bad);
    await page.getByRole('alert').filter({ hasText: res.body.detail }).waitFor({ timeout: 5000 });
    assert.equal(await page.locator('tbody tr').count(), 0);
  });

  await t.test('clicking an actor narrows the search to them', async () => {
    await searchFor(page, 'action:CREATE_PROJECT');
    const row = page.locator(`tbody tr[data-id="${userRecords[0]}"]`);
    await row.waitFor({ timeout: 5000 });
    await row.locator('[data-pivot="actor"]').click();
    const q = `action:CREATE_PROJECT actor:${user.id}`;
    await page.waitForFunction((want) => new URL(location.href).searchParams.get('q') === want, q, { timeout: 5000 });
    await waitForRows(page, userRecords);
    assert.equal(await page.getByRole('searchbox', { name: 'Search' }).inputValue(), q);
  });

  await t.test('Live: a record committed through the API appears on top within 2 s', async () => {
    await searchFor(page, '');
    await page.locator(`tbody tr`).first().waitFor();
    await page.getByRole('switch', { name: 'Live' }).click();
    assert.equal(await page.getByRole('switch', { name: 'Live' }).getAttribute('aria-checked'), 'true');
    await page.locator('.live-state', { hasText: 'connected' }).waitFor({ timeout: 5000 });
    const started = Date.now();
    const project = await createProject(user, { name: `Live ${uniqueWord()}` });
    const [record] = (await api<PageBody<AuditRecordBody>>(h.admin, `/audit-logs?action=CREATE_PROJECT&resource_id=${project.id}`)).data;
    await page.locator(`tbody tr[data-id="${record!.id}"]`).waitFor({ timeout: 2000 });
    t.diagnostic(`shown ${Date.now() - started} ms after the request was sent`);
    assert.equal((await rowIds(page))[0], record!.id);
  });

  await t.test('Live, scrolled down: the table holds still and "N new records" brings them in', async () => {
    await page.evaluate(() => scrollTo(0, 600));
    const before = await rowIds(page);
    const scrolled = await page.evaluate(() => scrollY);
    assert.ok(scrolled > 100, `scrolled ${scrolled}px`);
    await createProject(user, { name: `Held ${uniqueWord()}` });
    await createProject(user, { name: `Held ${uniqueWord()}` });
    const button = page.getByRole('button', { name: '2 new records' });
    await button.waitFor({ timeout: 2000 });
    assert.deepEqual(await rowIds(page), before, 'the rows did not move');
    assert.equal(await page.evaluate(() => scrollY), scrolled);
    await button.click();
    await page.waitForFunction((n) => document.querySelectorAll('tbody tr').length === n + 2, before.length, { timeout: 2000 });
    assert.deepEqual((await rowIds(page)).slice(2), before);
    assert.equal(await page.evaluate(() => scrollY), 0);
    await page.getByRole('switch', { name: 'Live' }).click();
    assert.equal(await page.getByRole('switch', { name: 'Live' }).getAttribute('aria-checked'), 'false');
  });

  const key = async () => (await api<Array<{ key_id: string }>>(h.admin, '/audit-logs/public-keys'))[0]!.key_id;
  await t.test('Verify on a sealed record: Verified, with the checkpoint\'s size and the key', async () => {
    await sealed(h.admin, userRecords[0]!);
    const text = await verifyRow(page, userRecords[0]!);
    assert.match(text, /^Verified — seq \d[\d,]* in the checkpoint of \d[\d,]* records, signed by key /);
    assert.ok(text.includes(await key()), text);
  });

  await t.test('Verify names the step that fails when an answer is changed in flight', async () => {
    const id = userRecords[1]!;
    await sealed(h.admin, id);
    const cases: Array<{ step: string; path: RegExp; change: (body: Record<string, any>) => void }> = [
      { step: 'sealed form', path: /\/proof/, change: (b) => (b.sealed.action = 'DELETE_PROJECT') },
      { step: 'leaf hash', path: /\/proof/, change: (b) => (b.leaf_hash = b.audit_path[0]) },
      { step: 'audit path', path: /\/proof/, change: (b) => b.audit_path.reverse() },
      { step: 'signature', path: /\/checkpoints\/latest/, change: (b) => (b.note = b.note.replace(/^(— \S+ \S{8})(\S)/m, (_: string, head: string, c: string) => head + (c === 'A' ? 'B' : 'A'))) },
    ];
    for (const c of cases) {
      const handler = async (route: Route) => {
        const res = await route.fetch();
        const body = await res.json();
        c.change(body);
        // A request the page dropped or repeated while this one was fetched is already settled
        // (seen once on a slow VM: "Route is already handled!"); the subtest asserts on what the
        // console shows, so only that case is let go.
        await route.fulfill({ response: res, json: body }).catch((err: Error) => {
          if (!/already handled/.test(err.message)) throw err;
        });
      };
      await page.route(c.path, handler);
      try {
        const text = await verifyRow(page, id);
        assert.match(text, new RegExp(`^Verification failed at the ${c.step} step: `), text);
      } finally {
        await page.unroute(c.path, handler);
      }
    }
  });

  await t.test('Export CSV downloads exactly the rows of the query', async () => {
    await searchFor(page, userQuery());
    await waitForRows(page, (await api<PageBody<AuditRecordBody>>(h.admin, `/audit-logs?action=CREATE_PROJECT&actor_id=${user.id}`)).data.map((r) => r.id));
    const shown = await rowIds(page);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()]);
    assert.match(download.suggestedFilename(), /^audit-log-.*\.csv$/);
    const csv = readFileSync((await download.path())!, 'utf8');
    const [header, ...lines] = csv.trimEnd().split('\r\n');
    assert.match(header!, /^id,/);
    assert.deepEqual(lines.map((l) => Number(l.split(',')[0])).sort((a, b) => a - b), [...shown].sort((a, b) => a - b));
    await page.getByRole('status').filter({ hasText: /^Exported [\d,]+ bytes as CSV/ }).waitFor({ timeout: 5000 });
  });

  await t.test('the keyboard opens a record and Escape closes it, back where it was', async () => {
    const first = page.locator('tbody tr').first().locator('td:first-child button');
    await first.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.closest('dialog') !== null), true, 'focus is in the dialog');
    assert.match((await page.getByRole('dialog').locator('pre').textContent()) ?? '', /^\{\n {2}"/);
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    assert.equal(await first.evaluate((el) => el === document.activeElement), true);
  });

  await t.test('axe-core finds no violation, signed in or out, with a record open', async () => {
    assert.deepEqual(await axeViolations(page), []);
    await page.locator('tbody tr').first().locator('td:first-child button').click();
    await page.getByRole('dialog').waitFor();
    assert.deepEqual(await axeViolations(page), []);
    await page.keyboard.press('Escape');
    const out = await newPage(context, problems);
    await out.goto(url);
    await out.getByLabel('Email').waitFor();
    assert.deepEqual(await axeViolations(out), []);
    await out.close();
  });

  await t.test('Verify on a record changed behind the database\'s back: Verification failed', { skip: needsPostgres }, async () => {
    const id = userRecords[2]!;
    await sealed(h.admin, id);
    await committed(h.server.owner, (q) => q.query(`UPDATE audit_log SET action = 'DELETE_PROJECT' WHERE id = $1`, [id]));
    await searchFor(page, `actor:${user.id}`);
    await page.locator(`tbody tr[data-id="${id}"]`).waitFor({ timeout: 5000 });
    const text = await verifyRow(page, id);
    assert.match(text, /^Verification failed at the proof step: the service refuses to prove this record: Record \d+ \(it no longer matches its seal\)/, text);
  });

  await t.test('Sign out returns to the sign-in form', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Email').waitFor();
    assert.equal(await page.getByRole('searchbox', { name: 'Search' }).count(), 0);
  });

  if (process.env.CONSOLE_SCREENSHOT) {
    await t.test('a screenshot for the README', async () => {
      await signIn(page, ADMIN_EMAIL, ADMIN_PASSWORD);
      await searchFor(page, `action:CREATE_PROJECT -actor:${user.id}`);
      await page.locator('tbody tr').nth(10).waitFor();
      await page.locator('tbody tr').nth(2).locator('td:first-child button').click();
      await page.getByRole('dialog').getByRole('button', { name: 'Verify' }).click();
      await page.locator('.details .verdict[data-verdict="verified"]').waitFor({ timeout: 10_000 });
      await page.setViewportSize({ width: 1100, height: 640 });
      await page.screenshot({ path: path.resolve(process.env.CONSOLE_SCREENSHOT!) });
    });
  }

  assert.deepEqual(await cspViolations(page), []);
  assert.deepEqual(problems, []);
  await page.close();
});

test('the audit console on a service that does not seal, outside a secure context, and over a dropped connection', { skip }, async (t) => {
  const context = await browser!.newContext({ viewport: { width: 1200, height: 700 } });
  const problems: string[] = [];

  await t.test('Verify on a record not sealed yet says so (sealing off)', async () => {
    const unsealed = await startTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0', AUDIT_SEALING: 'off' } });
    servers.push(unsealed);
    const other = await newPage(context, problems);
    await other.goto(`${unsealed.url}/console`);
    await signIn(other, ADMIN_EMAIL, ADMIN_PASSWORD);
    const row = other.locator('tbody tr').first();
    await row.waitFor({ timeout: 5000 });
    const text = await verifyRow(other, Number(await row.getAttribute('data-id')));
    assert.match(text, /^Not sealed yet/);
    assert.deepEqual(await cspViolations(other), []);
    await other.close();
  });

  await t.test('outside a secure context, Verify says that verification needs HTTPS', async () => {
    const plain = await newPage(context, problems);
    await plain.goto(`http://${PLAIN_HOST}:${new URL(h.server.url).port}/console`);
    assert.equal(await plain.evaluate(() => isSecureContext), false);
    await signIn(plain, ADMIN_EMAIL, ADMIN_PASSWORD);
    const row = plain.locator('tbody tr').first();
    await row.waitFor({ timeout: 5000 });
    const text = await verifyRow(plain, Number(await row.getAttribute('data-id')));
    assert.match(text, /^Verification needs HTTPS/);
    assert.deepEqual(await cspViolations(plain), []);
    await plain.close();
  });

  await t.test('Live resumes after a dropped connection: what was committed meanwhile is replayed from last_event_id', async () => {
    const proxy = new TcpProxy({ host: '127.0.0.1', port: Number(new URL(h.server.url).port) });
    const port = await proxy.start();
    const live = await newPage(context, problems, true);
    try {
      await live.goto(`http://127.0.0.1:${port}/console`);
      await signIn(live, ADMIN_EMAIL, ADMIN_PASSWORD);
      await live.locator('tbody tr').first().waitFor({ timeout: 5000 });
      await live.getByRole('switch', { name: 'Live' }).click();
      await live.locator('.live-state', { hasText: 'connected' }).waitFor({ timeout: 5000 });
      // One record seen live first: the page then knows the event_id to resume from.
      const seen = await createProject(h.admin, { name: `Seen ${uniqueWord()}` });
      const [seenRecord] = (await api<PageBody<AuditRecordBody>>(h.admin, `/audit-logs?action=CREATE_PROJECT&resource_id=${seen.id}`)).data;
      await live.locator(`tbody tr[data-id="${seenRecord!.id}"]`).waitFor({ timeout: 2000 });
      await proxy.stop();
      await live.locator('.live-state', { hasText: 'reconnecting' }).waitFor({ timeout: 5000 });
      const project = await createProject(h.admin, { name: `Missed ${uniqueWord()}` });
      const [record] = (await api<PageBody<AuditRecordBody>>(h.admin, `/audit-logs?action=CREATE_PROJECT&resource_id=${project.id}`)).data;
      assert.equal(await live.locator(`tbody tr[data-id="${record!.id}"]`).count(), 0);
      await proxy.start(port);
      // The page does not reload the list on a reconnect: only the replay brings the record.
      await live.locator(`tbody tr[data-id="${record!.id}"]`).waitFor({ timeout: 10_000 });
      assert.equal((await rowIds(live))[0], record!.id);
      await live.locator('.live-state', { hasText: 'connected' }).waitFor({ timeout: 5000 });
    } finally {
      await live.close();
      await proxy.stop();
    }
  });

  assert.deepEqual(problems, []);
  await context.close();
});

test('the audit console reads like a story: names and sentences, filter controls, Activity, notices, a phone in another zone', { skip }, async (t) => {
  const context = await browser!.newContext({ viewport: { width: 1200, height: 800 }, acceptDownloads: true });
  const problems: string[] = [];
  const page = await newPage(context, problems);
  const url = `${h.server.url}/console`;
  const user = await h.newUser();
  for (let i = 0; i < 4; i++) await createProject(user, { name: `Story ${uniqueWord()}` });
  const userQuery = () => `action:CREATE_PROJECT actor:${user.id}`;
  const userRecords = (await api<PageBody<AuditRecordBody>>(h.admin, `/audit-logs?action=CREATE_PROJECT&actor_id=${user.id}`)).data.map((r) => r.id);
  await page.goto(url);
  await signIn(page, ADMIN_EMAIL, ADMIN_PASSWORD);
  await page.locator('tbody tr').first().waitFor({ timeout: 5000 });

  await t.test('each row names its actor (name and email, the id on hover) and its resource, and says what happened', async () => {
    const who = await api<{ name: string; email: string }>(h.admin, `/users/${user.id}`);
    await searchFor(page, userQuery());
    await waitForRows(page, userRecords);
    const [newest] = (await api<PageBody<AuditRecordBody>>(h.admin, `/audit-logs?action=CREATE_PROJECT&actor_id=${user.id}&limit=1`)).data;
    assert.equal(newest!.id, userRecords[0]);
    const name = String(newest!.metadata.name);
    const row = page.locator(`tbody tr[data-id="${newest!.id}"]`);
    const actor = row.locator('[data-pivot="actor"]');
    await page.waitForFunction((n) => document.querySelector('tbody tr [data-pivot="actor"]')?.textContent === n, who.name, { timeout: 5000 });
    assert.equal(await actor.textContent(), who.name);
    assert.equal(await row.locator('.email').textContent(), who.email);
    assert.match((await actor.getAttribute('title')) ?? '', new RegExp(`^User id ${user.id}:`));
    assert.equal(await row.locator('[data-pivot="resource"]').textContent(), `the project \u201c${name}\u201d`);
    assert.equal(await row.locator('.sentence').textContent(), `${who.name} (${who.email}) created the project \u201c${name}\u201d.`);
    // The details say it too, and name the actor beside the id.
    await row.locator('td:first-child button').click();
    await page.getByRole('dialog').waitFor();
    assert.equal(await page.getByRole('dialog').locator('.sentence').textContent(), `${who.name} (${who.email}) created the project \u201c${name}\u201d.`);
    assert.equal(await page.getByRole('dialog').locator('[data-field="actor_id"]').textContent(), `${user.id}: ${who.name} (${who.email})`);
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
  });

  await t.test('the filter controls write q (Action grouped as in the contract, Result, Actor, Time), and typing q sets them', async () => {
    const searchbox = page.getByRole('searchbox', { name: 'Search' });
    await searchFor(page, '');
    await page.locator('tbody tr').first().waitFor();
    const groups = await page.locator('#f-action optgroup').evaluateAll((gs) => gs.map((g) => [g.getAttribute('label'), g.querySelectorAll('option').length]));
    assert.deepEqual(groups, [['Sessions', 5], ['Users', 6], ['Projects', 5], ['Tasks', 4], ['Audit log', 2]]);
    await page.getByLabel('Action', { exact: true }).selectOption('CREATE_PROJECT');
    await queryIs(page, 'action:CREATE_PROJECT');
    await page.getByLabel('Actor', { exact: true }).fill(String(user.id));
    await page.getByLabel('Actor', { exact: true }).press('Enter');
    await queryIs(page, userQuery());
    await waitForRows(page, userRecords);
    assert.equal(await searchbox.inputValue(), userQuery());
    await page.getByLabel('Result', { exact: true }).selectOption('DENIED');
    await queryIs(page, `${userQuery()} result:DENIED`);
    await waitForRows(page, []);
    // The control shows the query's result before it is set back: an empty table may be one still
    // loading, and choosing "Any result" on a control that already reads it changes nothing.
    await page.waitForFunction(() => document.querySelector<HTMLSelectElement>('#f-result')?.value === 'DENIED', undefined, { timeout: 5000 });
    await page.getByLabel('Result', { exact: true }).selectOption('');
    await queryIs(page, userQuery());
    await page.getByLabel('Time', { exact: true }).selectOption('24h');
    const q = await queryIs(page, /^action:CREATE_PROJECT actor:\d+ created:>=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const since = Date.parse(q.split('created:>=')[1]!);
    assert.ok(Math.abs(Date.now() - 24 * 3600_000 - since) < 120_000, q);
    await waitForRows(page, userRecords);
    // A range, in the reader's zone (UTC here), written as created:A..B.
    await page.getByLabel('Time', { exact: true }).selectOption('range');
    await page.getByLabel('From', { exact: true }).fill('2020-01-01T00:00');
    const inZone = (local: string) => page.evaluate((v) => new Date(v).toISOString().replace('.000Z', 'Z'), local);
    await queryIs(page, `${userQuery()} created:>=${await inZone('2020-01-01T00:00')}`);
    await page.getByLabel('To', { exact: true }).fill('2020-01-02T00:00');
    await queryIs(page, `${userQuery()} created:${await inZone('2020-01-01T00:00')}..${await inZone('2020-01-02T00:00')}`);
    await waitForRows(page, []);
    await page.getByLabel('Time', { exact: true }).selectOption('');
    await queryIs(page, userQuery());
    // Typing q sets the controls back.
    await searchFor(page, 'action:LOGOUT result:SUCCESS');
    await page.waitForFunction(() => (document.getElementById('f-action') as HTMLSelectElement).value === 'LOGOUT', undefined, { timeout: 5000 });
    assert.equal(await page.getByLabel('Result', { exact: true }).inputValue(), 'SUCCESS');
    assert.equal(await page.getByLabel('Actor', { exact: true }).inputValue(), '');
  });

  await t.test('a control used before the last query\'s page arrived builds on that query, not on the page shown', async () => {
    await searchFor(page, userQuery());
    await waitForRows(page, userRecords);
    // A slow service: every page of records arrives 1.5 s after it is asked for.
    const slow = async (route: Route) => {
      await new Promise((r) => setTimeout(r, 1500));
      await route.continue().catch(() => {});
    };
    await page.route(/\/api\/v1\/audit-logs\?/, slow);
    try {
      await page.getByLabel('Time', { exact: true }).selectOption('24h');
      await queryIs(page, new RegExp(`^${userQuery()} created:>=\\S+$`));
      // The Time page is still on its way: the Result must keep the Time term.
      await page.getByLabel('Result', { exact: true }).selectOption('SUCCESS');
      const q = await queryIs(page, /result:SUCCESS/);
      assert.match(q, new RegExp(`^${userQuery()} created:>=\\S+ result:SUCCESS$`), 'the Time term was lost');
      await waitForRows(page, userRecords, 10_000);
    } finally {
      await page.unroute(/\/api\/v1\/audit-logs\?/, slow);
    }
    await page.getByLabel('Time', { exact: true }).selectOption('');
    await page.getByLabel('Result', { exact: true }).selectOption('');
    await queryIs(page, userQuery());
  });

  await t.test('Activity: the query\'s records over time and its top actions and actors; a bar narrows the time range', async () => {
    await searchFor(page, userQuery());
    await waitForRows(page, userRecords);
    const stats = await api<{ total: number; interval: string; buckets: Array<{ start: string; count: number }>; top_actions: Array<{ action: string; count: number }> }>(
      h.admin,
      `/audit-logs/stats?q=${encodeURIComponent(userQuery())}`,
    );
    assert.equal(stats.total, userRecords.length);
    await page.locator('.activity').getByText(`${stats.total} records, per ${stats.interval}`).waitFor({ timeout: 5000 });
    const bars = await page.locator('.activity .bar').evaluateAll((as) => as.map((a) => ({ start: a.getAttribute('data-start'), count: Number(a.getAttribute('data-count')) })));
    assert.deepEqual(bars, stats.buckets);
    assert.equal(await page.locator('.activity .tops li').first().locator('button').textContent(), 'CREATE_PROJECT');
    const full = stats.buckets.find((b) => b.count > 0)!;
    await page.locator(`.activity .bar[data-start="${full.start}"]`).click();
    const q = await queryIs(page, new RegExp(`^${userQuery()} created:\\S+\\.\\.\\S+$`));
    const narrowed = (await api<PageBody<AuditRecordBody>>(h.admin, `/audit-logs?q=${encodeURIComponent(q)}`)).data.map((r) => r.id);
    assert.equal(narrowed.length, full.count);
    await waitForRows(page, narrowed);
  });

  await t.test('Verify names the witnesses, and says so plainly when the log asks none', async () => {
    await sealed(h.admin, userRecords[0]!);
    await searchFor(page, userQuery());
    await waitForRows(page, userRecords);
    const text = await verifyRow(page, userRecords[0]!);
    assert.match(text, /^Verified — /);
    assert.match(text, /No witness cosigned this checkpoint: the log asks no witness \(it has no witness policy\)/, text);
  });

  await t.test('Export OCSF downloads the query\'s records as OCSF events, one a line', async () => {
    await searchFor(page, userQuery());
    await waitForRows(page, userRecords);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export OCSF' }).click()]);
    assert.match(download.suggestedFilename(), /\.ocsf\.ndjson$/);
    const events = readFileSync((await download.path())!, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { class_uid: number; metadata: { uid: string } });
    assert.deepEqual(events.map((e) => Number(e.metadata.uid)).sort((a, b) => a - b), [...userRecords].sort((a, b) => a - b));
    assert.ok(events.every((e) => [3001, 3002, 6003].includes(e.class_uid)), JSON.stringify(events.map((e) => e.class_uid)));
  });

  await t.test('a notice belongs to its action: the export\'s goes when the search changes', async () => {
    await searchFor(page, userQuery());
    await waitForRows(page, userRecords);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export NDJSON' }).click()]);
    await download.path();
    await page.getByRole('status').filter({ hasText: /^Exported [\d,]+ bytes as NDJSON/ }).waitFor({ timeout: 5000 });
    await searchFor(page, 'action:LOGOUT');
    await page.getByRole('status').filter({ hasText: /^Exported/ }).waitFor({ state: 'detached', timeout: 5000 });
  });

  await t.test('on a phone (390 px) in another zone: cards, no sideways scroll, local times with UTC on hover and in the details; axe finds nothing', async () => {
    const zone = 'Asia/Kolkata';
    const phoneContext = await browser!.newContext({ viewport: { width: 390, height: 844 }, timezoneId: zone, locale: 'en-US' });
    const phone = await newPage(phoneContext, problems);
    try {
      await phone.goto(url);
      await phone.getByLabel('Email').waitFor();
      assert.equal(await sideways(phone), 0);
      assert.deepEqual(await axeViolations(phone), []);
      await signIn(phone, ADMIN_EMAIL, ADMIN_PASSWORD);
      const row = phone.locator('tbody tr').first();
      await row.waitFor({ timeout: 5000 });
      await phone.locator('.activity .bar').first().waitFor({ timeout: 5000 });
      assert.equal(await sideways(phone), 0, 'the page does not scroll sideways');
      assert.equal(await row.evaluate((tr) => getComputedStyle(tr).display), 'block', 'a row is a card');
      const stamp = (await row.locator('time').getAttribute('datetime'))!;
      const local = new Intl.DateTimeFormat('en-US', {
        year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short', timeZone: zone,
      }).format(new Date(stamp));
      assert.equal(await row.locator('time').textContent(), local);
      assert.ok(((await row.locator('td:first-child button').getAttribute('title')) ?? '').startsWith(`${stamp.replace('T', ' ')} UTC`));
      assert.deepEqual(await axeViolations(phone), []);
      await row.locator('td:first-child button').click();
      await phone.getByRole('dialog').waitFor();
      assert.equal(await phone.locator('.details [data-field="timestamp"]').textContent(), `${stamp.replace('T', ' ')} UTC (${local})`);
      assert.equal(await sideways(phone), 0);
      assert.deepEqual(await axeViolations(phone), []);
      await phone.keyboard.press('Escape');
      await phone.getByRole('button', { name: 'Sign out' }).click();
      await phone.getByLabel('Email').waitFor();
      assert.deepEqual(await cspViolations(phone), []);
    } finally {
      await phone.close();
      await phoneContext.close();
    }
  });

  assert.deepEqual(await cspViolations(page), []);
  assert.deepEqual(problems, []);
  await context.close();
});

test('Verify names the witnesses that cosigned the checkpoint, each cosignature checked in the browser', { skip }, async (t) => {
  // One real witness (`teamlog witness serve`), and a policy whose quorum is it.
  const origin = `teamlog.test/console-witnessed-${process.pid}`;
  const root = mkdtempSync(path.join(tmpdir(), 'teamlog-console-witness-'));
  const name = 'w1.console.test';
  const witnessKey = cosigner(name, generateKeyPairSync('ed25519').privateKey);
  mkdirSync(path.join(root, 'state'), { mode: 0o700 });
  writeFileSync(path.join(root, 'witness.key'), `${formatCosignerKey(witnessKey)}\n`, { mode: 0o600 });
  const logLine = `log ${formatVerifierKey(origin, ed25519PublicKeyRaw(loadEd25519PrivateKey(TEST_SIGNING_KEY)))}\n`;
  writeFileSync(path.join(root, 'logs.txt'), logLine);
  const witness = serveWitness(root);
  let server: TestServer | undefined;
  const context = await browser!.newContext({ viewport: { width: 1200, height: 800 } });
  try {
    const witnessUrl = (await witness).url;
    writeFileSync(path.join(root, 'policy.txt'), `${logLine}witness ${name} ${formatCosignatureVerifierKey(witnessKey)} ${witnessUrl}\nquorum ${name}\n`);
    server = await startTestServer({
      env: { RATE_LIMIT_PER_MINUTE: '0', AUDIT_LOG_ORIGIN: origin, AUDIT_WITNESS_POLICY: path.join(root, 'policy.txt'), AUDIT_WITNESS_INTERVAL_MS: '300', AUDIT_CHECKPOINT_INTERVAL_MS: '200' },
    });
    const admin = await loginAdmin(server);
    const problems: string[] = [];
    const page = await newPage(context, problems);
    await page.goto(`${server.url}/console`);
    await signIn(page, ADMIN_EMAIL, ADMIN_PASSWORD);
    const row = page.locator('tbody tr').first();
    await row.waitFor({ timeout: 5000 });
    const id = Number(await row.getAttribute('data-id'));
    // Everything sealed, and the newest checkpoint cosigned: the one Verify checks.
    const head = await settled(server, admin);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await admin.client.get<{ tree_size: number; witnessed: boolean }>('/api/v1/audit-logs/checkpoints/latest', { token: admin.token });
      if (res.status === 200 && res.body.tree_size >= head.tree_size && res.body.witnessed) break;
      assert.ok(Date.now() < deadline, 'the newest checkpoint was not cosigned within 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const text = await verifyRow(page, id);
    t.diagnostic(text);
    assert.match(text, /^Verified — /);
    assert.match(text, new RegExp(`Cosigned by ${name.replaceAll('.', '\\.')} \\(.+\\), each cosignature checked in this browser with the policy\u2019s key\\. The service reports the policy\u2019s quorum as met\\.`));
    // A cosignature changed in flight (a byte of its signature, past the key ID and the time): named as such.
    const handler = async (route: Route) => {
      const res = await route.fetch();
      const body = await res.json();
      body.note = body.note.replace(new RegExp(`^(\u2014 ${name.replaceAll('.', '\\.')} .{30})(.)`, 'm'), (_: string, head: string, c: string) => head + (c === 'A' ? 'B' : 'A'));
      await route.fulfill({ response: res, json: body });
    };
    await page.route(/\/checkpoints\/latest/, handler);
    const bad = await verifyRow(page, id);
    await page.unroute(/\/checkpoints\/latest/, handler);
    assert.match(bad, new RegExp(`^Verification failed at the witnesses step: the cosignature by ${name.replaceAll('.', '\\.')} does not verify with the policy's key`), bad);
    assert.deepEqual(await cspViolations(page), []);
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
    await server?.close();
    await stopWitnessProcess(await witness);
    rmSync(root, { recursive: true, force: true });
  }
});
