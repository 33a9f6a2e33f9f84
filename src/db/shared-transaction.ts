// A run's view of a transaction it shares with others (use-cases/batch.ts): its statements go to
// the shared transaction, and it keeps what is needed to judge the run alone: whether it wrote,
// which of its own statements failed, and its after-commit hooks.
import type { QueryOptions, Tx } from './database.js';
import { pgErrorCode } from './database.js';

/** SQLSTATE of "current transaction is aborted": a statement that failed only because another did. */
export const IN_FAILED_TRANSACTION = '25P02';

/**
 * Whether a statement may change rows, for deciding whether a failed run left changes behind in
 * the batch. Erring towards "writes" only costs a rollback: a query (SELECT, or WITH … SELECT,
 * locks included) with no INSERT, UPDATE or DELETE in it changes nothing.
 */
const QUERY = /^\s*(SELECT|WITH)\b/i;
const CHANGE = /\b(INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+(\s+\w+)?\s+SET)\b/i;
const writes = (sql: string) => !QUERY.test(sql) || CHANGE.test(sql);

/**
 * A run's view of its batch's transaction: its statements go to the shared one, and it keeps
 * what it needs to be judged alone: whether it wrote, which of its statements failed, its
 * after-commit hooks.
 */
export class RunTx implements Tx {
  wrote = false;
  failure: { error: unknown } | undefined;
  readonly hooks: Array<() => void> = [];
  private readonly answers: Array<Promise<void>> = [];

  constructor(private readonly shared: Tx) {}

  query<R>(sql: string, params?: readonly unknown[], opts?: QueryOptions): Promise<R[]> {
    if (writes(sql)) this.wrote = true;
    const answer = this.shared.query<R>(sql, params, opts);
    this.answers.push(answer.then(() => undefined, (error: unknown) => void (this.failure ??= { error })));
    return answer;
  }

  send(sql: string, params?: readonly unknown[], opts?: QueryOptions): void {
    this.wrote = true;
    void this.query(sql, params, opts).catch(() => {}); // its failure is kept in `failure`
  }

  afterCommit(fn: () => void): void {
    this.hooks.push(fn);
  }

  /** Every statement of the run answered (failed or not). */
  async settled(): Promise<void> {
    for (let n = 0; n < this.answers.length; n = this.answers.length) await Promise.all(this.answers.slice(n));
  }

  /** The run's own statement failed (not one that only found the transaction aborted by another's). */
  get culprit(): boolean {
    return this.failure !== undefined && pgErrorCode(this.failure.error) !== IN_FAILED_TRANSACTION;
  }
}

/** How long the rest of the transaction waits for a row lock before its statement fails (55P03). */
export function setLockTimeout(tx: Tx, ms: number): void {
  tx.send('SELECT set_config($1, $2, true)', ['lock_timeout', `${Math.max(1, Math.round(ms))}ms`]);
}
