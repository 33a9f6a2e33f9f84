// A stand-in for the types openapi-typescript generates from /api/v1/openapi.json, so that the
// project's own typecheck compiles client.ts. test/typed-client.test.ts generates the real ones
// from the document the app serves and type-checks client.ts against them instead.
export type paths = any;
export type components = any;
export type operations = any;
