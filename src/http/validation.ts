// Fastify's schema compiler: the request's body is validated as a JSON body, its query string,
// path parameters and headers as text (validation/validators.ts says how each is treated).
import type { FastifySchemaCompiler } from 'fastify';
import { createValidators } from '../validation/validators.js';

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const compile = createValidators();
  return ({ schema, httpPart }) => compile(schema as object, httpPart === 'body' ? 'body' : 'text');
}
