// How response schemas become serializers. A response schema says, for the OpenAPI document and
// its readers, what a field may hold: bounds, formats, patterns, examples. fast-json-stringify
// validates nothing, but where a field may be null (a JSON-schema type list) some of those
// keywords send it down a slow path that checks each value against them, a cost every list
// request paid (docs/performance.md, "What the profiles showed"). The serializer gets the schema
// without them; the document keeps them all.
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';

/** Keywords that constrain or describe values, never their shape: nothing a serializer needs. */
const DESCRIPTIVE = new Set([
  'pattern', 'format', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
  'minLength', 'maxLength', 'minItems', 'maxItems', 'uniqueItems', 'examples', 'example', 'description', 'title',
]);
const DATE_FORMATS = new Set(['date-time', 'date', 'time']);
/** Keywords whose value is a map of names to schemas. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions']);
/** Keywords whose value is a schema or a list of schemas. */
const SUBSCHEMAS = new Set(['items', 'additionalProperties', 'anyOf', 'oneOf', 'allOf', 'not', 'if', 'then', 'else', 'prefixItems', 'contains']);

/** A copy of a JSON schema without its descriptive keywords, at every level. */
export function shapeOnly(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(shapeOnly);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    // Date formats stay: for them fast-json-stringify turns a Date into its ISO string.
    if (DESCRIPTIVE.has(key) && !(key === 'format' && DATE_FORMATS.has(value as string))) continue;
    if (SCHEMA_MAPS.has(key) && typeof value === 'object' && value !== null) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, shapeOnly(sub)]));
    } else if (SUBSCHEMAS.has(key)) {
      out[key] = shapeOnly(value);
    } else {
      out[key] = value;
    }
  }
  return out;
}

type BuildSerializer = ReturnType<typeof SerializerSelector>;

type Serializer = (data: unknown) => string;

/**
 * Serializers already compiled, by what they were compiled from (the shared schemas, the
 * options and the shape-only schema, as JSON): a serializer is a function of those alone.
 * Fastify asks for one per route and status, and the routes share their error answers and most
 * bodies: compiling each distinct one once spares most of an app's start (and a second app in
 * the process, as a test file may start, all of it; docs/performance.md, "What the profiles
 * showed"). Bounded by the distinct schemas of the code.
 */
const compiled = new Map<string, Serializer>();

/** Fastify's own serializer factory, given each route's response schema in its shape-only form, each distinct one compiled once. */
export const buildShapeSerializer: BuildSerializer = (externalSchemas, options) => {
  const compile = SerializerSelector()(externalSchemas, options);
  const context = JSON.stringify([externalSchemas ?? null, options ?? null]);
  return (route) => {
    const schema = shapeOnly(route.schema) as typeof route.schema;
    const key = `${context}\n${JSON.stringify(schema)}`;
    let serializer = compiled.get(key);
    if (!serializer) compiled.set(key, (serializer = compile({ ...route, schema }) as Serializer));
    return serializer;
  };
};
