// Request bodies: JSON only, parsed with a bound on nesting. No route takes anything nested
// more than a few levels, and everything that walks a body afterwards (the validator, the
// idempotency hash) recurses: a body of thousands of nested arrays would overflow the stack,
// a 500 instead of a 400. The bound is checked on the text before parsing, in one pass.
import { AppError } from './errors.js';

export const MAX_JSON_DEPTH = 32;

const OPEN_BRACE = 0x7b, OPEN_BRACKET = 0x5b, CLOSE_BRACE = 0x7d, CLOSE_BRACKET = 0x5d, QUOTE = 0x22, BACKSLASH = 0x5c;

/** Whether a JSON text nests arrays and objects deeper than `max` (strings are skipped). */
export function nestsDeeperThan(text: string, max: number): boolean {
  // A text of n characters nests at most n / 2 levels deep.
  if (text.length <= 2 * max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return false;
}

/** The JSON body parser: an empty body is "no body"; malformed JSON or too deep a nesting is 400. */
export function parseJsonBody(text: string): unknown {
  if (text === '') return undefined;
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new AppError(400, 'VALIDATION_FAILED', `The body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`, {
      errors: [{ field: '/', message: `must not nest more than ${MAX_JSON_DEPTH} levels deep`, in: 'body' }],
    });
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new AppError(400, 'MALFORMED_JSON', 'The body is not valid JSON');
  }
}
