// Opaque keyset cursors and the Link header: the HTTP form of the domain's page requests
// (domain/page.ts). A cursor names the key of the previous page's last row, so rows inserted
// meanwhile never shift a page.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DEFAULT_PAGE_SIZE, type Page, type PageRequest } from '../domain/page.js';
import { invalid } from '../domain/errors.js';

export function encodeCursor(key: number): string {
  return Buffer.from(JSON.stringify({ b: key })).toString('base64url');
}

/** The page a request asks for: `?limit=` and `?cursor=` (400 for a cursor this API did not issue). */
export function pageRequest(query: { limit?: number; cursor?: string }): PageRequest {
  const limit = query.limit ?? DEFAULT_PAGE_SIZE;
  if (query.cursor === undefined) return { limit, after: undefined };
  try {
    const parsed = JSON.parse(Buffer.from(query.cursor, 'base64url').toString('utf8')) as { b?: unknown };
    if (typeof parsed.b === 'number' && Number.isSafeInteger(parsed.b) && parsed.b > 0) return { limit, after: parsed.b };
  } catch {
    // fall through
  }
  throw invalid('cursor', 'is not a cursor this API issued', 'query');
}

/**
 * Answers a page: `present` turns its items into what goes out (one call for the whole page,
 * so a presenter may batch its own look-ups); when there is a next page, `next_cursor` and a
 * `Link: rel="next"` header say where it is.
 */
export async function sendPage<T, U>(
  request: FastifyRequest,
  reply: FastifyReply,
  page: Page<T>,
  present: (items: T[]) => U[] | Promise<U[]>,
): Promise<{ data: U[]; next_cursor: string | null }> {
  const nextCursor = page.next === undefined ? null : encodeCursor(page.next);
  if (nextCursor) {
    // The same path and query with the cursor set (a URL object costs more than the query alone).
    const q = request.url.indexOf('?');
    const params = new URLSearchParams(q === -1 ? '' : request.url.slice(q + 1));
    params.set('cursor', nextCursor);
    reply.header('link', `<${q === -1 ? request.url : request.url.slice(0, q)}?${params}>; rel="next"`);
  }
  return { data: await present(page.items), next_cursor: nextCursor };
}
