// What a failed validation tells the client, field by field: the same words for a request's
// body, query or headers (http/error-handler.ts) and for a socket's event (realtime/).
import { patternMessage } from './patterns.js';

/** A failure as Ajv reports it. */
export interface AjvIssue {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
  /** The value that failed (the validators run with Ajv's verbose option). */
  data?: unknown;
}

const TYPE_NAMES: Record<string, string> = {
  integer: 'an integer', number: 'a number', string: 'a string', boolean: 'a boolean (true or false)',
  object: 'an object', array: 'an array', null: 'null',
};
const FORMAT_NAMES: Record<string, string> = { 'date-time': 'a date-time (ISO 8601, e.g. 2026-11-21T09:30:00Z)', email: 'an email address' };

/** Every message says what is wrong with the value, in words a client can act on. */
export function describeIssue(issue: AjvIssue): { field: string; message: string } {
  let field = issue.instancePath ?? '';
  let message = issue.message ?? 'is invalid';
  const p = issue.params ?? {};
  const limit = String(p.limit);
  switch (issue.keyword) {
    case 'required':
      field += `/${String(p.missingProperty)}`;
      message = 'is required';
      break;
    case 'additionalProperties':
      field += `/${String(p.additionalProperty)}`;
      message = 'is not allowed';
      break;
    case 'maxLength':
      message = `must have at most ${limit} characters`;
      break;
    case 'minLength':
      message = p.limit === 1 ? 'must not be empty' : `must have at least ${limit} characters`;
      break;
    case 'pattern':
      message = patternMessage(String(p.pattern), issue.data);
      break;
    case 'type':
      message = `must be ${String(p.type).split(',').map((t) => TYPE_NAMES[t] ?? t).join(' or ')}`;
      break;
    case 'enum':
      message = `must be one of ${(p.allowedValues as unknown[]).map(String).join(', ')}`;
      break;
    case 'const':
      message = `must be ${String(p.allowedValue)}`;
      break;
    case 'format':
      message = `must be ${FORMAT_NAMES[String(p.format)] ?? `a valid ${String(p.format)}`}`;
      break;
    case 'maximum':
      message = `must be at most ${limit}`;
      break;
    case 'minimum':
      message = `must be at least ${limit}`;
      break;
    case 'maxItems':
      message = `must have at most ${limit} items`;
      break;
    case 'minProperties':
      message = p.limit === 1 ? 'must have at least one field' : `must have at least ${limit} fields`;
      break;
  }
  return { field: field || '/', message };
}
