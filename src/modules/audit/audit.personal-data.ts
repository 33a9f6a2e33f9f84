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
import type { PersonalDataRow } from './personal-data.repository.js';

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
