// What a browser-facing API is expected to have: CORS, security headers (helmet's) and
// response compression. Registered first, so that every response has their headers, the
// refusals of the conventions' own hooks (406, 415) and the preflights included.
import type { IncomingMessage, ServerResponse } from 'node:http';
import zlib from 'node:zlib';
import compress from '@fastify/compress';
import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import helmet, { type HelmetOptions } from 'helmet';
import type { Config } from '../config.js';

/** Responses smaller than this are sent as they are: compressing them costs more than it saves. */
const COMPRESS_THRESHOLD = 1024;

/**
 * A JSON answer (a page, a resource: a whole string or buffer) up to this size is compressed in
 * one synchronous call; larger ones, and streams (the audit export), through a zlib stream.
 * Under @fastify/compress's own limit (8 KiB on two cores) a page of 50 tasks went through a
 * stream and its pipeline, chunked, at several times the CPU of one call. 64 KiB covers every
 * page of 100 items and holds the event loop for a fraction of a millisecond (the figures:
 * docs/performance.md, "What the profiles showed").
 */
const SYNC_COMPRESS_LIMIT = 64 * 1024;

/**
 * Brotli at quality 2, in a window no larger than the answer. At @fastify/compress's quality 4
 * and the default 4 MB window, brotli sets up megabytes of tables for every answer (mapped and
 * zeroed anew under the README's MALLOC_MMAP_THRESHOLD_), in a stream or in one call. Quality 2
 * in a fitted window costs a fraction of that, for answers barely larger and still smaller than
 * gzip's (the figures: docs/performance.md, "What the profiles showed").
 */
const BROTLI_QUALITY = 2;

/** One-shot brotli in a window just large enough for the answer (the same ratio: it all fits), its size given. */
function brotliCompressSync(buffer: zlib.InputType, options?: zlib.BrotliOptions): Buffer {
  const size = typeof buffer === 'string' ? Buffer.byteLength(buffer) : buffer.byteLength;
  const window = Math.min(zlib.constants.BROTLI_DEFAULT_WINDOW, Math.max(zlib.constants.BROTLI_MIN_WINDOW_BITS, Math.ceil(Math.log2(size + 16))));
  return zlib.brotliCompressSync(buffer, {
    ...options,
    params: { ...options?.params, [zlib.constants.BROTLI_PARAM_LGWIN]: window, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: size },
  });
}

/** Routes that serve HTML to a browser: the API reference, the real-time demo and the audit console. */
const DOCS = '/docs';
const DEMO = '/realtime-demo';
const CONSOLE = '/console';
const under = (url: string, prefix: string) => url === prefix || url.startsWith(`${prefix}/`) || url.startsWith(`${prefix}.`);

/**
 * JSON answers load nothing, run nothing and may not be framed: the strictest policy there is.
 * A browser that is tricked into rendering one as a document runs none of it.
 */
const API_CSP = {
  useDefaults: false,
  directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"], baseUri: ["'none'"], formAction: ["'none'"] },
};

/**
 * The pages: scripts and styles from this origin only, as files (no inline script or style, no
 * eval): /console and /realtime-demo serve their bundled script and styles as hashed files under
 * their own path (web/, scripts/build-web.mjs). `connect-src 'self'` covers the API calls and
 * the socket's websocket.
 * No upgrade-insecure-requests: on plain http://127.0.0.1 it would send the page's own
 * requests to an https:// that does not exist.
 */
const PAGE_CSP = {
  useDefaults: false,
  directives: {
    defaultSrc: ["'self'"],
    baseUri: ["'self'"],
    connectSrc: ["'self'"],
    fontSrc: ["'self'", 'data:'],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
    imgSrc: ["'self'", 'data:'],
    objectSrc: ["'none'"],
    scriptSrc: ["'self'"],
    scriptSrcAttr: ["'none'"],
    styleSrc: ["'self'"],
  },
};

/**
 * Swagger UI 5 needs no inline script (its initializer is a file; @fastify/swagger-ui's
 * static/csp.json lists no hash to allow), but its top bar's SVG logo carries one inline
 * <style> (".logo_small_svg__cls-2{fill:#fff}…"), allowed by its hash rather than by
 * 'unsafe-inline'. A new swagger-ui-dist may change it: test/plugins.test.ts renders /docs in
 * Chromium and fails on any violation, naming the hash to put here.
 */
const SWAGGER_UI_LOGO_STYLE = "'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='";
const DOCS_CSP = { ...PAGE_CSP, directives: { ...PAGE_CSP.directives, styleSrc: ["'self'", SWAGGER_UI_LOGO_STYLE] } };

/** Headers a cross-origin front end may read, besides the CORS-safelisted ones. */
const EXPOSED_HEADERS = [
  'API-Version', 'Content-Disposition', 'Deprecation', 'ETag', 'Idempotent-Replayed', 'Link', 'Location',
  'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After', 'Sunset', 'X-Request-Id',
];
/** Request headers a cross-origin front end may send (the API's whole contract). */
const ALLOWED_HEADERS = ['Accept', 'Authorization', 'Content-Type', 'Idempotency-Key', 'If-Match', 'If-None-Match', 'X-Request-Id'];

/** Besides what the types say: NDJSON (the audit export) compresses as well as JSON does. */
const COMPRESSIBLE = /^(?:text\/(?!event-stream)|application\/(?:[\w.+-]+\+)?(?:json|x-ndjson|javascript|xml)(?:;|$))/;

/**
 * The headers helmet sets for these options. They depend on the options only (no nonce, no
 * directive computed per request), so they are computed once: @fastify/helmet built helmet's
 * middleware again on every request (parsing the policy's directives each time) for the same
 * dozen headers (docs/performance.md, "What the profiles showed").
 */
export function securityHeaders(options: Readonly<HelmetOptions>): Readonly<Record<string, string>> {
  const headers: Record<string, string> = {};
  const res = {
    setHeader: (name: string, value: unknown) => void (headers[name.toLowerCase()] = String(value)),
    removeHeader: (name: string) => void delete headers[name.toLowerCase()],
  };
  let failure: unknown;
  helmet(options)({} as IncomingMessage, res as unknown as ServerResponse, (err?: unknown) => void (failure = err));
  if (failure) throw failure;
  return Object.freeze(headers);
}

// The API is never framed; the pages are not either (frame-ancestors 'none' says it too).
const API_HEADERS = securityHeaders({ contentSecurityPolicy: API_CSP, xFrameOptions: { action: 'deny' } });
const PAGE_HEADERS = securityHeaders({ contentSecurityPolicy: PAGE_CSP, xFrameOptions: { action: 'deny' } });
const DOCS_HEADERS = securityHeaders({ contentSecurityPolicy: DOCS_CSP, xFrameOptions: { action: 'deny' } });

interface SecurityHeadersConfig {
  securityHeaders?: Readonly<Record<string, string>>;
}

export async function registerHttpPlugins(app: FastifyInstance, config: Pick<Config, 'corsOrigins'>): Promise<void> {
  // The pages' policy on their routes, whichever plugin declares them (@fastify/swagger-ui for
  // /docs); every other answer, a 404 included, gets the API's.
  app.addHook('onRoute', (route) => {
    const headers = under(route.url, DOCS) ? DOCS_HEADERS : under(route.url, DEMO) || under(route.url, CONSOLE) ? PAGE_HEADERS : undefined;
    if (!headers) return;
    route.config = { ...(route.config as object), securityHeaders: headers } as typeof route.config;
  });
  app.addHook('onRequest', (request, reply, done) => {
    reply.headers((request.routeOptions.config as SecurityHeadersConfig).securityHeaders ?? API_HEADERS);
    done();
  });

  // Without CORS_ORIGINS, nothing: no header says another origin may read an answer, and a
  // preflight is an OPTIONS like any other (204 with Allow, conventions.ts), which a browser
  // takes as a refusal. With it, an allowed origin's preflight is answered here, before
  // authentication (a preflight carries no credentials); any other origin is told nothing.
  if (config.corsOrigins.length > 0) {
    const anyOrigin = config.corsOrigins.includes('*');
    const allowed = new Set(config.corsOrigins);
    await app.register(cors, {
      origin: (origin, callback) => callback(null, origin !== undefined && (anyOrigin || allowed.has(origin)) ? origin : false),
      methods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE'],
      allowedHeaders: ALLOWED_HEADERS,
      exposedHeaders: EXPOSED_HEADERS,
      // Bearer tokens, not cookies: the browser sends no credentials of its own.
      credentials: false,
      maxAge: 600,
      // An OPTIONS with an Origin but no Access-Control-Request-Method is not a preflight: it
      // gets the CORS headers and goes on, instead of a 400.
      strictPreflight: false,
    });
  }

  await app.register(compress, {
    threshold: COMPRESS_THRESHOLD,
    encodings: ['br', 'gzip', 'deflate'],
    customTypes: COMPRESSIBLE,
    // Request bodies stay uncompressed: a Content-Encoding on a request is 415 (docs/api.md section 1).
    globalDecompression: false,
    syncThreshold: SYNC_COMPRESS_LIMIT,
    brotliOptions: { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } },
    // Only the one-shot brotli is replaced; streams and the other codings are zlib's own.
    zlib: { brotliCompressSync },
  });
}
