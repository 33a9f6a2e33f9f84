// List filters as a WHERE clause made of the conditions a request actually sets.
//
// Why not one catch-all statement (`($1 IS NULL OR actor_id = $1) AND …` for every filter)?
// PostgreSQL cannot plan such a statement once: every call is parsed and planned afresh, and
// planning the catch-all costs about twice the plain query's (0.15 ms against 0.06 ms for the
// task list, measured with EXPLAIN ANALYZE), on the hottest read path. A statement per
// combination of filters is plain SQL that is prepared once per connection and planned once.
//
// Values always travel as parameters: a condition is a fixed fragment of SQL that is given
// its parameter's placeholder, never a value.

/** A filter: its SQL given the placeholder of its value, and the value (undefined: not set). */
export type Condition = readonly [sql: (placeholder: string) => string, value: unknown];

export interface Where {
  /** `WHERE a AND b …`, or '' when no filter is set. */
  clause: string;
  params: unknown[];
  /** Which filters are set, as a bit per condition: names the statement to prepare. */
  shape: number;
}

export function where(conditions: readonly Condition[]): Where {
  const parts: string[] = [];
  const params: unknown[] = [];
  let shape = 0;
  conditions.forEach(([sql, value], i) => {
    if (value === undefined) return;
    params.push(value);
    parts.push(sql(`$${params.length}`));
    shape |= 1 << i;
  });
  return { clause: parts.length > 0 ? `WHERE ${parts.join(' AND ')}` : '', params, shape };
}
