// Reads that say whether anything changed since a copy was taken, in the same round trip.
//
// PostgreSQL's snapshot (pg_current_snapshot(): xmin, xmax and the transactions in progress) is
// the same text for two statements exactly when no transaction committed or aborted between
// them: a transaction that committed meanwhile either started after the first (it moved xmax)
// or was in progress then (it left the list). So a page read at snapshot S is still the page
// while the current snapshot is S, whatever table was written, on any instance, by any client.
// A statement built with withSnapshotRow returns its snapshot always, and its rows only when
// that snapshot is not the caller's copy's (a one-time filter: an unchanged page is not scanned).
// Inside a statement, pg_current_snapshot() is the snapshot the statement reads at, so the rows
// and the snapshot they are tagged with always agree.

/** The statement's own snapshot, as text. */
export const SNAPSHOT = 'pg_current_snapshot()::text';

/** What a snapshot-tagged read returns: `rows` is undefined when nothing changed since `unlessSnapshot`. */
export interface SnapshotRead<T> {
  snapshot: string;
  rows: T | undefined;
}

/** The snapshot row's nulls for a list of columns (a statement's text is assembled per call). */
const nullsOf = new Map<string, string>();

/**
 * `select` (a statement listing `columns`, with a condition `SNAPSHOT IS DISTINCT FROM $n`) after
 * a first row that carries the snapshot alone, in a `snapshot` column that is null in the others.
 * UNION ALL appends the branches in order, so the snapshot's row comes first, without a sort.
 */
export function withSnapshotRow(columns: string, select: string): string {
  let nulls = nullsOf.get(columns);
  if (nulls === undefined) nullsOf.set(columns, (nulls = columns.split(', ').map((c) => `NULL AS ${c}`).join(', ')));
  return `SELECT ${SNAPSHOT} AS snapshot, ${nulls}\nUNION ALL\n(SELECT NULL, ${select.replace(/^SELECT /, '')})`;
}

/** The rows of a withSnapshotRow statement: `rows` is undefined when nothing changed since `unlessSnapshot`. */
export function rowsAtSnapshot<R>(unlessSnapshot: string | undefined, rows: Array<R & { snapshot?: string | null }>): SnapshotRead<R[]> {
  const snapshot = rows[0]?.snapshot;
  if (typeof snapshot !== 'string') throw new Error('a snapshot-tagged read did not start with its snapshot');
  if (snapshot === unlessSnapshot) return { snapshot, rows: undefined };
  return { snapshot, rows: rows.slice(1) };
}
