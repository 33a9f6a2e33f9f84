// RFC 8785 JSON Canonicalization Scheme, the page's own (not the server's): the sealed form of
// a record is hashed from this text, so a server that canonicalized differently, or sent a
// sealed form that is not the one it sealed, fails here. ES's JSON.stringify quotes strings as
// RFC 8785 §3.2.2.2 asks and Number-to-String is §3.2.2.3; keys sort by UTF-16 code units
// (§3.2.3), which is what the default sort compares.

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function fail(what: string): never {
  throw new TypeError(`not canonicalizable: ${what}`);
}

function quote(s: string): string {
  // JSON.stringify writes a lone surrogate as \udxxx; RFC 8785 says it is an error.
  if (LONE_SURROGATE.test(s)) fail('a string with a lone surrogate');
  return JSON.stringify(s);
}

function serialize(value: unknown, depth: number): string {
  if (depth > 200) fail('nesting deeper than 200');
  switch (typeof value) {
    case 'string':
      return quote(value);
    case 'number':
      if (!Number.isFinite(value)) fail(String(value));
      return String(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) return `[${value.map((v) => serialize(v, depth + 1)).join(',')}]`;
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) fail('an object that is not plain JSON');
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record).sort();
      return `{${keys.map((k) => `${quote(k)}:${serialize(record[k], depth + 1)}`).join(',')}}`;
    }
    default:
      return fail(typeof value);
  }
}

/** The canonical JSON text of a JSON value; throws TypeError on anything JSON cannot hold. */
export const canonicalize = (value: unknown): string => serialize(value, 0);
