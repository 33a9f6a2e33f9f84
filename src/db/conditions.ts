// List filters as a WHERE clause made of the conditions a request actually sets.
//
// Why not one catch-all statement (`($1 IS NULL OR actor_id = $1) AND …` for every filter)?
// Such a statement cannot be prepared usefully (its one generic plan fits no combination),
// so every call is parsed and planned afresh, and planning the catch-all took 0.15 ms for the
// task list against 0.05 ms for the plain query (EXPLAIN ANALYZE), on the hottest read path.
// A statement per combination of filters is plain SQL, prepared (parsed) once per connection
// and cheap to plan; PostgreSQL keeps a generic plan for it where that plan is as good.
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
