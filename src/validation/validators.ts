// Two validators: query strings, path parameters and headers arrive as text, so their
// values are coerced ("7" → 7, a single ?action= → [action]); JSON bodies are not, so a
// wrong type in a body is a 400, never silently converted. Neither removes unknown fields:
// schemas say additionalProperties: false and unknown fields are rejected.
import { Ajv, type Options, type ValidateFunction } from 'ajv';
import * as addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS; its default export arrives wrapped under ESM.
type AddFormats = (ajv: Ajv) => Ajv;
const addFormats = ((addFormatsModule as unknown as { default: { default?: AddFormats } & AddFormats }).default.default ??
  (addFormatsModule as unknown as { default: AddFormats }).default) as AddFormats;

const COMMON: Options = {
  removeAdditional: false,
  useDefaults: true,
  // allErrors stays off: collecting every error of a hostile body is a DoS vector.
  allErrors: false,
  // A failure carries the value that failed, so that its message can say what is wrong with it
  // (issues.ts); nothing is added on the path of a valid request.
  verbose: true,
  strict: false,
};

function build(opts: Options): Ajv {
  const ajv = new Ajv({ ...COMMON, ...opts });
  addFormats(ajv);
  return ajv;
}

interface ObjectSchema {
  properties?: Record<string, { type?: unknown; items?: { type?: unknown } }>;
}

const DECIMAL_INTEGER = /^-?[0-9]+$/;

/**
 * Coercion would read "1e3", "0x10", "+5", " 5" or "1.0" as integers (Number() does). An id or
 * a count in a path or query string must be written as a plain decimal integer, so the
 * textual parts check the raw text of integer fields before Ajv coerces it.
 */
function decimalIntegersOnly(schema: object, validate: ValidateFunction): ValidateFunction {
  const fields = Object.entries((schema as ObjectSchema).properties ?? {}).filter(
    ([, s]) => s.type === 'integer' || (s.type === 'array' && s.items?.type === 'integer'),
  );
  if (fields.length === 0) return validate;
  const checked = ((data: unknown) => {
    if (data !== null && typeof data === 'object') {
      for (const [name] of fields) {
        const raw = (data as Record<string, unknown>)[name];
        const values = Array.isArray(raw) ? raw : [raw];
        const i = values.findIndex((v) => typeof v === 'string' && !DECIMAL_INTEGER.test(v));
        if (i >= 0) {
          const instancePath = Array.isArray(raw) ? `/${name}/${i}` : `/${name}`;
          checked.errors = [{ instancePath, schemaPath: '', keyword: 'type', params: { type: 'integer' }, message: 'must be integer' }];
          return false;
        }
      }
    }
    const ok = validate(data);
    checked.errors = validate.errors;
    return ok;
  }) as ValidateFunction;
  return checked;
}

/** Where a value comes from: a JSON body, or text (a query string, path parameters, headers). */
export type InputPart = 'body' | 'text';

/**
 * The two validators, made once a process: a validate function depends on its schema and its
 * part alone (it keeps no state between calls but the errors of the last one, read at once), so
 * every route and every app of the process shares one per distinct schema. Fastify asks for 143
 * an app, of 36 different schemas: each is compiled once, and a second app in the process (a
 * test file may start several) compiles none.
 */
let validators: { bodies: Ajv; textual: Ajv; compiled: Map<string, ValidateFunction> } | undefined;

/** The two validators' compilers: a schema's validate function for a body or for text. */
export function createValidators(): (schema: object, part: InputPart) => ValidateFunction {
  validators ??= { bodies: build({ coerceTypes: false }), textual: build({ coerceTypes: 'array' }), compiled: new Map() };
  const { bodies, textual, compiled } = validators;
  return (schema, part) => {
    const key = `${part}\n${JSON.stringify(schema)}`;
    let validate = compiled.get(key);
    if (!validate) {
      validate = part === 'body' ? bodies.compile(schema) : decimalIntegersOnly(schema, textual.compile(schema));
      compiled.set(key, validate);
    }
    return validate;
  };
}
