// One error for every refusal the API answers: TeamlogError, with the problem's status, code
// (the contract's enum), detail and its typed extensions. A fetch that never reached the
// service (no network, DNS, connection refused) throws fetch's own error instead.
import type { Problem, ProblemCode, TaskStatus } from './types.js';

export type FieldError = NonNullable<Problem['errors']>[number];

export class TeamlogError extends Error {
  override readonly name = 'TeamlogError';
  /** The HTTP status. */
  readonly status: number;
  /** The contract's code (docs/api.md section 2), the value to branch on. */
  readonly code: ProblemCode;
  /** What went wrong with this request, in words. */
  readonly detail: string;
  /** The whole problem document, as the service sent it (or made up for an answer that was none). */
  readonly problem: Problem;
  /** Seconds the service asked to wait before trying again (Retry-After), when it said. */
  readonly retryAfter: number | undefined;

  constructor(problem: Problem, retryAfter?: number) {
    super(`${problem.status} ${problem.code}: ${problem.detail}`);
    this.status = problem.status;
    this.code = problem.code;
    this.detail = problem.detail;
    this.problem = problem;
    this.retryAfter = retryAfter;
  }

  /** Each invalid field (400 VALIDATION_FAILED). */
  get errors(): FieldError[] {
    return this.problem.errors ?? [];
  }

  /** The statuses the task may move to (409 INVALID_TRANSITION). */
  get allowedTransitions(): TaskStatus[] | undefined {
    return this.problem.allowed_transitions;
  }

  /** The task's status now (409 INVALID_TRANSITION). */
  get currentStatus(): TaskStatus | undefined {
    return this.problem.current_status;
  }

  /** The projects a user solely owns (409 LAST_OWNER on a user's deletion). */
  get projects(): Problem['projects'] {
    return this.problem.projects;
  }

  /** The X-Request-Id of the answer: quote it when reporting a problem. */
  get requestId(): string {
    return this.problem.request_id;
  }
}

const TITLES: Record<number, string> = { 400: 'Invalid request', 401: 'Unauthenticated', 403: 'Forbidden', 404: 'Not found', 409: 'Conflict', 412: 'Precondition failed', 429: 'Too many requests', 500: 'Internal server error', 503: 'Service unavailable' };

/** A problem made by the client: for an answer that was not problem+json (a proxy's 502), or a state it knows first (not signed in). */
export function clientProblem(status: number, code: ProblemCode, detail: string, instance = ''): Problem {
  return { type: `/problems/${code.toLowerCase().replace(/_/g, '-')}`, title: TITLES[status] ?? 'Error', status, detail, code, instance, request_id: '' };
}

/** The code a status stands for when the answer carried none (not problem+json). */
export function codeOfStatus(status: number): ProblemCode {
  if (status === 401) return 'UNAUTHENTICATED';
  if (status === 403) return 'FORBIDDEN';
  if (status === 404) return 'NOT_FOUND';
  if (status === 409) return 'CONFLICT';
  if (status === 412) return 'PRECONDITION_FAILED';
  if (status === 429) return 'RATE_LIMITED';
  if (status === 502 || status === 503 || status === 504) return 'UNAVAILABLE';
  if (status >= 500) return 'INTERNAL';
  return 'VALIDATION_FAILED';
}
