// The docs page (/docs, @fastify/swagger-ui) in a real browser, as a new user meets it: `/`
// leads there, it is titled Teamlog API, logging in through "Try it out" and pasting the token
// into Authorize lets the next call succeed, the examples it fills in are requests the API
// accepts, and the token is still there after a reload. Headless Chromium (Debian's) driven by
// playwright-core; skipped when it is not installed. The page does not depend on the
// database, so it runs in the PGlite pass only.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { useTestServer } from './helpers/harness.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, onPostgres } from './helpers/server.js';

const CHROMIUM = '/usr/bin/chromium';
const skip = onPostgres
  ? 'the docs page does not depend on the database: runs in the PGlite pass'
  : existsSync(CHROMIUM)
    ? false
    : `Chromium not found at ${CHROMIUM} (apt-get install chromium)`;

const h = useTestServer();

let browser: Browser | undefined;
after(() => browser?.close());

/** An operation's block on the page (swagger-ui names it by tag and operationId), opened. */
async function openOperation(page: Page, tag: string, operationId: string): Promise<Locator> {
  const block = page.locator(`#operations-${tag}-${operationId}`);
  await block.waitFor();
  if (!(await block.locator('.opblock-body').count())) await block.locator('.opblock-summary-control').click();
  await block.locator('.opblock-body').waitFor();
  const tryOut = block.locator('button.try-out__btn');
  if ((await tryOut.count()) && (await tryOut.innerText()).trim() === 'Try it out') await tryOut.click();
  return block;
}

/** Presses Execute and answers the status and body the page shows. */
async function execute(block: Locator): Promise<{ status: number; body: string }> {
  // The answer of an earlier call stays on the page until cleared.
  const clear = block.locator('button.btn-clear');
  if (await clear.count()) await clear.click();
  await block.locator('.live-responses-table').waitFor({ state: 'detached' });
  await block.locator('button.execute').click();
  const row = block.locator('.live-responses-table .response').first();
  await row.waitFor({ timeout: 10_000 });
  const status = Number((await row.locator('.response-col_status').innerText()).trim());
  const body = await row.locator('.response-col_description pre').first().innerText();
  return { status, body };
}

// One page, visited step by step: each step is a test of its own (each held to the time a test
// may take), run in order on the state the one before it left.
describe('the docs page, in headless Chromium', { skip }, () => {
  let page: Page;
  /** Anything the page throws and any console error but a failed request's own report. */
  const problems: string[] = [];

  before(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    // The page shows a failed request's own report (a refused call is an answer here); anything
    // else fails the last test: a blocked script or style (CSP) is one.
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console: ${m.text()}`);
    });
  });

  test('/ leads to /docs, titled Teamlog API', async () => {
    const res = await fetch(`${h.server.url}/`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), '/docs');
    await page.goto(`${h.server.url}/`);
    assert.match(new URL(page.url()).pathname, /^\/docs\/?$/);
    await page.locator('.swagger-ui .info .title').waitFor();
    assert.equal(await page.title(), 'Teamlog API');
    assert.match(await page.locator('.swagger-ui .info .title').innerText(), /^Teamlog API/);
  });

  let token = '';
  test('logs in through "Try it out", whose example body is a well-formed login', async () => {
    const login = await openOperation(page, 'auth', 'login');
    const body = login.locator('textarea.body-param__text');
    // The example as the page fills it in: a login of a user this server does not have.
    const example = JSON.parse(await body.inputValue()) as { email: string; password: string };
    assert.equal(example.email, 'ada@example.com');
    const refused = await execute(login);
    assert.equal(refused.status, 401, refused.body);
    assert.match(refused.body, /INVALID_CREDENTIALS/);
    await body.fill(JSON.stringify({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD }));
    const answer = await execute(login);
    assert.equal(answer.status, 200, answer.body);
    token = (JSON.parse(answer.body) as { access_token: string }).access_token;
    assert.ok(token.split('.').length === 3, 'an access token (a JWT)');
  });

  test('authorizes with the token and runs a call: 200', async () => {
    await page.locator('.auth-wrapper button.authorize').click();
    const dialog = page.locator('.dialog-ux .modal-ux');
    await dialog.locator('input').first().fill(token);
    await dialog.locator('button.authorize').click();
    await dialog.locator('button.btn-done').click();
    await assertProfileAnswers(page);
  });

  test('an example filled in by the page is a request the API accepts (POST /projects: 201)', async () => {
    const create = await openOperation(page, 'projects', 'createProject');
    const answer = await execute(create);
    assert.equal(answer.status, 201, answer.body);
    assert.equal((JSON.parse(answer.body) as { name: string }).name, 'Website relaunch');
  });

  test('after a reload the token is still there', async () => {
    await page.reload();
    await page.locator('.swagger-ui .info .title').waitFor();
    assert.ok(await page.locator('.auth-wrapper button.authorize.locked').count(), 'the Authorize button shows the lock closed');
    await assertProfileAnswers(page);
  });

  test('the page threw nothing and logged no error', () => {
    assert.deepEqual(problems, []);
  });
});

/** GET /profile from the page answers 200 with the ADMIN. */
async function assertProfileAnswers(page: Page): Promise<void> {
  const profile = await openOperation(page, 'profile', 'getProfile');
  const answer = await execute(profile);
  assert.equal(answer.status, 200, answer.body);
  assert.equal((JSON.parse(answer.body) as { email: string }).email, ADMIN_EMAIL);
}
