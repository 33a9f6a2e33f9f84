// Personal data named by audit records (docs/api.md 5.10): the record commits to a keyed hash of
// each value, the ref, and the value sits in audit_personal_data under that ref, where the
// operator can erase it (`teamlog audit redact`) without rewriting the record.
//
// ref = HMAC-SHA256(key, salt ‖ subject ‖ 0x00 ‖ value), with a fresh random salt for every
// value written (kept in the row, and erased with it). A deterministic ref would be shared
// by every record naming the same value for the same subject: after an erasure, a later
// record would store the row again and bring the value back for the older, redacted ones.
// With a salt each record has its own ref, and an erased ref never comes back. Rows written
// before the salt existed have none (ref = HMAC(key, subject ‖ 0x00 ‖ value)) and still read.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Queryable } from '../../db/database.js';
import { query, statements } from '../../db/statements.js';

/** Fixed length, so that salt ‖ subject ‖ 0x00 ‖ value reads one way only. */
export const PERSONAL_DATA_SALT_BYTES = 16;

/** The keyed hash a record holds for `value`; `salt` null for the rows of before the salt. */
export function personalDataRef(key: Buffer, salt: Buffer | null, subject: number | null, value: string): string {
  const hmac = createHmac('sha256', key);
  if (salt) hmac.update(salt);
  return hmac.update(`${subject ?? ''}\u0000${value}`).digest('hex');
}

/** A new ref for a value about to be stored, with its own fresh salt. */
export function newPersonalDataRef(key: Buffer, subject: number | null, value: string): { ref: string; salt: Buffer } {
  const salt = randomBytes(PERSONAL_DATA_SALT_BYTES);
  return { ref: personalDataRef(key, salt, subject, value), salt };
}

/** A row of audit_personal_data (salt as hex, as `storedPersonalData` reads it). */
export interface PersonalDataRow {
  ref: string;
  subject_user_id: number | null;
  value: string;
  /** Hex; null for rows written before refs were salted. */
  salt: string | null;
}

/**
 * Whether a stored value is the one its ref commits to: HMAC(key, salt ‖ subject ‖ value)
 * equals the ref that the record (and so the sealed leaf) holds. A value that was changed
 * behind the service's back, or moved under another ref or subject, fails.
 */
export function personalDataMatches(key: Buffer, row: PersonalDataRow): boolean {
  if (!/^[0-9a-f]{64}$/.test(row.ref)) return false;
  if (row.salt !== null && !/^(?:[0-9a-f]{2})+$/i.test(row.salt)) return false;
  const expected = Buffer.from(personalDataRef(key, row.salt === null ? null : Buffer.from(row.salt, 'hex'), row.subject_user_id, row.value), 'hex');
  return timingSafeEqual(expected, Buffer.from(row.ref, 'hex'));
}

const S = statements('personal-data', {
  // The values, with what it takes to check them against their refs (personalDataMatches).
  find: `SELECT ref, subject_user_id, value, encode(salt, 'hex') AS salt FROM audit_personal_data WHERE ref = ANY ($1::text[])`,
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
