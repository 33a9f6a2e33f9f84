// Names for the generated types (generated/teamlog-api.ts, from the served OpenAPI document):
// the resources, and each operation's query, body and answer, so that a change of the document
// that the client does not follow fails to type-check here.
import type { components, operations } from './generated/teamlog-api.js';

export type { components, operations, paths } from './generated/teamlog-api.js';

type Schemas = components['schemas'];
export type User = Schemas['User'];
export type Role = Schemas['Role'];
export type Project = Schemas['Project'];
export type ProjectRole = Schemas['ProjectRole'];
export type ProjectMember = Schemas['ProjectMember'];
export type Task = Schemas['Task'];
export type TaskStatus = Schemas['TaskStatus'];
export type Post = Schemas['Post'];
export type Message = Schemas['Message'];
export type Notification = Schemas['Notification'];
export type AuditRecord = Schemas['AuditRecord'];
/** An actor as GET /audit-logs?include=actors names them: the user's email and name (null where unknown). */
export type AuditActor = Schemas['AuditActor'];
/** A page of the audit log; with include=actors, `actors` beside `data`. */
export type AuditListPage = Schemas['AuditListPage'];
export type AuditCheckpoint = Schemas['AuditCheckpoint'];
export type AuditInclusionProof = Schemas['AuditInclusionProof'];
export type AuditConsistencyProof = Schemas['AuditConsistencyProof'];
export type AuditPublicKey = Schemas['AuditPublicKey'];
export type AuditVerifyReport = Schemas['AuditVerifyReport'];
/** What a verification could not check, and why (never a failure: `ok` is about what was checked). */
export type AuditNotChecked = Schemas['AuditNotChecked'];
export type LoginResponse = Schemas['LoginResponse'];
export type TokenPair = Schemas['TokenPair'];
/** An RFC 9457 problem, as every error of the API answers. */
export type Problem = Schemas['Problem'];
/** The contract's error codes (docs/api.md section 2). */
export type ProblemCode = Problem['code'];

export type OperationId = keyof operations;

type JsonOf<R> = R extends { content: { 'application/json': infer T } } ? T : never;

/** What an operation's query string takes. */
export type QueryOf<Op extends OperationId> = NonNullable<operations[Op]['parameters']['query']>;
/** The JSON body an operation takes. */
export type BodyOf<Op extends OperationId> = JsonOf<NonNullable<operations[Op]['requestBody']>>;
/** The JSON an operation answers with when it succeeds (200 or 201). */
export type ResultOf<Op extends OperationId> = operations[Op]['responses'] extends { 200: infer R }
  ? JsonOf<R>
  : operations[Op]['responses'] extends { 201: infer R }
    ? JsonOf<R>
    : undefined;

/** A page of a list: its items, and the cursor of the next page (null on the last). */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

/** A list's filters and its page: `cursor` takes a page's `next_cursor` as it is (null: the first page). */
export type ListQuery<Op extends OperationId> = Omit<QueryOf<Op>, 'cursor'> & { cursor?: string | null };
