// How values are written on the page.

/** UTC, as the records and the service's logs have it, to the millisecond: "2026-11-22 08:15:30.512Z". */
export const utcTime = (iso: string): string => iso.replace('T', ' ');

// The reader's own zone (the browser's), named: "29 Nov 2026, 09:15:30 CET".
const LOCAL = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short',
});
const LOCAL_SHORT = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });

/** An instant in the reader's zone, with the zone's name. */
export const localTime = (iso: string): string => LOCAL.format(new Date(iso));

/** An instant in the reader's zone, short (a chart's axis): "29 Nov, 09:00". */
export const localShort = (iso: string): string => LOCAL_SHORT.format(new Date(iso));

/** "4 s", "3 min", "2 h": an age from milliseconds. */
export function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 90) return `${s} s`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min`;
  if (s < 48 * 3600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} days`;
}

export const count = (n: number): string => n.toLocaleString('en');

export const describeError = (err: unknown): string => (err instanceof Error ? err.message : String(err));
