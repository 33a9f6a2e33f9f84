// A run's view of a transaction it shares with others (use-cases/batch.ts): its statements go to
// the shared transaction, and it keeps what is needed to judge the run alone: whether it wrote,
// which of its own statements failed, and its after-commit hooks.
import type { GatheredForm, QueryOptions, Tx } from './database.js';
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

  /**
   * `together`: what the runs sharing the transaction share: the shareable statements already
   * sent, by text and values, and the gathered inserts of this turn of the event loop.
   */
  constructor(
    private readonly shared: Tx,
    private readonly together?: Together,
  ) {}

  query<R>(sql: string, params?: readonly unknown[], opts?: QueryOptions): Promise<R[]> {
    if (writes(sql)) this.wrote = true;
    const answer =
      opts?.gather && this.together ? this.together.gather<R>(opts.gather, params ?? [])
      : opts?.shareable && this.together ? this.together.execution<R>(sql, params, opts)
      : this.shared.query<R>(sql, params, opts);
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

interface Gathering {
  form: GatheredForm;
  rows: Array<readonly unknown[]>;
  answers: Array<{ resolve: (rows: unknown[]) => void; reject: (err: unknown) => void }>;
}

/**
 * What the runs of one shared transaction share (QueryOptions.shareable and gather): one
 * execution of a read with the same values, and one many-row statement for the one-row inserts
 * sent in the same turn of the event loop (the runs of a batch advance together: their answers
 * arrive in one read of the socket). A gathered insert is sent after the run's other statements
 * of that turn; a run awaits its answer (the new row) before any statement that depends on it.
 */
export class Together {
  private readonly executions = new Map<string, Promise<unknown[]>>();
  private readonly gatherings = new Map<string, Gathering>();

  constructor(private readonly shared: Tx) {}

  execution<R>(sql: string, params: readonly unknown[] | undefined, opts: QueryOptions): Promise<R[]> {
    const key = `${sql}\u0000${JSON.stringify(params ?? [])}`;
    let execution = this.executions.get(key);
    if (!execution) {
      execution = this.shared.query(sql, params, opts);
      this.executions.set(key, execution);
    }
    return execution as Promise<R[]>;
  }

  gather<R>(form: GatheredForm, params: readonly unknown[]): Promise<R[]> {
    let gathering = this.gatherings.get(form.name);
    if (!gathering) {
      const g: Gathering = { form, rows: [], answers: [] };
      this.gatherings.set(form.name, g);
      process.nextTick(() => this.send(g));
      gathering = g;
    }
    gathering.rows.push(params);
    return new Promise<R[]>((resolve, reject) => gathering.answers.push({ resolve: resolve as (rows: unknown[]) => void, reject }));
  }

  private send(g: Gathering): void {
    this.gatherings.delete(g.form.name);
    const columns = g.rows[0]!.map((_, i) => g.rows.map((row) => row[i]));
    this.shared.query<{ ord: number | string }>(g.form.text, columns, { prepareAs: g.form.name }).then(
      (rows) => {
        const byRow: unknown[][] = g.answers.map(() => []);
        for (const { ord, ...row } of rows) byRow[Number(ord) - 1]?.push(row);
        // A row the many-row form did not answer (an update of a row that is gone) fails its run,
        // which then goes alone and gets the one-row statement's own answer.
        g.answers.forEach((a, i) => (byRow[i]!.length > 0 ? a.resolve(byRow[i]!) : a.reject(new Error(`${g.form.name} answered no row for row ${i + 1}`))));
      },
      (err: unknown) => g.answers.forEach((a) => a.reject(err)),
    );
  }
}
