// RFC 8785 JSON Canonicalization Scheme: the one byte sequence (once UTF-8 encoded) every
// conforming implementation produces for a JSON value, so that audit records hash the same here
// and in any outside verifier. It runs for every record a verification reads, hence the care
// about allocations: one string built by concatenation, no entry arrays, no intermediate copies.
// Runtime-neutral (it imports only integer-text.ts, which imports nothing): the audit console
// bundles it to hash a record's sealed form in the browser (web/console/verify.ts), so that the
// page and the server canonicalize with one implementation; test/architecture.test.ts holds it to that.

import { integerText } from './integer-text.js';

/** A lone surrogate only; a pair is one code point under the u flag and does not match. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;
/** What JSON.stringify would escape (or, for surrogates, check); most strings have none of it. */
// eslint-disable-next-line no-control-regex -- the control characters are exactly what it looks for
const SPECIAL = /["\\\u0000-\u001F\uD800-\uDFFF]/;
/** Below this many keys an insertion sort beats Array.prototype.sort's setup cost. */
const SMALL_OBJECT = 24;

function fail(what: string): never {
  throw new TypeError(`canonicalize: ${what} is not a JSON value`);
}

// ES JSON.stringify escapes exactly as RFC 8785 §3.2.2.2 asks (it is the same algorithm). Since
// ES2019 it writes a lone surrogate as \udxxx instead of failing, while the RFC requires an
// error, so output holding "\ud" gets the exact check. Plain strings, the usual case, skip the
// call altogether.
function quote(s: string): string {
  if (!SPECIAL.test(s)) return `"${s}"`;
  const out = JSON.stringify(s);
  if (out.includes('\\ud') && LONE_SURROGATE.test(s)) fail('a string with a lone surrogate');
  return out;
}

/** Sorts in place by UTF-16 code units (RFC 8785 §3.2.3): what both `<` and the default sort compare. */
function sortKeys(keys: string[]): string[] {
  if (keys.length > SMALL_OBJECT) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    while (j >= 0 && keys[j]! > key) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = key;
  }
  return keys;
}

function serialize(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return quote(value);
    case 'number':
      // Number-to-String is ES's shortest round-trip form, RFC 8785 §3.2.2.3; it writes -0 as "0".
      // Integers (every id) take integerText, the same text without V8's cache (see there).
      if (Number.isSafeInteger(value)) return integerText(value);
      if (!Number.isFinite(value)) fail(String(value));
      return String(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out += ',';
          out += serialize(value[i]);
        }
        return out + ']';
      }
      const proto: unknown = Object.getPrototypeOf(value);
      // Dates, Maps, Buffers and class instances have no single JSON reading; refusing them
      // beats hashing whatever toJSON or the enumerable fields happen to give.
      if (proto !== Object.prototype && proto !== null) fail(`an instance of ${(value as object).constructor?.name ?? 'a class'}`);
      const record = value as Record<string, unknown>;
      const keys = sortKeys(Object.keys(record));
      let out = '{';
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        if (i > 0) out += ',';
        out += quote(key);
        out += ':';
        out += serialize(record[key]);
      }
      return out + '}';
    }
    default:
      return fail(typeof value === 'bigint' ? 'a bigint' : String(typeof value));
  }
}

/** RFC 8785 canonical JSON text of a JSON value (objects, arrays, strings, finite numbers, booleans, null). Throws TypeError on anything else (undefined, functions, bigint, NaN, Infinity, non-plain objects other than arrays). */
export function canonicalize(value: unknown): string {
  try {
    return serialize(value);
  } catch (error) {
    // A cycle ends in stack exhaustion; report it as the non-JSON value it is.
    if (error instanceof RangeError) throw new TypeError('canonicalize: the value is cyclic or nested too deeply', { cause: error });
    throw error;
  }
}

/** Keys in the order RFC 8785 writes them (by UTF-16 code units), as a new array. */
export const canonicalKeyOrder = <K extends string>(keys: readonly K[]): K[] => sortKeys([...keys]) as K[];

/**
 * canonicalize() of the object holding just these keys of a record, for a key set fixed in
 * advance: the keys are sorted and quoted once, and no copy of the record is made. Equal to
 * `canonicalize(pick(record, keys))`; a key the record lacks is undefined and fails as there.
 */
export function fieldsCanonicalizer<K extends string>(keys: readonly K[]): (record: Readonly<Record<K, unknown>>) => string {
  const sorted = canonicalKeyOrder(keys);
  const prefixes = sorted.map((key, i) => `${i === 0 ? '{' : ','}${quote(key)}:`);
  return (record) => {
    try {
      let out = '';
      for (let i = 0; i < sorted.length; i++) out += prefixes[i]! + serialize(record[sorted[i]!]);
      return out + '}';
    } catch (error) {
      if (error instanceof RangeError) throw new TypeError('canonicalize: the value is cyclic or nested too deeply', { cause: error });
      throw error;
    }
  };
}
