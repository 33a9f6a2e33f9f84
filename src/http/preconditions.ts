// ETags of versioned resources, and If-Match turned into the versions the domain checks
// (domain/versions.ts). A resource's strong ETag derives from its version, which every
// change to it or its sub-resources bumps; a PUT with a stale If-Match gets 412.
import type { FastifyRequest } from 'fastify';
import type { ExpectedVersion } from '../domain/versions.js';

/** Strong ETag of a versioned resource. `view` separates representations (e.g. with or without email). */
export function versionEtag(kind: string, id: number, version: number, view = ''): string {
  return `"${kind}-${id}-v${version}${view ? `-${view}` : ''}"`;
}

/**
 * The versions a request's If-Match names for this resource: undefined when there is no
 * If-Match or it is `*`; otherwise the versions of the listed ETags that belong to this
 * resource in one of its views (strong comparison: a weak tag never matches). An If-Match
 * that names no such ETag yields no version, so the change is refused with 412.
 */
export function expectedVersion(request: FastifyRequest, kind: string, id: number, views: readonly string[] = ['']): ExpectedVersion {
  const header = request.headers['if-match'];
  if (typeof header !== 'string' || header.trim() === '*') return undefined;
  const prefix = `"${kind}-${id}-v`;
  const versions: number[] = [];
  for (const raw of header.split(',')) {
    const tag = raw.trim();
    if (!tag.startsWith(prefix) || !tag.endsWith('"')) continue;
    const [version = '', ...rest] = tag.slice(prefix.length, -1).split('-');
    if (/^[1-9][0-9]{0,9}$/.test(version) && rest.length <= 1 && views.includes(rest[0] ?? '')) versions.push(Number(version));
  }
  return versions;
}
