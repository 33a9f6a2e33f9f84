// The pages `npm run build` bundles from web/ (scripts/build-web.mjs) into dist/web/<page>/:
// index.html, and the script and styles it names, each named by a hash of its content. The page
// is served at its path and revalidated (or not stored) on every load; the hashed files under it
// are cached for good, so that after an upgrade no browser runs an old script against the new
// service. The files are read when asked for, not at start: a server whose pages are not built
// still starts, and says so on the page's path (503). No inline script or style: the pages run
// under the pages' Content-Security-Policy (http/plugins.ts: script and style from this origin).
import { readFile } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import { notFound } from './domain/errors.js';

/** dist/web/, from src/ (tsx) and from dist/ (the build) alike. */
const WEB = new URL('../dist/web/', import.meta.url);

/** A built file's name: the name esbuild gave it, never a path. */
const FILE_NAME = /^[A-Za-z0-9_-]+\.(js|css|map)$/;
const TYPES: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', map: 'application/json; charset=utf-8' };

export interface BuiltPage {
  /** Where it is served ('/console'); its files are under it. */
  path: string;
  /** Its folder in dist/web/ ('console'). */
  dir: string;
  /** The page's own Cache-Control (its files are immutable). */
  cacheControl: 'no-cache' | 'no-store';
  /** Its name in a message: 'The audit console', 'Console file' for a 404. */
  title: string;
  fileTitle: string;
}

export function registerBuiltPage(app: FastifyInstance, page: BuiltPage): void {
  const folder = new URL(`${page.dir}/`, WEB);
  const notBuilt = `${page.title} is not built: run \`npm run build\` (or \`node scripts/build-web.mjs\`), then reload.\n`;
  async function built(name: string): Promise<Buffer | undefined> {
    try {
      return await readFile(new URL(name, folder));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  app.get(page.path, { schema: { hide: true } }, async (_request, reply) => {
    const html = await built('index.html');
    reply.header('cache-control', page.cacheControl);
    if (!html) return reply.code(503).type('text/plain; charset=utf-8').send(notBuilt);
    return reply.type('text/html; charset=utf-8').send(html);
  });

  app.get<{ Params: { file: string } }>(`${page.path}/:file`, { schema: { hide: true } }, async (request, reply) => {
    const ext = FILE_NAME.exec(request.params.file)?.[1];
    const body = ext ? await built(request.params.file) : undefined;
    if (!ext || !body) throw notFound(page.fileTitle);
    // The name holds a hash of the content: a file of this name never changes.
    reply.header('cache-control', 'public, max-age=31536000, immutable');
    return reply.type(TYPES[ext]!).send(body);
  });
}
