// Optimistic concurrency. A resource's strong ETag derives from its version, which every
// change to it or its sub-resources bumps; a PUT with a stale If-Match gets 412.
import { preconditionFailed } from './errors.js';

/** Strong ETag of a versioned resource. `view` separates representations (e.g. with or without email). */
export function versionEtag(kind: string, id: number, version: number, view = ''): string {
  return `"${kind}-${id}-v${version}${view ? `-${view}` : ''}"`;
}

export type IfMatch = string | undefined;

/**
 * Throws 412 unless If-Match is absent, `*`, or names one of the ETags this version of the
 * resource may have been served with. Call it inside the transaction, after locking the row.
 */
export function checkIfMatch(ifMatch: IfMatch, kind: string, id: number, version: number, views: string[] = ['']): void {
  if (ifMatch === undefined || ifMatch.trim() === '*') return;
  const current = new Set(views.map((v) => versionEtag(kind, id, version, v)));
  // Strong comparison: a weak tag never satisfies If-Match.
  const ok = ifMatch.split(',').some((t) => current.has(t.trim()));
  if (!ok) throw preconditionFailed();
}
