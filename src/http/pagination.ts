// Opaque keyset cursors and the Link header. A cursor names the last row of the page
// (newest-first by id), so rows inserted meanwhile never shift a page.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { invalid } from './errors.js';

export interface PageRequest {
  limit: number;
  /** The id the next page starts below (exclusive), or undefined for the first page. */
  beforeId: number | undefined;
}

export function encodeCursor(lastId: number): string {
  return Buffer.from(JSON.stringify({ b: lastId })).toString('base64url');
}

export function pageRequest(query: { limit?: number; cursor?: string }): PageRequest {
  const limit = query.limit ?? 20;
  if (query.cursor === undefined) return { limit, beforeId: undefined };
  try {
    const parsed = JSON.parse(Buffer.from(query.cursor, 'base64url').toString('utf8')) as { b?: unknown };
    if (typeof parsed.b === 'number' && Number.isSafeInteger(parsed.b) && parsed.b > 0) return { limit, beforeId: parsed.b };
  } catch {
    // fall through
  }
  throw invalid('cursor', 'is not a cursor this API issued', 'query');
}

/**
 * Given rows fetched with LIMIT limit+1, sets the Link header and answers the page body:
 * `present` turns the page's rows into what goes out (one call for the whole page, so a
 * presenter may batch its own look-ups), and `keyOf` names the key the cursor carries: the
 * id by default, for rows ordered by id descending.
 */
export async function sendPage<T, U>(
  request: FastifyRequest,
  reply: FastifyReply,
  rows: T[],
  page: PageRequest,
  present: (rows: T[]) => U[] | Promise<U[]>,
  keyOf: (row: T) => number = (row) => (row as { id: number }).id,
): Promise<{ data: U[]; next_cursor: string | null }> {
  const hasMore = rows.length > page.limit;
  const data = hasMore ? rows.slice(0, page.limit) : rows;
  const nextCursor = hasMore ? encodeCursor(keyOf(data[data.length - 1]!)) : null;
  if (nextCursor) {
    // The same path and query with the cursor set (a URL object costs more than the query alone).
    const q = request.url.indexOf('?');
    const params = new URLSearchParams(q === -1 ? '' : request.url.slice(q + 1));
    params.set('cursor', nextCursor);
    reply.header('link', `<${q === -1 ? request.url : request.url.slice(0, q)}?${params}>; rel="next"`);
  }
  return { data: await present(data), next_cursor: nextCursor };
}
