// Socket acknowledgements (docs/api.md section 6): `{ ok: true, … }`, or `{ ok: false, error:
// { code, message } }` with the contract's codes. This is the one place an error becomes an
// acknowledgement, as http/error-handler.ts is for problem+json.
import { DomainError } from '../domain/errors.js';

export type Ack = (answer: Record<string, unknown>) => void;

/** A type, not an interface: an Ack takes it as a record. */
export type AckRefusal = { ok: false; error: { code: string; message: string } };

/** What an error that is not a domain error says: nothing of its cause (the caller logs it if it should). */
const OTHERWISE = {
  INTERNAL: 'An unexpected error occurred. It has been logged.',
  UNAVAILABLE: 'Try again',
} as const;

/**
 * Any error as an acknowledgement: a domain error gives its code and detail; anything else
 * `otherwise`: INTERNAL where a use case failed unexpectedly, UNAVAILABLE where a check got
 * no answer and trying again may do.
 */
export function errorAck(err: unknown, otherwise: keyof typeof OTHERWISE): AckRefusal {
  if (err instanceof DomainError) return { ok: false, error: { code: err.code, message: err.detail } };
  return { ok: false, error: { code: otherwise, message: OTHERWISE[otherwise] } };
}
