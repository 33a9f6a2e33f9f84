// A transaction that also EXPLAINs, in place, the statements a piece of the service sends
// through it: how a test sees the plan the service's own statement gets, with its own
// parameters, inside its own transaction (settings such as SET LOCAL included).
import type { Tx } from '../../src/db/database.js';

/**
 * `tx`, where each `query` whose text `explain` picks is first run as EXPLAIN (FORMAT JSON;
 * ANALYZE too when `analyze`) and its plan, parsed, handed to `onPlan`.
 */
export function explainingTx(tx: Tx, explain: (sql: string) => boolean, onPlan: (sql: string, plan: unknown) => void, analyze = false): Tx {
  return {
    ...tx,
    send: (sql, params, opts) => tx.send(sql, params, opts),
    afterCommit: (fn) => tx.afterCommit(fn),
    query: async <R>(sql: string, params?: readonly unknown[]) => {
      if (explain(sql)) {
        const [row] = await tx.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (${analyze ? 'ANALYZE, ' : ''}FORMAT JSON) ${sql}`, params);
        const explained = row!['QUERY PLAN'];
        onPlan(sql, typeof explained === 'string' ? JSON.parse(explained) : explained);
      }
      return tx.query<R>(sql, params);
    },
  };
}

/** A node of an EXPLAIN (FORMAT JSON) plan tree: the fields the tests read (ANALYZE's among them). */
export interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Relation Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Heap Fetches'?: number;
  'Exact Heap Blocks'?: number;
  'Lossy Heap Blocks'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/** The top node of the plan that `explainingTx` hands to `onPlan` (EXPLAIN's JSON is a list of one). */
export const topPlanNode = (explained: unknown): PlanNode => (explained as Array<{ Plan: PlanNode }>)[0]!.Plan;

/** Every node of a plan tree, the top first, each before its children. */
export const planNodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(planNodes)];
