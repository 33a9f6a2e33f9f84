// timestamptz values reach the service as PostgreSQL's text and leave it as the API's ISO 8601
// UTC with milliseconds. Every connection runs with TimeZone=UTC and DateStyle=ISO, so the
// text is '2026-11-22 20:52:49.123456+00' and becomes '2026-11-22T20:52:49.123Z' by slicing:
// no Date object per value, which list routes paid twice per row (parse, then toISOString).
// The string is also one canonical form for timestamps that audit records commit to.

/** Settings every connection starts with (node-postgres: the startup packet; PGlite: SET). */
export const SESSION_SETTINGS = { TimeZone: 'UTC', DateStyle: 'ISO' } as const;

export function isoTimestamp(text: string): string {
  // 'YYYY-MM-DD HH:MM:SS' + optional '.f' … '.ffffff' + '+00'
  if (text.length >= 22 && text.length <= 29 && text.charCodeAt(10) === 32 && text.endsWith('+00')) {
    const fraction = text.length > 22 ? text.slice(19, -3) : '.';
    return `${text.slice(0, 10)}T${text.slice(11, 19)}${(fraction + '000').slice(0, 4)}Z`;
  }
  return viaDate(text);
}

/**
 * The same ISO form computed in SQL, for a value that leaves the database as JSON (an event built in
 * a statement): to_char truncates to milliseconds, as isoTimestamp does.
 */
export const isoTimestampSql = (column: string): string => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** Any other offset (a session someone reconfigured): through Date. */
function viaDate(text: string): string {
  const m = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)([+-]\d\d)(?::(\d\d))?$/.exec(text);
  const ms = m ? Date.parse(`${m[1]}T${m[2]}${m[3]}:${m[4] ?? '00'}`) : NaN;
  // 'infinity' and BC dates, which Teamlog never writes, pass through as PostgreSQL wrote them.
  return Number.isNaN(ms) ? text : new Date(ms).toISOString();
}
