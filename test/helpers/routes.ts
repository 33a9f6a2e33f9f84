// The routes an app serves, read from the tree app.printRoutes({ commonPrefix: false }) prints,
// for the tests that hold the routes to the OpenAPI document and to bad input.
import { WILDCARD_PARAM } from '../../src/http/openapi.js';
import type { TestServer } from './server.js';

export interface Route {
  method: string;
  /** As registered: `/api/v1/users/:id`, `/api/v1/audit-logs/tlog/tile/*`. */
  url: string;
}

interface Spec {
  paths: Record<string, Record<string, { parameters?: Array<{ in: string; name: string; schema?: Record<string, unknown> }> }>>;
}

/** A documented path as the route it stands for: `{id}` → `:id`, the x-wildcard parameter → `*`. */
export const routeOfPath = (path: string) => path.replace(`{${WILDCARD_PARAM}}`, '*').replace(/\{(\w+)\}/g, ':$1');

/** A route as the path the OpenAPI document gives it. */
export const pathOfRoute = (url: string) => url.replace(/\*$/, `{${WILDCARD_PARAM}}`).replace(/:([A-Za-z_]+)/g, '{$1}');

/** Every route of the app (HEAD included). */
export function servedRoutes(app: TestServer['app']): Route[] {
  // The tree shows a wildcard route by its last node, "*", without all of the path before it:
  // the document's wildcard routes (x-wildcard) say which one it is.
  const wildcards = Object.keys((app.swagger() as Spec).paths).filter((p) => p.includes(`{${WILDCARD_PARAM}}`)).map(routeOfPath);
  const stack: string[] = [];
  const routes: Route[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^((?:│ {3}| {4})*)[├└]── (.+?)(?: \(([^)]*)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    let url = (stack[depth - 1] ?? '') + m[2]!;
    stack[depth] = url;
    stack.length = depth + 1;
    if (url.endsWith('*')) url = wildcards.find((w) => w.startsWith(url.slice(0, -1))) ?? url;
    for (const method of (m[3] ?? '').split(',').map((s) => s.trim()).filter(Boolean)) routes.push({ method, url });
  }
  return routes;
}
