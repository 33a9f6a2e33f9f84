// Every statement the service sends is declared once, by name, in its repository. That gives
// three things: a statement's text exists in one place only; hot statements are prepared under
// their name (postgres.ts); and `npm run sql` writes every statement to sql/<repository>.sql,
// so that a review reads the real SQL (test/sql-files.test.ts fails when a file is stale).
import type { Queryable, QueryOptions, Tx } from './database.js';

export interface Statement {
  /** `<repository>.<name>`: unique, and the prepared statement's name when prepared. */
  readonly name: string;
  readonly text: string;
  readonly options: QueryOptions | undefined;
}

export interface StatementSpec {
  text: string;
  /**
   * Prepare once per connection (one generic plan): only for hot statements whose best plan
   * does not depend on the values (key lookups, inserts). See QueryOptions.prepareAs.
   */
  prepare?: boolean;
  /** A short key lookup outside transactions, on the pipelined lookup lanes (QueryOptions.lookup). */
  lookup?: boolean;
  /** Reads and locks only: runs sharing a transaction share one execution (QueryOptions.shareable). */
  shareable?: boolean;
  /**
   * For a one-row insert: its many-row form (QueryOptions.gather), prepared as `<name>.gathered`.
   * Its i-th parameter is an array of the rows' i-th values; it answers every row with `ord`,
   * the row's place (1-based) among them.
   */
  gathered?: string;
}

export interface DeclaredStatement {
  text: string;
  /**
   * How it is sent: prepared (and on the lookup lanes), or planned per call. On PostgreSQL a
   * statement planned per call is planned for its values outside a transaction and in the
   * background loops' transactions (db/postgres.ts, PER_CALL_PLAN_SETTINGS); inside a request's
   * transaction it gets the plan the main pool makes, without its values.
   */
  mode: 'prepared lookup' | 'prepared' | 'planned per call' | 'assembled per call';
}

const registry = new Map<string, DeclaredStatement>();

function register(name: string, declared: DeclaredStatement): void {
  const known = registry.get(name);
  if (known !== undefined && known.text !== declared.text) throw new Error(`statement ${name} is declared twice with different texts`);
  registry.set(name, declared);
}

/** Declares a repository's statements; returns them by name. */
export function statements<K extends string>(repository: string, specs: Record<K, string | StatementSpec>): Record<K, Statement> {
  const out = {} as Record<K, Statement>;
  for (const key of Object.keys(specs) as K[]) {
    const spec = specs[key];
    const { text, prepare, lookup, shareable, gathered } = typeof spec === 'string' ? { text: spec, prepare: false, lookup: false, shareable: false, gathered: undefined } : spec;
    const name = `${repository}.${key}`;
    register(name, { text, mode: prepare ? (lookup ? 'prepared lookup' : 'prepared') : 'planned per call' });
    if (gathered !== undefined) register(`${name}.gathered`, { text: gathered, mode: 'prepared' });
    const options: QueryOptions | undefined = prepare ? { prepareAs: name, lookup } : undefined;
    const extra = { ...(shareable ? { shareable } : {}), ...(gathered !== undefined ? { gather: { name: `${name}.gathered`, text: gathered } } : {}) };
    out[key] = { name, text, options: Object.keys(extra).length > 0 ? { ...options, ...extra } : options };
  }
  return out;
}

/**
 * A statement whose text is assembled per call from fixed fragments (a list with optional
 * filters: db/conditions.ts). `examples` are the texts the SQL file shows for it.
 */
export function dynamicStatement(repository: string, name: string, examples: Record<string, string>): void {
  for (const [variant, text] of Object.entries(examples)) register(`${repository}.${name} (${variant})`, { text, mode: 'assembled per call' });
}

export function query<R>(q: Queryable, s: Statement, params: readonly unknown[] = []): Promise<R[]> {
  return q.query<R>(s.text, params, s.options);
}

/** Sends a statement whose answer the use case does not need (Tx.send: pipelined, settled before COMMIT). */
export function send(tx: Tx, s: Statement, params: readonly unknown[] = []): void {
  tx.send(s.text, params, s.options);
}

/** Every declared statement, by name (for the SQL files). */
export function declaredStatements(): ReadonlyMap<string, DeclaredStatement> {
  return registry;
}
