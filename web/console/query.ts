// The search text in the page's URL (?q=…), the pivots that narrow it, and the terms the filter
// controls write into it. The page never interprets a query beyond finding a key's terms: the
// service parses it (and says what is wrong with it).

/** The terms of a query as typed: split on spaces outside double quotes. */
export function terms(q: string): string[] {
  return q.match(/(?:[^\s"]+|"[^"]*"?)+/g) ?? [];
}

const isKey = (term: string, key: string) => term.toLowerCase().startsWith(`${key}:`);

/**
 * The query with `key:value` in place of its other (not negated) terms of that key, or without
 * them when value is undefined. A repeated key means OR, so a control's term replaces rather than
 * widens.
 */
export function withTerm(q: string, key: string, value: string | undefined): string {
  const kept = terms(q).filter((t) => !isKey(t, key));
  return (value === undefined ? kept : [...kept, `${key}:${value}`]).join(' ');
}

/** The query narrowed to `key:value` (a pivot: clicking an actor or a resource). */
export const narrow = (q: string, key: string, value: string): string => withTerm(q, key, value);

/** The value of the query's one (not negated) term of `key`; undefined when it has none, '' when several. */
export function termValue(q: string, key: string): string | undefined {
  const found = terms(q).filter((t) => isKey(t, key));
  if (found.length === 0) return undefined;
  return found.length === 1 ? found[0]!.slice(key.length + 1).replace(/^"(.*)"$/, '$1') : '';
}

/** An instant as the search syntax takes it: ISO 8601 UTC, to the second or the millisecond. */
export const searchInstant = (d: Date): string => d.toISOString().replace('.000Z', 'Z');

export const actorTerm = (actorId: number | null) => (actorId === null ? 'none' : String(actorId));

export const resourceTerm = (type: string, id: number | null) => (id === null ? type : `${type}/${id}`);

export const queryInUrl = (): string => new URLSearchParams(location.search).get('q') ?? '';

/** Keeps the query in the address (a new history entry when it changed), so a link reopens it. */
export function putQueryInUrl(q: string): void {
  const url = new URL(location.href);
  if (q) url.searchParams.set('q', q);
  else url.searchParams.delete('q');
  if (url.href !== location.href) history.pushState(null, '', url);
}

/** The page's address for a query (a link that reopens it). */
export function urlFor(q: string): string {
  const url = new URL(location.href);
  if (q) url.searchParams.set('q', q);
  else url.searchParams.delete('q');
  return url.pathname + url.search;
}
