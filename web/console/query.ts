// The search text in the page's URL (?q=…), and the pivots that narrow it.

/** The terms of a query as typed: split on spaces outside double quotes. */
export function terms(q: string): string[] {
  return q.match(/(?:[^\s"]+|"[^"]*"?)+/g) ?? [];
}

/**
 * The query narrowed to `key:value`. A repeated key means OR, so the term replaces any other
 * (not negated) term of the same key rather than widening the search.
 */
export function narrow(q: string, key: string, value: string): string {
  const kept = terms(q).filter((t) => !t.toLowerCase().startsWith(`${key}:`));
  return [...kept, `${key}:${value}`].join(' ');
}

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
