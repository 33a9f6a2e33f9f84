// GET /console: the audit console (docs/api.md section 4, "Audit console"), a page that reads the
// audit routes with the signed-in ADMIN's token. Its files are built by `npm run build`
// (scripts/build-web.mjs, from web/console/) into dist/web/console/: index.html, and the script
// and styles it names, each named by a hash of its content. The page is revalidated on every
// load and the hashed files are cached for good, so that after an upgrade no browser runs an
// old script against the new service. The files are read when asked for, not at start: a
// server whose console is not built still starts, and says so on /console.
// Security headers: the pages' policy (http/plugins.ts: script and style from this origin only).
import { readFile } from 'node:fs/promises';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { notFound } from '../../domain/errors.js';

/** dist/web/console/, from src/modules/audit/ (tsx) and from dist/modules/audit/ (the build) alike. */
const BUILT = new URL('../../../dist/web/console/', import.meta.url);

/** A built file's name: the name esbuild gave it, never a path. */
const FILE_NAME = /^[A-Za-z0-9_-]+\.(js|css|map)$/;
const TYPES: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', map: 'application/json; charset=utf-8' };

const NOT_BUILT = 'The audit console is not built: run `npm run build` (or `node scripts/build-web.mjs`), then reload.\n';

async function built(name: string): Promise<Buffer | undefined> {
  try {
    return await readFile(new URL(name, BUILT));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

export function registerAuditConsole(app: FastifyInstance): void {
  app.get('/console', { schema: { hide: true } }, async (_request, reply: FastifyReply) => {
    const page = await built('index.html');
    reply.header('cache-control', 'no-cache');
    if (!page) return reply.code(503).type('text/plain; charset=utf-8').send(NOT_BUILT);
    return reply.type('text/html; charset=utf-8').send(page);
  });

  app.get<{ Params: { file: string } }>('/console/:file', { schema: { hide: true } }, async (request, reply) => {
    const ext = FILE_NAME.exec(request.params.file)?.[1];
    const body = ext ? await built(request.params.file) : undefined;
    if (!ext || !body) throw notFound('Console file');
    // The name holds a hash of the content: a file of this name never changes.
    reply.header('cache-control', 'public, max-age=31536000, immutable');
    return reply.type(TYPES[ext]!).send(body);
  });
}
