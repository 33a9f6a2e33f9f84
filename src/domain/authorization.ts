// One way to refuse a right. A policy (`<module>.policy.ts`) is a table of declarative rules and
// answers `can(action, subject)` with a Verdict; the code that needs the right states it:
//
//   uow.authorize(projectPolicy.can('workOnTasks', access), 'Task', denied)   // a use case (runner.ts)
//   authorize(projectPolicy.can('see', access), 'Project')                    // a read
//
// and the answer to a refusal is picked here, once: 404 when the caller may not know the
// resource exists (no existence leak, docs/api.md section 3), else 403. In a use case the runner also
// rolls back and records the refused action as DENIED.
//
// What is not a matter of rights is thrown as the domain error it is: a resource that does not
// exist (404), bad input (400), a state that forbids the change (409), a stale version (412).
import { forbidden, notFound, type DomainError } from './errors.js';

/** A policy's answer for one action on one subject. */
export interface Verdict {
  /** The caller may do it. */
  readonly allowed: boolean;
  /** The caller may know the subject exists; when not, a refusal is a 404, as for what does not exist. */
  readonly visible: boolean;
  /** Why not, for a 403's detail (the contract's default when absent). */
  readonly reason?: string;
}

/** A rule: whether the caller (in `subject`) may act, given `target` (what the action is aimed at, when it matters). */
export type Rule<S, T> = (subject: S, target: T) => boolean;

/** A policy over subjects `S`: `see` says whether the subject is visible, the other rules what the caller may do. */
export interface Policy<S, A extends string, T> {
  can(action: A | 'see', subject: S, target?: T): Verdict;
}

/**
 * A policy from its table of rules. `see` decides visibility for every action; `reasons` are
 * the 403 details of actions refused on a visible subject.
 */
export function definePolicy<S, A extends string, T = undefined>(
  rules: { see: (subject: S) => boolean } & Record<A, Rule<S, T | undefined>>,
  reasons: Partial<Record<A, string>> = {},
): Policy<S, A, T> {
  return {
    can(action, subject, target) {
      const visible = rules.see(subject);
      const allowed = action === 'see' ? visible : visible && (rules as Record<A, Rule<S, T | undefined>>)[action](subject, target);
      return { allowed, visible, reason: action === 'see' ? undefined : reasons[action] };
    },
  };
}

/** The answer to a refused verdict about `resource` (what a 404 calls it). */
export const refusalOf = (verdict: Verdict, resource: string): DomainError => (verdict.visible ? forbidden(verdict.reason) : notFound(resource));

/** For reads, which record nothing: throws the refusal when the verdict says no. */
export function authorize(verdict: Verdict, resource: string): void {
  if (!verdict.allowed) throw refusalOf(verdict, resource);
}
