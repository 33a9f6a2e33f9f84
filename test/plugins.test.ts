// The Fastify plugins of src/http/plugins.ts, seen from a client: CORS (CORS_ORIGINS), the
// security headers (helmet) on the API and on the pages, and compression of larger answers.
// Requests go through node:http, which (unlike fetch) neither asks for nor undoes compression.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { describe, test } from 'node:test';
import zlib from 'node:zlib';
import { chromium } from 'playwright-core';
import { useTestServer } from './helpers/harness.js';
import { onPostgres, startTestServer, type TestServer } from './helpers/server.js';

// /realtime-demo's files, as `npm run build` makes them from web/demo/ (a no-op when they are current).
execFileSync(process.execPath, ['scripts/build-web.mjs', '--if-changed'], { stdio: 'inherit' });

const ALLOWED = 'https://app.example.com';
const h = useTestServer({ env: { CORS_ORIGINS: `${ALLOWED}, http://localhost:5173` } });

interface Raw {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function raw(server: TestServer, method: string, path: string, headers: Record<string, string> = {}): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const corsHeaders = (res: Raw) => Object.keys(res.headers).filter((name) => name.startsWith('access-control-'));
const preflight = (origin: string) => ({ origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, idempotency-key' });

describe('CORS', () => {
  test('a preflight from an allowed origin gets 204 with the CORS headers, without credentials', async () => {
    const res = await raw(h.server, 'OPTIONS', '/api/v1/tasks', preflight(ALLOWED));
    assert.equal(res.status, 204);
    assert.equal(res.headers['access-control-allow-origin'], ALLOWED);
    assert.match(String(res.headers['access-control-allow-methods']), /\bPOST\b/);
    assert.match(String(res.headers['access-control-allow-methods']), /\bDELETE\b/);
    for (const header of ['authorization', 'content-type', 'idempotency-key', 'if-match']) {
      assert.match(String(res.headers['access-control-allow-headers']).toLowerCase(), new RegExp(`\\b${header}\\b`));
    }
    assert.equal(res.headers['access-control-max-age'], '600');
    assert.equal(res.headers['access-control-allow-credentials'], undefined);
    assert.match(String(res.headers.vary), /\bOrigin\b/i);
  });

  test('a preflight from an origin not in CORS_ORIGINS gets no CORS header at all, and no 405', async () => {
    const res = await raw(h.server, 'OPTIONS', '/api/v1/tasks', preflight('https://evil.example.com'));
    assert.equal(res.status, 204);
    assert.deepEqual(corsHeaders(res), []);
    assert.equal(res.headers.allow, 'GET, HEAD, OPTIONS, POST');
  });

  test('an allowed origin may read the answer and its headers; another origin may not', async () => {
    const allowed = await raw(h.server, 'GET', '/api/v1/tasks', { origin: 'http://localhost:5173', authorization: `Bearer ${h.admin.token}` });
    assert.equal(allowed.status, 200);
    assert.equal(allowed.headers['access-control-allow-origin'], 'http://localhost:5173');
    const exposed = String(allowed.headers['access-control-expose-headers']).toLowerCase();
    for (const header of ['etag', 'link', 'location', 'x-request-id', 'ratelimit-remaining', 'retry-after']) assert.ok(exposed.includes(header), `${header} is not exposed`);
    const other = await raw(h.server, 'GET', '/api/v1/tasks', { origin: 'https://evil.example.com', authorization: `Bearer ${h.admin.token}` });
    assert.equal(other.status, 200);
    assert.deepEqual(corsHeaders(other), []);
  });

  test('an error answer to an allowed origin is readable too (401 problem+json)', async () => {
    const res = await raw(h.server, 'GET', '/api/v1/tasks', { origin: ALLOWED });
    assert.equal(res.status, 401);
    assert.equal(res.headers['access-control-allow-origin'], ALLOWED);
  });

  test('without CORS_ORIGINS: same origin only, no CORS header, and a preflight is 204 with Allow, not 405', async () => {
    const server = await startTestServer();
    try {
      const pre = await raw(server, 'OPTIONS', '/api/v1/tasks/1', preflight(ALLOWED));
      assert.equal(pre.status, 204);
      assert.deepEqual(corsHeaders(pre), []);
      assert.match(String(pre.headers.allow), /^(?=.*\bGET\b)(?=.*\bOPTIONS\b)/);
      const get = await raw(server, 'GET', '/api/v1/version', { origin: ALLOWED });
      assert.equal(get.status, 200);
      assert.deepEqual(corsHeaders(get), []);
      const unknown = await raw(server, 'OPTIONS', '/api/v1/no-such-thing', preflight(ALLOWED));
      assert.equal(unknown.status, 404);
    } finally {
      await server.close();
    }
  });
});

describe('security headers', () => {
  const common = (res: Raw) => {
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.equal(res.headers['x-frame-options'], 'DENY');
    assert.equal(res.headers['referrer-policy'], 'no-referrer');
    assert.equal(res.headers['cross-origin-opener-policy'], 'same-origin');
    assert.match(String(res.headers['strict-transport-security']), /^max-age=\d+/);
  };
  const directives = (res: Raw) =>
    new Map(String(res.headers['content-security-policy']).split(';').map((d) => d.trim().split(/\s+/)).map(([name = '', ...values]) => [name, values]));

  test('/api answers: the strictest Content-Security-Policy (a JSON answer loads and runs nothing)', async () => {
    for (const res of [await raw(h.server, 'GET', '/api/v1/version'), await raw(h.server, 'GET', '/api/v1/tasks'), await raw(h.server, 'GET', '/api/v1/nope')]) {
      common(res);
      const csp = directives(res);
      assert.deepEqual(csp.get('default-src'), ["'none'"]);
      assert.deepEqual(csp.get('frame-ancestors'), ["'none'"]);
    }
  });

  test('/docs and /realtime-demo: scripts and styles from the origin only, no unsafe-inline or eval', async () => {
    for (const path of ['/docs', '/docs/', '/realtime-demo']) {
      const res = await raw(h.server, 'GET', path);
      assert.ok(res.status === 200 || (res.status >= 300 && res.status < 400), `${path}: ${res.status}`);
      common(res);
      const csp = directives(res);
      assert.deepEqual(csp.get('script-src'), ["'self'"], path);
      assert.deepEqual(csp.get('script-src-attr'), ["'none'"], path);
      assert.ok(!String(res.headers['content-security-policy']).includes('unsafe'), `${path}: ${res.headers['content-security-policy']}`);
      assert.ok(!csp.has('upgrade-insecure-requests'), `${path}: upgrade-insecure-requests breaks plain-HTTP pages`);
    }
  });

  test('/realtime-demo has no inline script or style: they are files under /realtime-demo/', async () => {
    const page = (await raw(h.server, 'GET', '/realtime-demo')).body.toString();
    assert.ok(!/<style/i.test(page), 'an inline <style>');
    for (const tag of page.match(/<script[^>]*>[\s\S]*?<\/script>/gi) ?? []) assert.match(tag, /^<script src="[^"]+"><\/script>$/, tag);
    const script = await raw(h.server, 'GET', /<script src="(\/realtime-demo\/[^"]+)"/.exec(page)?.[1] ?? assert.fail('no script'));
    assert.equal(script.status, 200);
    assert.match(String(script.headers['content-type']), /^text\/javascript/);
    assert.match(script.body.toString(), /addEventListener\(["']submit["']/);
    const css = await raw(h.server, 'GET', /<link rel="stylesheet" href="(\/realtime-demo\/[^"]+)"/.exec(page)?.[1] ?? assert.fail('no stylesheet'));
    assert.equal(css.status, 200);
    assert.match(String(css.headers['content-type']), /^text\/css/);
  });

  const CHROMIUM = '/usr/bin/chromium';
  const skip = onPostgres ? 'runs in the PGlite pass' : existsSync(CHROMIUM) ? false : `Chromium not found at ${CHROMIUM}`;
  test('/docs and /realtime-demo render in Chromium under their policy with no violation', { skip }, async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
    try {
      const page = await browser.newPage();
      const violations: string[] = [];
      page.on('console', (m) => {
        if (/Content.Security.Policy/i.test(m.text())) violations.push(m.text());
      });
      await page.goto(`${h.server.url}/docs`);
      await page.locator('.swagger-ui .info .title').waitFor({ timeout: 15_000 });
      await page.locator('.opblock').first().waitFor({ timeout: 15_000 });
      await page.goto(`${h.server.url}/realtime-demo`);
      // Its script ran (the form handler is there) and its stylesheet applied.
      await page.waitForFunction(() => document.body.dataset.ready === 'true' && getComputedStyle(document.body).maxWidth !== 'none');
      assert.deepEqual(violations, []);
    } finally {
      await browser.close();
    }
  });
});

describe('compression', () => {
  h.before(async () => {
    // Enough users for a list well over 1 KB.
    for (let i = 0; i < 12; i++) await h.newUser({ name: `Compression test user number ${i}` });
  });

  test('a large list is compressed when the client asks (br, gzip), and decodes to the same JSON', async () => {
    const auth = { authorization: `Bearer ${h.admin.token}` };
    const plain = await raw(h.server, 'GET', '/api/v1/users?limit=100', auth);
    assert.equal(plain.status, 200);
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.ok(plain.body.length > 1024, `the list is only ${plain.body.length} bytes`);
    for (const [encoding, decode] of [['br', zlib.brotliDecompressSync], ['gzip', zlib.gunzipSync]] as const) {
      const res = await raw(h.server, 'GET', '/api/v1/users?limit=100', { ...auth, 'accept-encoding': encoding });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-encoding'], encoding);
      assert.match(String(res.headers.vary), /accept-encoding/i);
      assert.ok(res.body.length < plain.body.length, `${encoding}: ${res.body.length} bytes against ${plain.body.length}`);
      // Compressed in one call, not through a stream: it goes out whole, with its length.
      assert.equal(res.headers['content-length'], String(res.body.length));
      assert.equal(res.headers['transfer-encoding'], undefined);
      assert.deepEqual(JSON.parse(decode(res.body).toString()), JSON.parse(plain.body.toString()));
    }
  });

  test('an answer under 1 KB is sent as it is', async () => {
    const res = await raw(h.server, 'GET', '/api/v1/users?limit=1', { authorization: `Bearer ${h.admin.token}`, 'accept-encoding': 'gzip, br' });
    assert.equal(res.status, 200);
    assert.ok(res.body.length < 1024);
    assert.equal(res.headers['content-encoding'], undefined);
    assert.equal(JSON.parse(res.body.toString()).data.length, 1);
  });

  test('the streamed audit export (NDJSON) is compressed as it streams, and decodes to the same lines', async () => {
    const auth = { authorization: `Bearer ${h.admin.token}` };
    const gz = await raw(h.server, 'GET', '/api/v1/audit-logs/export', { ...auth, 'accept-encoding': 'gzip' });
    assert.equal(gz.status, 200);
    assert.equal(gz.headers['content-encoding'], 'gzip');
    assert.equal(gz.headers['transfer-encoding'], 'chunked');
    const lines = zlib.gunzipSync(gz.body).toString().trim().split('\n').map((l) => JSON.parse(l) as { type: string });
    assert.ok(lines.some((l) => l.type === 'record'));
  });

  test('a matching If-None-Match is still a bodiless 304', async () => {
    const auth = { authorization: `Bearer ${h.admin.token}`, 'accept-encoding': 'gzip' };
    const first = await raw(h.server, 'GET', '/api/v1/users?limit=100', auth);
    const again = await raw(h.server, 'GET', '/api/v1/users?limit=100', { ...auth, 'if-none-match': String(first.headers.etag) });
    assert.equal(again.status, 304);
    assert.equal(again.body.length, 0);
  });
});
