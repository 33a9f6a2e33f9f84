// Keyset pages as async iterators: `for await (const task of client.tasks.list(q))` walks every
// page, fetching the next one only when the loop gets there; `.page(cursor)` fetches one page
// with its cursor, for "load more" buttons and for resuming later.
import type { Page } from './types.js';

/** `P`: the page as the list answers it, when it carries more than its items (the audit log's `actors`). */
export class Paginated<T, P extends Page<T> = Page<T>> implements AsyncIterable<T> {
  constructor(
    private readonly fetchPage: (cursor: string | null) => Promise<P>,
    private readonly first: string | null = null,
  ) {}

  /** One page: from `cursor` (a page's next_cursor), or the first page of the query. */
  page(cursor: string | null = this.first): Promise<P> {
    return this.fetchPage(cursor);
  }

  /** Page after page, until the last. */
  async *pages(): AsyncGenerator<P, void, undefined> {
    let cursor = this.first;
    do {
      const page = await this.fetchPage(cursor);
      yield page;
      cursor = page.next_cursor;
    } while (cursor !== null);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.data;
  }

  /** Every item, at most `max` (default: no bound; mind a long list). */
  async toArray(max = Infinity): Promise<T[]> {
    const items: T[] = [];
    for await (const item of this) {
      if (items.length >= max) break;
      items.push(item);
    }
    return items;
  }
}
