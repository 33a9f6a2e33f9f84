// Pages answered again from their bytes while nothing has changed in the database.
//
// A list is read far more often than the data under it changes: a dashboard polls, a client
// walks back to page one. Each page's answer (its JSON, ETag and Link) is kept with the
// database snapshot it was read at, and the next read of the same page by the same caller sends
// that snapshot along with the list's statement (db/read-snapshot.ts). When no transaction has
// committed since, the statement returns only the snapshot, and the kept bytes are the answer:
// the rows are not scanned, decoded, presented, serialized or hashed again. The check is made by
// the database in the same round trip, so a change made through any instance, the CLI or psql
// is seen at once; a copy is never served on trust.
import { hash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Actor } from '../context.js';
import type { PageAtSnapshot } from '../domain/page.js';
import { sendPage } from './pagination.js';

interface PageCopy {
  snapshot: string;
  /** The JSON as sent: bytes, encoded once for the hash and the socket alike, and off V8's heap. */
  body: Buffer;
  etag: string;
  link: string | undefined;
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** What one route's copies may take: a page of 100 tasks is about 30 KB, so some hundreds of pages. */
export const PAGE_CACHE_BYTES = 8 * 2 ** 20;

/** How many pages read once are remembered before the memory of them starts afresh. */
const SEEN_ONCE_LIMIT = 4096;

/** The copies of one route's pages, the least recently used dropped first beyond `maxBytes`. */
export class PageCache {
  readonly #copies = new Map<string, PageCopy>();
  /** Pages read once and not kept (yet). */
  readonly #seenOnce = new Set<string>();
  #bytes = 0;
  /** Reads answered from a copy, and from the rows (the metrics read both). */
  hits = 0;
  misses = 0;

  constructor(readonly maxBytes: number) {}

  /** The copy of a page, which becomes the most recently used. */
  take(key: string): PageCopy | undefined {
    const copy = this.#copies.get(key);
    if (copy !== undefined) {
      this.#copies.delete(key);
      this.#copies.set(key, copy);
    }
    return copy;
  }

  /**
   * Keeps the copy of a page read a second time (or again after its copy went stale): a page
   * read once, as most pages walked with a cursor are, is not worth the memory it would hold
   * until pushed out, nor the collector's time.
   */
  keep(key: string, copy: PageCopy): void {
    if (!this.#copies.has(key) && !this.#seenOnce.has(key)) {
      if (this.#seenOnce.size >= SEEN_ONCE_LIMIT) this.#seenOnce.clear();
      this.#seenOnce.add(key);
      return;
    }
    this.#seenOnce.delete(key);
    this.#drop(key);
    // A page that would take more than an eighth of the budget would push out a crowd of others.
    if (copy.body.length * 8 > this.maxBytes) return;
    this.#copies.set(key, copy);
    this.#bytes += copy.body.length;
    for (const oldest of this.#copies.keys()) {
      if (this.#bytes <= this.maxBytes) break;
      this.#drop(oldest);
    }
  }

  get size(): number {
    return this.#copies.size;
  }

  #drop(key: string): void {
    const copy = this.#copies.get(key);
    if (copy === undefined) return;
    this.#copies.delete(key);
    this.#bytes -= copy.body.length;
  }
}

/**
 * Answers a page as sendPage does, from `cache` when the database has not changed since the
 * caller last read it. `read` is given the snapshot of the copy, if any, and returns no page
 * when that is still the database's. A copy is the caller's alone (its id and role are in the
 * key, with the path and query as sent), so no one is ever answered with another's view.
 */
export async function sendCachedPage<T, U>(
  request: FastifyRequest,
  reply: FastifyReply,
  cache: PageCache,
  actor: Actor,
  read: (unchangedSince: string | undefined) => Promise<PageAtSnapshot<T>>,
  present: (items: T[]) => U[],
): Promise<FastifyReply> {
  const key = `${actor.id} ${actor.role} ${request.url}`;
  const copy = cache.take(key);
  const { snapshot, page } = await read(copy?.snapshot);
  if (page === undefined) {
    if (copy === undefined) throw new Error('a snapshot-tagged read left out a page it had no copy of');
    cache.hits++;
    if (copy.link !== undefined) reply.header('link', copy.link);
    return reply.header('etag', copy.etag).type(JSON_TYPE).send(copy.body);
  }
  cache.misses++;
  const body = Buffer.from(reply.serialize(await sendPage(request, reply, page, present)) as string);
  const link = reply.getHeader('link');
  // The ETag conventions.ts would give the same body: a hash of its bytes.
  const etag = `"${hash('sha1', body, 'base64url')}"`;
  cache.keep(key, { snapshot, body, etag, link: typeof link === 'string' ? link : undefined });
  return reply.header('etag', etag).type(JSON_TYPE).send(body);
}
