// How values are written on the page.

/** UTC, as the records and the service's logs have it, to the millisecond: "2026-11-22 08:15:30.512Z". */
export const utcTime = (iso: string): string => iso.replace('T', ' ');

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
