// Patterns with their messages, shared by every schema that validates input (http/schemas.ts,
// the modules' schemas) and by what describes a failure (issues.ts), over HTTP or a socket.

/**
 * What a value that fails a pattern is told: the pattern itself means nothing to a client, so
 * every pattern a schema uses is declared with its message (issues.ts reads them).
 */
const PATTERN_MESSAGES = new Map<string, (value: unknown) => string>();

/** A pattern and what to tell a value that does not match it. */
export function pattern(source: string, message: string | ((value: unknown) => string)): string {
  PATTERN_MESSAGES.set(source, typeof message === 'string' ? () => message : message);
  return source;
}

export const patternMessage = (source: string, value: unknown): string =>
  PATTERN_MESSAGES.get(source)?.(value) ?? `must match the pattern ${source}`;
