// The OpenAPI document (@fastify/swagger, served at /api/v1/openapi.json) and the docs page
// (@fastify/swagger-ui at /docs). Route schemas stay what validates and serializes; what only
// the document needs is added here, once the document is generated (finishDocument):
// - every schema given a name with named() (schemas.ts) becomes one component, referenced by
//   $ref wherever a request or response body uses it, with its example;
// - every error is the shared application/problem+json response of its status;
// - the headers of docs/api.md section 1 are declared where they are sent;
// - operations without an operationId get one derived from their method and path.
// Route schemas carry nothing for this but annotations (the title and examples named() adds),
// so validation and serialization see the schemas they always did; Fastify's shared-schema
// ($ref) machinery is not involved.
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { API_PREFIX } from './conventions.js';
import { ERRORS, ERROR_BY_STATUS, HEADERS, PARAMETERS, STATUS_TEXT, TAGS, errorComponent, headersFor, ref } from './openapi-components.js';
import { namedSchemas, type ResponseHeaders } from './schemas.js';

export const OPENAPI_PATH = `${API_PREFIX}/openapi.json`;
export const DOCS_PATH = '/docs';

type Json = Record<string, unknown>;
interface Media {
  schema?: Json;
  example?: unknown;
  examples?: unknown;
}
interface Response {
  $ref?: string;
  description?: string;
  headers?: Record<string, { $ref: string }>;
  content?: Record<string, Media>;
}
interface Parameter {
  $ref?: string;
  in?: string;
  name?: string;
  description?: string;
  schema?: Json;
}
interface Operation {
  operationId?: string;
  tags?: string[];
  summary?: string;
  description?: string;
  security?: Array<Record<string, string[]>>;
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, Media> };
  responses?: Record<string, Response>;
  'x-response-headers'?: ResponseHeaders;
}
interface Document {
  paths?: Record<string, Record<string, Operation>>;
  components?: Json & { schemas?: Record<string, Json> };
  tags?: Array<{ name: string; description?: string }>;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

const DESCRIPTION = [
  'Users, projects, tasks, posts, messages and notifications, with an append-only audit log.',
  '',
  '**Try it:** `POST /api/v1/auth/login` with your email and password, copy `access_token`, press **Authorize** and paste it. ' +
    'The token is kept across reloads of this page until you log out here.',
  '',
  '**Audit console:** [/console](/console), for administrators: search the audit log, watch it live, export it, and verify ' +
    'each record against the signed checkpoints in your own browser.',
  '',
  '**Errors** are RFC 9457 `application/problem+json` with a stable `code`. **Lists** are cursor-paginated (`limit` 1..100, ' +
    'default 20; `next_cursor` and a `Link: rel="next"` header). **Caching:** authenticated GETs carry an ETag and answer 304 to a ' +
    'matching If-None-Match; PUTs accept If-Match (412 when stale); POSTs accept Idempotency-Key (24 h). `/api/<rest>` is an ' +
    'alias of `/api/v1/<rest>`; paths take no trailing slash. Unknown body or query fields are rejected with 400; bodies are ' +
    'JSON only, nested at most 32 levels deep (400), and uncompressed (a Content-Encoding other than identity is 415). ' +
    'Every answer carries API-Version and X-Request-Id.',
  '',
  '**Rate limit:** every /api request counts toward a general limit per user (per address before login), ' +
    'RATE_LIMIT_PER_MINUTE (default 3000): answers carry RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset, and past the ' +
    'limit 429 RATE_LIMITED with Retry-After. A path counts as its canonical form (`/%61pi/v1/…` is `/api/v1/…`), and a Socket.IO ' +
    'handshake counts like a request. Logins are throttled apart from it.',
  '',
  "**Authorization** is decided inside the transaction that makes the change: a caller who loses a right while the request is " +
    'in flight (removed, demoted, deactivated, logged out) either acted before or is refused. Resources a caller may not see ' +
    'answer 404, not 403.',
  '',
  '**Ids** are positive integers (the contract), not random strings: every read and change checks the caller against the ' +
    'resource, and hidden resources are 404, so guessing an id reveals nothing.',
].join('\n');

export const swaggerOptions: FastifyDynamicSwaggerOptions = {
  openapi: {
    openapi: '3.1.0',
    info: {
      title: 'Teamlog API',
      version: '1',
      description: DESCRIPTION,
      contact: { name: 'Teamlog' },
    },
    servers: [
      {
        url: '/',
        description: 'This Teamlog instance, production or local: the origin that served this document',
        'x-internal': false,
      } as { url: string; description: string },
    ],
    tags: TAGS,
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            'The access_token of POST /api/v1/auth/login or /auth/refresh. A JWS signed with HS256, following RFC8725: the ' +
            'algorithm is pinned (any other, or none, is refused), issuer, audience and expiry are checked, and the session ' +
            'behind it is checked on every request, so logout, password change and deactivation take effect at once.',
        },
      },
    },
  },
  // A route that authentication skips (config.public) says so: an empty security requirement.
  transform: ({ schema, url, route }) => {
    const extra: Json = { ...(UNSCHEMED_ROUTES[url] ?? {}) };
    if (route.config?.public && schema?.security === undefined) extra.security = [{}];
    // A wildcard route (the tlog tiles: a tile's path has as many segments as its index needs)
    // is documented with a path parameter that spans segments, marked x-wildcard: OpenAPI has no
    // such thing, and `{*}` is no parameter name.
    if (url.endsWith('/*')) {
      const params = (schema?.params ?? {}) as Json & { properties?: Record<string, Json> };
      const wildcard = { ...(params.properties?.['*'] ?? { type: 'string' }), 'x-wildcard': true };
      extra.params = { ...params, properties: { [WILDCARD_PARAM]: wildcard }, required: [WILDCARD_PARAM] };
      return { schema: { ...schema, ...extra } as typeof schema, url: `${url.slice(0, -1)}{${WILDCARD_PARAM}}` };
    }
    return { schema: { ...schema, ...extra } as typeof schema, url };
  },
  transformObject: (documentObject) => finishDocument('openapiObject' in documentObject ? (documentObject.openapiObject as Document) : {}) as never,
};

/** The docs page: /docs, titled Teamlog API, keeping the token across reloads; `/` leads to it. */
export async function registerDocs(app: FastifyInstance): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: DOCS_PATH,
    theme: { title: 'Teamlog API' },
    uiConfig: {
      url: OPENAPI_PATH,
      persistAuthorization: true,
      displayOperationId: true,
      docExpansion: 'list',
      deepLinking: true,
      tryItOutEnabled: true,
    } as never,
  });
  app.get('/', { schema: { hide: true } }, (_request, reply) => reply.redirect(DOCS_PATH));
}

// Routes registered elsewhere with no response schemas of their own (the health probes): what
// the document says of them.
const PROBE_HEADERS_NOTE = 'Not under /api: no rate limit and no authentication, so orchestrators can poll it.';
/** The name a wildcard route's `*` is documented under (see transform). */
export const WILDCARD_PARAM = 'tile_path';

const UNSCHEMED_ROUTES: Record<string, Json> = {
  '/health/live': {
    operationId: 'getLiveness',
    description: `Answers as long as the process runs. ${PROBE_HEADERS_NOTE}`,
    security: [{}],
    response: {
      200: {
        description: 'The process is up',
        type: 'object',
        properties: { status: { type: 'string', enum: ['ok'] } },
        required: ['status'],
        examples: [{ status: 'ok' }],
      },
    },
  },
  '/health/ready': {
    operationId: 'getReadiness',
    description:
      `Answers 200 once the database answers (within 2 s), 503 while it does not. \`status\` is \`degraded\` (still 200) when committed audit records ` +
      'have waited longer than AUDIT_SEAL_STALL_MS for their seal and no seal was made meanwhile: `sealing` names the first record waiting, and the ' +
      'service\'s log says why sealing stopped. With a witness policy (AUDIT_WITNESS_POLICY), also `degraded` when a checkpoint has waited longer than ' +
      'AUDIT_WITNESS_MAX_AGE_MS for a witnessed one as new (the newest witnessed checkpoint is that old): `witnessing` says which is the newest witnessed ' +
      `checkpoint and since when a newer one waits (GET /api/v1/audit-logs/witnesses says why). Also \`degraded\` when the stored tree lacks a tile at ` +
      'its right edge (changed behind the service\'s back): `tree.missing_tile` names it; the sealer cannot extend the tree and proofs through it are refused ' +
      `until it is restored (GET /api/v1/audit-logs/verify names it too). ${PROBE_HEADERS_NOTE}`,
    security: [{}],
    response: {
      200: {
        description: 'The database answers; the audit log is being sealed and witnessed (ready) or not (degraded)',
        type: 'object',
        properties: {
          status: { type: 'string', enum: ['ready', 'degraded'] },
          database: { type: 'string', enum: ['pglite', 'postgres'] },
          sealing: {
            type: 'object',
            properties: {
              stalled: { type: 'boolean', enum: [true] },
              first_unsealed_id: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, format: 'int64' },
              waiting_seconds: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, format: 'int64' },
              seconds_since_last_seal: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, format: 'int64' },
            },
            required: ['stalled', 'first_unsealed_id', 'waiting_seconds'],
          },
          witnessing: {
            type: 'object',
            properties: {
              stale: { type: 'boolean', enum: [true] },
              newest_witnessed: {
                type: ['object', 'null'],
                properties: {
                  tree_size: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, format: 'int64' },
                  created_at: { type: 'string', format: 'date-time', maxLength: 24 },
                },
                required: ['tree_size', 'created_at'],
              },
              unwitnessed_since: { type: ['string', 'null'], format: 'date-time', maxLength: 24 },
              unwitnessed_seconds: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, format: 'int64' },
            },
            required: ['stale', 'newest_witnessed', 'unwitnessed_since', 'unwitnessed_seconds'],
          },
          tree: {
            type: 'object',
            properties: { missing_tile: { type: 'string', maxLength: 200 } },
            required: ['missing_tile'],
          },
        },
        required: ['status', 'database'],
        examples: [{ status: 'ready', database: 'postgres' }, { status: 'degraded', database: 'postgres', sealing: { stalled: true, first_unsealed_id: 1043, waiting_seconds: 75, seconds_since_last_seal: 80 } }],
      },
    },
  },
};

/** A derived operationId, for a route that declares none: `GET /api/v1/audit-logs/{id}/proof` → getAuditLogsByIdProof. */
function deriveOperationId(method: string, path: string): string {
  const words = path
    .replace(API_PREFIX, '')
    .split('/')
    .filter(Boolean)
    .map((seg) => (seg.startsWith('{') ? `by-${seg.slice(1, -1)}` : seg))
    .join('-')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean);
  return method + words.map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');
}

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** JSON with sorted keys, to compare two occurrences of a named schema. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isObject(value)) return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
  return JSON.stringify(value);
}

/**
 * Replaces every named schema inside `node` by a $ref to its component (inner ones first), and
 * collects the components. Two different schemas under one name are a bug: it throws.
 */
function hoist(node: unknown, components: Record<string, Json>): unknown {
  if (Array.isArray(node)) return node.map((n) => hoist(n, components));
  if (!isObject(node)) return node;
  const out: Json = {};
  for (const [key, value] of Object.entries(node)) {
    // Data, not schemas: an example or an enum is copied as it is.
    out[key] = key === 'examples' || key === 'example' || key === 'enum' || key === 'const' || key === 'default' ? value : hoist(value, components);
  }
  const name = typeof out.title === 'string' ? out.title : undefined;
  const known = name === undefined ? undefined : namedSchemas().get(name);
  if (name === undefined || known === undefined) return out;
  const { examples: _examples, ...shape } = out;
  const component = { ...shape, examples: [known.example] };
  const existing = components[name];
  if (existing === undefined) components[name] = component;
  else if (canonical({ ...existing, examples: undefined }) !== canonical({ ...component, examples: undefined })) {
    throw new Error(`OpenAPI: two different schemas are named ${name}`);
  }
  return ref('schemas', name);
}

/** The example of a named schema, or of an array of one. */
function exampleFor(schema: Json): unknown {
  const named = (s: unknown) => (isObject(s) && typeof s.title === 'string' ? namedSchemas().get(s.title) : undefined);
  if (named(schema)) return named(schema)!.example;
  const item = named(schema.items);
  return schema.type === 'array' && item ? [item.example] : undefined;
}

/** Hoists the named schemas of a body's media types and gives each media type its example. */
function finishContent(content: Record<string, Media> | undefined, components: Record<string, Json>): void {
  for (const media of Object.values(content ?? {})) {
    if (!media.schema) continue;
    const example = exampleFor(media.schema);
    media.schema = hoist(media.schema, components) as Json;
    if (media.example === undefined && media.examples === undefined && example !== undefined) media.example = example;
  }
}

const isPage = (media: Media | undefined): boolean => {
  const title = media?.schema?.title;
  return typeof title === 'string' && title.endsWith('Page') && namedSchemas().has(title);
};

/**
 * `?cursor=` as a page's next_cursor is typed: a string, or null for "the first page". A query
 * string cannot carry a null, so the validator never sees one; but a generated client (and
 * openapi-fetch, which leaves a null parameter out) must accept `cursor: page.next_cursor`
 * without a cast, or walking pages fails to type-check.
 */
function nullableCursor(p: Parameter): Parameter {
  const schema = p.schema ?? {};
  return {
    ...p,
    description: 'Opaque cursor from a page\'s next_cursor; omitted (or null, which a query string cannot carry and clients leave out): the first page',
    schema: { ...schema, type: ['string', 'null'], description: undefined },
  };
}

/** A response streamed as it is read (NDJSON, CSV): never whole in memory, so never an ETag. */
const isStreamed = (op: Operation): boolean => Object.keys(op.responses?.['200']?.content ?? {}).some((type) => type === 'application/x-ndjson' || type === 'text/csv');

function finishOperation(method: string, path: string, op: Operation, components: Record<string, Json>, used: Set<string>): void {
  const isApi = path.startsWith(`${API_PREFIX}/`);
  op.operationId ??= deriveOperationId(method, path);

  // Request headers: the declared If-Match becomes the shared parameter; the others by rule.
  const params = (op.parameters ?? []).map((p) => (p.in === 'header' && p.name?.toLowerCase() === 'if-match' ? ref('parameters', 'IfMatch') : p.in === 'query' && p.name === 'cursor' ? nullableCursor(p) : p));
  const takesIfMatch = params.some((p) => p.$ref === ref('parameters', 'IfMatch').$ref);
  // conventions.ts answers 304 to a GET whose body it has whole; a streamed one (the export)
  // has no ETag to match.
  const revalidates = isApi && method === 'get' && !isStreamed(op);
  if (revalidates) params.push(ref('parameters', 'IfNoneMatch'));
  const idempotent = isApi && method === 'post' && !path.startsWith(`${API_PREFIX}/auth/`);
  if (idempotent) params.push(ref('parameters', 'IdempotencyKey'));
  params.push(ref('parameters', 'XRequestId'));
  op.parameters = params;

  finishContent(op.requestBody?.content, components);

  const responses = (op.responses ??= {});
  const declared = op['x-response-headers'] ?? {};
  delete op['x-response-headers'];
  for (const [status, response] of Object.entries(responses)) {
    if (Number(status) >= 400) continue;
    const extra: string[] = [...(declared[Number(status) as 200 | 201] ?? [])];
    if (revalidates && status === '200') extra.push('ETag');
    if (takesIfMatch && status.startsWith('2')) extra.push('ETag');
    if (isPage(response.content?.['application/json'])) extra.push('Link');
    if (idempotent) extra.push('Idempotent-Replayed');
    response.headers = headersFor(isApi, extra);
    finishContent(response.content, components);
    if (!response.description || response.description === 'Default Response') {
      const schemaRef = response.content?.['application/json']?.schema?.$ref;
      const what = typeof schemaRef === 'string' ? `: ${schemaRef.split('/').pop()}` : '';
      response.description = `${STATUS_TEXT[status] ?? status}${what}`;
    }
  }

  // Errors: every one is the shared problem+json response of its status, and the statuses any
  // route of its kind can answer are added.
  const statuses = new Set(Object.keys(responses).filter((s) => Number(s) >= 400));
  if (isApi) ['400', '406', '429', '503'].forEach((s) => statuses.add(s));
  if (op.security?.some((s) => 'bearer' in s)) statuses.add('401');
  if (op.requestBody) ['413', '415'].forEach((s) => statuses.add(s));
  if (path === '/health/ready') statuses.add('503');
  statuses.add('500');
  if (revalidates) {
    responses['304'] = ref('responses', 'NotModified');
    used.add('NotModified');
  }
  for (const status of [...statuses].sort()) {
    const error = ERROR_BY_STATUS.get(status);
    if (!error) throw new Error(`OpenAPI: no shared response for status ${status} (${method.toUpperCase()} ${path})`);
    const name = isApi ? error.name : `${error.name}Probe`;
    responses[status] = ref('responses', name);
    used.add(name);
  }
  op.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b)));
}

/** Everything the document needs beyond what @fastify/swagger generates (see the top of this file). */
export function finishDocument(doc: Document): Document {
  const components: Record<string, Json> = {};
  const usedResponses = new Set<string>();
  const operationIds = new Map<string, string>();
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      finishOperation(method, path, op, components, usedResponses);
      const id = op.operationId!;
      if (operationIds.has(id)) throw new Error(`OpenAPI: operationId ${id} names both ${operationIds.get(id)} and ${method.toUpperCase()} ${path}`);
      operationIds.set(id, `${method.toUpperCase()} ${path}`);
    }
  }

  const responses: Record<string, Json> = {
    NotModified: {
      description: 'Not modified: the If-None-Match still matches, so the copy you have is current (no body)',
      headers: headersFor(true, ['ETag']),
    },
  };
  for (const e of ERRORS) {
    responses[e.name] = errorComponent(e, true);
    responses[`${e.name}Probe`] = errorComponent(e, false);
  }
  // The shared responses name the Problem schema: make sure it is among the components.
  hoist(namedSchemas().get('Problem')!.schema, components);

  const schemas = { ...(doc.components?.schemas ?? {}), ...Object.fromEntries(Object.entries(components).sort(([a], [b]) => a.localeCompare(b))) };
  doc.components = {
    ...doc.components,
    schemas,
    responses: Object.fromEntries(Object.entries(responses).filter(([name]) => usedResponses.has(name))),
    parameters: PARAMETERS,
    headers: HEADERS,
  };

  const tags = new Map((doc.tags ?? []).map((t) => [t.name, t]));
  for (const item of Object.values(doc.paths ?? {})) {
    for (const op of Object.values(item)) for (const tag of op.tags ?? []) if (!tags.has(tag)) tags.set(tag, { name: tag });
  }
  doc.tags = [...tags.values()];
  return doc;
}
