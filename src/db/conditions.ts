// List filters as a WHERE clause made of the conditions a request actually sets.
//
// Why not one catch-all statement (`($1 IS NULL OR actor_id = $1) AND …` for every filter)?
// Such a statement cannot be prepared usefully (its one generic plan fits no combination),
// so every call is parsed and planned afresh, and planning the catch-all took 0.15 ms for the
// task list against 0.05 ms for the plain query (EXPLAIN ANALYZE), on the hottest read path.
// A statement per combination of filters is plain SQL, cheap to plan, and where one plan
// serves every value it is prepared once per connection and never planned again.
//
// Values always travel as parameters: a condition is a fixed fragment of SQL that is given
// its parameter's placeholder, never a value.

/**
 * A filter: its SQL given the placeholder of its value, and the value (undefined: not set).
 * `perValue`: the best plan depends on the value (how rare a word is, how wide a time range),
 * so a statement using it is planned on every call instead of prepared (see postgres.ts).
 */
export type Condition = readonly [sql: (...placeholders: string[]) => string, value: unknown, perValue?: 'plan per value'];

/**
 * The values of a condition that takes several parameters, or none (`actor_id IS NULL`): its
 * SQL is given one placeholder per value, in order. A search term (audit.search.ts) is such a
 * condition: `resource:TASK/5` is a type and an id.
 */
export class Params {
  constructor(readonly values: readonly unknown[]) {}
}

export interface Where {
  /** `WHERE a AND b …`, or '' when no filter is set. */
  clause: string;
  params: unknown[];
  /**
   * A statement name for this combination of filters, to prepare it under (a bit per set
   * condition after `prefix`), or undefined when a set filter wants a plan per value.
   */
  prepareAs: string | undefined;
}

export function where(prefix: string, conditions: readonly Condition[]): Where {
  const parts: string[] = [];
  const params: unknown[] = [];
  let shape = 0;
  let perValue = false;
  conditions.forEach(([sql, value, plan], i) => {
    if (value === undefined) return;
    if (value instanceof Params) {
      parts.push(sql(...value.values.map((v) => `$${params.push(v)}`)));
    } else {
      params.push(value);
      parts.push(sql(`$${params.length}`));
    }
    shape |= 1 << i;
    perValue ||= plan !== undefined;
  });
  return { clause: parts.length > 0 ? `WHERE ${parts.join(' AND ')}` : '', params, prepareAs: perValue ? undefined : `${prefix}_${shape}` };
}
