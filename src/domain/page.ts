// Keyset pages as the domain sees them: how many rows, and the key to continue after. The
// HTTP layer turns cursors into page requests and back (http/pagination.ts); a socket
// handler or the CLI passes keys directly.

export interface PageRequest {
  /** Rows per page, 1..100. */
  limit: number;
  /** The key of the previous page's last row (exclusive), or undefined for the first page. */
  after: number | undefined;
}

export interface Page<T> {
  items: T[];
  /** The key to pass as `after` for the next page; undefined on the last page. */
  next: number | undefined;
}

export const DEFAULT_PAGE_SIZE = 20;

/**
 * A page from rows fetched with LIMIT limit + 1 (the extra row only tells that more exist).
 * `keyOf` names the key the next page continues after: the id by default.
 */
export function pageOf<T>(rows: T[], request: PageRequest, keyOf: (row: T) => number = (row) => (row as { id: number }).id): Page<T> {
  if (rows.length <= request.limit) return { items: rows, next: undefined };
  const items = rows.slice(0, request.limit);
  return { items, next: keyOf(items[items.length - 1]!) };
}

/**
 * A page read at a database snapshot (db/read-snapshot.ts): `page` is undefined when the caller
 * said which snapshot its copy was read at and nothing has changed since, so the copy still is it.
 */
export interface PageAtSnapshot<T> {
  snapshot: string;
  page: Page<T> | undefined;
}
