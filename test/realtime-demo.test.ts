// GET /realtime-demo (src/realtime/demo-page.ts, built from web/demo/ on @teamlog/client) in a
// real browser: headless Chromium driven by playwright-core logs in through the page's form.
// What a person would see: connected, online, other users' messages arriving, their own message
// reaching another user's socket, a refusal's code, markup shown as text, a reconnect that
// replays what was missed, a resync notice when it can no longer be replayed, notifications,
// and logging out. PostgreSQL pass only; skipped when Debian's Chromium is not installed. The
// page's files are built first (scripts/build-web.mjs).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { addMember, createProject, postMessage, uniqueWord } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';
import { connectRecording, type ClientSocket, type Recorder } from './helpers/sockets.js';

const CHROMIUM = '/usr/bin/chromium';
const skip = needsPostgres || (existsSync(CHROMIUM) ? false : `Chromium not found at ${CHROMIUM} (apt-get install chromium)`);

// The page's files, as `npm run build` makes them (a no-op when they are current).
if (!skip) execFileSync(process.execPath, ['scripts/build-web.mjs', '--if-changed'], { stdio: 'inherit' });

const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0' } });

let browser: Browser | undefined;
let shotDir: string | undefined;
const sockets: ClientSocket[] = [];
after(async () => {
  for (const s of sockets) s.close();
  await browser?.close();
  if (shotDir && !process.env.TEST_KEEP_SCREENSHOTS) rmSync(shotDir, { recursive: true, force: true });
});

/** Waits until the element's text is `expected` (a string: exactly), failing with what it says instead. */
async function waitForText(page: Page, id: string, expected: string | RegExp, ms = 5000): Promise<void> {
  const want = typeof expected === 'string' ? { exact: expected } : { source: expected.source, flags: expected.flags };
  try {
    await page.waitForFunction(
      ({ id, want }) => {
        const text = document.getElementById(id)?.textContent ?? '';
        return want.exact !== undefined ? text === want.exact : new RegExp(want.source!, want.flags).test(text);
      },
      { id, want: want as { exact?: string; source?: string; flags?: string } },
      { timeout: ms },
    );
  } catch {
    assert.fail(`#${id} says ${JSON.stringify(await page.textContent(`#${id}`))}, expected ${String(expected)} within ${ms} ms`);
  }
}

const offlineCount = (rec: Recorder, userId: number) => rec.named('user-offline').filter((p) => p.user_id === userId).length;

test('the real-time demo page, in headless Chromium', { skip }, async (t) => {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  // Anything the page throws, any dialog (an XSS alert) and any console error but the failed
  // requests the browser reports by itself (the wrong password's 401) fail the test.
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console: ${m.text()}`);
  });
  const user = await h.newUser();
  const other = await h.newUser();
  let rec: Recorder | undefined;
  const otherRec = () => rec ?? assert.fail('the other user is not connected');
  const messageItem = (id: unknown) => page.locator(`#messages li[data-id="${String(id)}"]`);

  await t.test('served as an HTML page, not cached, its script a file named by its content and cached for good', async () => {
    const res = await page.goto(`${h.server.url}/realtime-demo`);
    assert.equal(res?.status(), 200);
    assert.equal(res?.headers()['content-type'], 'text/html; charset=utf-8');
    assert.equal(res?.headers()['cache-control'], 'no-store');
    const script = /<script src="(\/realtime-demo\/demo-[A-Z0-9]+\.js)"><\/script>/.exec(await res!.text())?.[1];
    assert.ok(script, 'the page names its hashed script');
    const asset = await fetch(h.server.url + script);
    assert.equal(asset.status, 200);
    assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal((await fetch(`${h.server.url}/realtime-demo/..%2Fbuild.json`)).status, 404);
    assert.equal(await page.locator('[onclick], [onsubmit], [onload], [style]').count(), 0, 'no inline handlers or styles (CSP)');
    assert.equal(await page.textContent('#conn-state'), 'logged out');
  });

  await t.test('a failed login shows the error', async () => {
    await page.fill('#email', user.email);
    await page.fill('#password', 'not-the-password');
    await page.click('#login');
    await waitForText(page, 'login-error', /^INVALID_CREDENTIALS: \S/);
    assert.equal(await page.isVisible('#session'), false);
  });

  await t.test('logging in connects, and the user is online', async () => {
    await page.fill('#password', user.password);
    await page.click('#login');
    await waitForText(page, 'conn-state', 'connected');
    assert.equal(await page.textContent('#login-error'), '');
    assert.equal(await page.isVisible('#login-form'), false);
    assert.match((await page.textContent('#me')) ?? '', new RegExp(`user ${user.id}\\b`));
    await page.locator(`#presence [data-user-id="${user.id}"]`).waitFor({ timeout: 5000 });
    assert.match((await page.textContent(`#presence [data-user-id="${user.id}"]`)) ?? '', /\(you\)/);
  });

  await t.test('another user coming online shows up (user-online)', async () => {
    const opened = await connectRecording(other);
    sockets.push(opened.socket);
    rec = opened.rec;
    await page.locator(`#presence [data-user-id="${other.id}"]`).waitFor({ timeout: 5000 });
  });

  await t.test("another user's message, posted through the API, appears", async () => {
    const text = `from the API ${uniqueWord()}`;
    const sent = await postMessage(other, 'general', text);
    await messageItem(sent.id).waitFor({ timeout: 5000 });
    assert.equal(await messageItem(sent.id).locator('.text').textContent(), text);
    assert.equal(await messageItem(sent.id).locator('.author').textContent(), `user ${other.id}:`);
    assert.match((await page.textContent('#last-event-id')) ?? '', /^\d+$/);
  });

  await t.test("a message sent from the page reaches another user's socket and appears on the page", async () => {
    const text = `from the page ${uniqueWord()}`;
    await page.fill('#message-text', text);
    await page.click('#send');
    const got = await otherRec().waitFor((e) => e.name === 'new-message' && e.payload.text === text, 5000, 'the message from the page');
    assert.equal(got.payload.author_id, user.id);
    assert.equal(got.payload.room, 'general');
    await messageItem(got.payload.id).waitFor({ timeout: 5000 });
    assert.equal(await messageItem(got.payload.id).locator('.text').textContent(), text);
    assert.equal(await page.locator('#messages li', { hasText: text }).count(), 1, 'shown once (acknowledgement and broadcast)');
    assert.equal(await page.inputValue('#message-text'), '');
    assert.equal(await page.textContent('#send-error'), '');
  });

  await t.test('a message over 2000 characters is refused: the page shows VALIDATION_FAILED and stays connected', async () => {
    const before = await page.locator('#messages li').count();
    await page.fill('#message-text', 'x'.repeat(2001));
    await page.click('#send');
    await waitForText(page, 'send-error', /^VALIDATION_FAILED: \S/);
    assert.equal(await page.locator('#messages li').count(), before);
    assert.equal(await page.textContent('#conn-state'), 'connected');
    await page.fill('#message-text', '');
  });

  await t.test('markup in a message is shown as text, never as HTML', async () => {
    const fromPage = `<img src=x onerror="window.__xss = 1; alert(1)"> ${uniqueWord()}`;
    await page.fill('#message-text', fromPage);
    await page.click('#send');
    const got = await otherRec().waitFor((e) => e.name === 'new-message' && e.payload.text === fromPage, 5000, 'the markup message');
    const fromApi = `<img src=y onerror="window.__xss = 2"><script>window.__xss = 3</script> ${uniqueWord()}`;
    const posted = await postMessage(other, 'general', fromApi);
    await messageItem(got.payload.id).waitFor({ timeout: 5000 });
    await messageItem(posted.id).waitFor({ timeout: 5000 });
    assert.equal(await messageItem(got.payload.id).locator('.text').textContent(), fromPage);
    assert.equal(await messageItem(posted.id).locator('.text').textContent(), fromApi);
    assert.equal(await page.locator('img').count(), 0, 'no img element was created');
    assert.equal(await page.locator('#messages script').count(), 0);
    assert.equal(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss), undefined);
  });

  await t.test('a notification appears (new-notification)', async () => {
    const project = await createProject(other, { name: `Demo ${uniqueWord()}` });
    await addMember(other, project.id, user.id);
    const item = page.locator('#notifications li', { hasText: 'project_member_added' });
    await item.waitFor({ timeout: 5000 });
    const summary = ((await item.locator('.payload').textContent()) ?? '').split(', ');
    for (const part of [`project_id=${project.id}`, `project_name=${project.name}`, 'role=MEMBER', `actor_id=${other.id}`]) assert.ok(summary.includes(part), `${part} in ${summary.join(', ')}`);
  });

  await t.test('disconnect, then reconnect: the message missed meanwhile is replayed from the last event_id', async () => {
    const offline = offlineCount(otherRec(), user.id);
    await page.click('#toggle');
    await waitForText(page, 'conn-state', 'disconnected (io client disconnect)');
    await otherRec().waitFor(() => offlineCount(otherRec(), user.id) > offline, 5000, 'user-offline');
    const lastBefore = Number(await page.textContent('#last-event-id'));
    const text = `missed ${uniqueWord()}`;
    const missed = await postMessage(other, 'general', text);
    await otherRec().waitFor((e) => e.name === 'new-message' && e.payload.text === text, 5000, 'the missed message, live');
    assert.equal(await messageItem(missed.id).count(), 0, 'not shown while disconnected');
    await page.click('#toggle');
    await waitForText(page, 'conn-state', 'connected');
    await messageItem(missed.id).waitFor({ timeout: 5000 });
    assert.ok(Number(await page.textContent('#last-event-id')) > lastBefore);
    assert.equal(await page.isVisible('#notice'), false, 'a replay, not a resync');
    await page.locator(`#presence [data-user-id="${user.id}"]`).waitFor({ timeout: 5000 });
    await page.locator(`#presence [data-user-id="${other.id}"]`).waitFor({ timeout: 5000 });
  });

  await t.test('events no longer kept: the page shows the resync notice and reloads the messages', async () => {
    await page.click('#toggle');
    await waitForText(page, 'conn-state', 'disconnected (io client disconnect)');
    const text = `pruned ${uniqueWord()}`;
    const gone = await postMessage(other, 'general', text);
    await otherRec().waitFor((e) => e.name === 'new-message' && e.payload.text === text, 5000, 'the pruned message, live');
    // One more event, so that the pruned one is not in the newest batch (which pruning keeps: it
    // says where numbering stands); then pruned as retention would, every batch older than it.
    const later = await postMessage(other, 'general', `later ${uniqueWord()}`);
    await otherRec().waitFor((e) => e.name === 'new-message' && e.payload.id === later.id, 5000, 'a later message, live');
    await h.server.owner.query(
      `WITH gone AS (DELETE FROM outbox_batches WHERE last_event_id < (SELECT max(last_event_id) FROM outbox_batches) RETURNING row_ids)
       DELETE FROM outbox WHERE id IN (SELECT unnest(row_ids) FROM gone)`,
    );
    await page.click('#toggle');
    await waitForText(page, 'conn-state', 'connected');
    await waitForText(page, 'notice', /no longer kept \(retention/);
    await messageItem(gone.id).waitFor({ timeout: 5000 });
  });

  await t.test('logging out ends the session and the socket', async () => {
    const offline = offlineCount(otherRec(), user.id);
    await page.click('#logout');
    await waitForText(page, 'conn-state', 'logged out');
    await otherRec().waitFor(() => offlineCount(otherRec(), user.id) > offline, 5000, 'user-offline after logout');
    assert.equal(await page.isVisible('#login-form'), true);
    assert.equal(await page.isVisible('#session'), false);
    assert.equal(await page.locator('#presence li').count(), 0);
  });

  await t.test('a screenshot of the page', async () => {
    shotDir = mkdtempSync(path.join(tmpdir(), 'teamlog-demo-'));
    const file = path.join(shotDir, 'realtime-demo.png');
    await page.screenshot({ path: file, fullPage: true });
    assert.ok(statSync(file).size > 0);
    t.diagnostic(process.env.TEST_KEEP_SCREENSHOTS ? `screenshot: ${file}` : 'screenshot taken (TEST_KEEP_SCREENSHOTS=1 keeps it)');
  });

  assert.deepEqual(problems, []);
});
