// GET /realtime-demo: one page a person can use to try real-time (docs/realtime.md): log in,
// watch the messages, notifications and presence arrive, send a message and see its
// acknowledgement, disconnect and reconnect (replay from the last event_id), log out. Its
// source is web/demo/ (TypeScript on @teamlog/client), built by `npm run build`
// (scripts/build-web.mjs) into dist/web/demo/: index.html, and the script and styles it names,
// each named by a hash of its content and served under /realtime-demo/. The page is not cached
// and the hashed files are cached for good, so that after an upgrade no browser runs an old
// script against the new service. No inline script or style: the page runs under the pages'
// Content-Security-Policy (http/plugins.ts: script and style from this origin only). The files
// are read when asked for, not at start: a server whose pages are not built still starts, and
// says so on /realtime-demo.
import { readFile } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import { notFound } from '../domain/errors.js';

/** dist/web/demo/, from src/realtime/ (tsx) and from dist/realtime/ (the build) alike. */
const BUILT = new URL('../../dist/web/demo/', import.meta.url);

/** A built file's name: the name esbuild gave it, never a path. */
const FILE_NAME = /^[A-Za-z0-9_-]+\.(js|css|map)$/;
const TYPES: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', map: 'application/json; charset=utf-8' };

const NOT_BUILT = 'The real-time demo is not built: run `npm run build` (or `node scripts/build-web.mjs`), then reload.\n';

async function built(name: string): Promise<Buffer | undefined> {
  try {
    return await readFile(new URL(name, BUILT));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

export function registerRealtimeDemo(app: FastifyInstance): void {
  app.get('/realtime-demo', { schema: { hide: true } }, async (_request, reply) => {
    const page = await built('index.html');
    reply.header('cache-control', 'no-store');
    if (!page) return reply.code(503).type('text/plain; charset=utf-8').send(NOT_BUILT);
    return reply.type('text/html; charset=utf-8').send(page);
  });

  app.get<{ Params: { file: string } }>('/realtime-demo/:file', { schema: { hide: true } }, async (request, reply) => {
    const ext = FILE_NAME.exec(request.params.file)?.[1];
    const body = ext ? await built(request.params.file) : undefined;
    if (!ext || !body) throw notFound('Demo file');
    // The name holds a hash of the content: a file of this name never changes.
    reply.header('cache-control', 'public, max-age=31536000, immutable');
    return reply.type(TYPES[ext]!).send(body);
  });
}
