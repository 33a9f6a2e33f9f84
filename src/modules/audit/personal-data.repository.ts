// The statements of audit_personal_data (audit/audit.personal-data.ts says what its refs are): reading
// values back by ref, and erasing them (`teamlog audit redact`).
import type { Queryable } from '../../db/database.js';
import { query, statements } from '../../db/statements.js';

/** A row of audit_personal_data (salt as hex, as `storedPersonalData` reads it). */
export interface PersonalDataRow {
  ref: string;
  subject_user_id: number | null;
  value: string;
  /** Hex; null for rows written before refs were salted. */
  salt: string | null;
}

const S = statements('personal-data', {
  // The values, with what it takes to check them against their refs (personalDataMatches).
  find: `SELECT ref, subject_user_id, value, encode(salt, 'hex') AS salt FROM audit_personal_data WHERE ref = ANY ($1::text[])`,
  // A few values, whichever the key's order gives: whether any matches its ref under the keys
  // `teamlog audit verify` was given tells keys of this deployment from keys of another.
  sample: `SELECT ref, subject_user_id, value, encode(salt, 'hex') AS salt FROM audit_personal_data ORDER BY ref LIMIT $1`,
  // Erasure of everything stored about one user (`teamlog audit redact --user`). Only an
  // owner connection may: the service's role has no DELETE here (R__privileges.sql).
  eraseSubject: `WITH erased AS (DELETE FROM audit_personal_data WHERE subject_user_id = $1 RETURNING 1)
  SELECT count(*)::int AS erased FROM erased`,
  // Erasure of one value whoever it was stored about (`teamlog audit redact --email`): an
  // address typed into a failed login names no user (subject NULL), so --user cannot reach it.
  // Emails are compared as the service compares them, case-insensitively. A full scan of the
  // table, on purpose: erasure is rare, and an index on the values would be one more copy.
  eraseValue: `WITH erased AS (DELETE FROM audit_personal_data WHERE lower(value) = lower($1) RETURNING 1)
  SELECT count(*)::int AS erased FROM erased`,
});

export const storedPersonalData = (q: Queryable, refs: string[]) => query<PersonalDataRow>(q, S.find, [refs]);

/** Up to `limit` stored values, with what it takes to check them against their refs. */
export const samplePersonalData = (q: Queryable, limit: number) => query<PersonalDataRow>(q, S.sample, [limit]);

/** Deletes every stored value whose subject is `userId`; answers how many there were. */
export async function erasePersonalDataOf(q: Queryable, userId: number): Promise<number> {
  const [row] = await query<{ erased: number }>(q, S.eraseSubject, [userId]);
  return row?.erased ?? 0;
}

/** Deletes every stored value equal to `email` (case-insensitively), whatever its subject; answers how many. */
export async function erasePersonalValue(q: Queryable, email: string): Promise<number> {
  const [row] = await query<{ erased: number }>(q, S.eraseValue, [email]);
  return row?.erased ?? 0;
}
