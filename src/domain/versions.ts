// Optimistic concurrency in the domain's terms: every versioned resource has an integer
// version that any change to it (or its sub-resources) bumps. A caller may say which
// versions it expects (HTTP: If-Match, turned into versions by http/preconditions.ts); a
// change to any other version is refused. Check it inside the transaction, after locking.
import { preconditionFailed } from './errors.js';

/** The versions the caller's change is conditional on; undefined: unconditional. */
export type ExpectedVersion = readonly number[] | undefined;

export function checkVersion(expected: ExpectedVersion, current: number): void {
  if (expected !== undefined && !expected.includes(current)) throw preconditionFailed();
}
