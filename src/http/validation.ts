// Two validators: query strings, path parameters and headers arrive as text, so their
// values are coerced ("7" → 7, a single ?action= → [action]); JSON bodies are not, so a
// wrong type in a body is a 400, never silently converted. Neither removes unknown fields:
// schemas say additionalProperties: false and unknown fields are rejected.
import { Ajv, type Options } from 'ajv';
import * as addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

// ajv-formats is CommonJS; its default export arrives wrapped under ESM.
type AddFormats = (ajv: Ajv) => Ajv;
const addFormats = ((addFormatsModule as unknown as { default: { default?: AddFormats } & AddFormats }).default.default ??
  (addFormatsModule as unknown as { default: AddFormats }).default) as AddFormats;

const COMMON: Options = {
  removeAdditional: false,
  useDefaults: true,
  // allErrors stays off: collecting every error of a hostile body is a DoS vector.
  allErrors: false,
  strict: false,
};

function build(opts: Options): Ajv {
  const ajv = new Ajv({ ...COMMON, ...opts });
  addFormats(ajv);
  return ajv;
}

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const bodies = build({ coerceTypes: false });
  const textual = build({ coerceTypes: 'array' });
  return ({ schema, httpPart }) => (httpPart === 'body' ? bodies : textual).compile(schema as object);
}
