// The CSV form of an audit export (export.stream.ts): its columns, and each record's row with
// its cells escaped for RFC 4180 and against spreadsheet formulas.
import { integerText } from '../../../tlog/integer-text.js';
import type { AuditRow } from '../audit.repository.js';

export const CSV_COLUMNS = ['id', 'timestamp', 'actor_id', 'action', 'resource_type', 'resource_id', 'result', 'ip', 'user_agent', 'request_id', 'metadata', 'seq', 'leaf_hash'];

/**
 * A cell as RFC 4180 wants it, and safe to open in a spreadsheet: a value starting with `=`,
 * `+`, `-`, `@`, a tab or a carriage return would run as a formula (OWASP "CSV injection"), so
 * it gets a leading apostrophe, which spreadsheets show as text.
 */
export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : Number.isSafeInteger(value) ? integerText(value as number) : String(value);
  // Most cells need nothing: one test for them (a CSV export makes thirteen cells a record).
  if (PLAIN_CELL.test(text)) return text;
  const cell = /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
  return /[",\r\n]/.test(cell) ? `"${cell.replaceAll('"', '""')}"` : cell;
}

/** A cell that starts with no formula character and holds nothing to quote. */
const PLAIN_CELL = /^(?![=+\-@\t\r])[^",\r\n]*$/;

/** A record's CSV row, cells in CSV_COLUMNS order (written out, not mapped and joined: thirteen cells a record). */
export function csvRow(r: AuditRow, seq: number | null, leaf: string | null): string {
  return `${csvCell(r.id)},${csvCell(r.timestamp)},${csvCell(r.actor_id)},${csvCell(r.action)},${csvCell(r.resource_type)},` +
    `${csvCell(r.resource_id)},${csvCell(r.result)},${csvCell(r.ip)},${csvCell(r.user_agent)},${csvCell(r.request_id)},` +
    `${csvCell(r.metadata)},${csvCell(seq)},${csvCell(leaf)}\r\n`;
}
