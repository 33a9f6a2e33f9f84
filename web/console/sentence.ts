// What a record says happened, in one sentence, with names where people think in names: "Alice
// Martin moved the task "Fix login" from TODO to IN_PROGRESS." Pure (no DOM, no fetch), so that
// test/audit-sentence.test.ts checks every action of the contract's vocabulary
// (src/domain/audit-vocabulary.ts): PHRASES is typed by it, and a new action fails to typecheck
// until it has its line here.
import type { AuditAction } from '../../src/domain/audit-vocabulary.js';

/** The people a page of records names, by id: `GET /audit-logs?include=actors`. */
export type Actors = Readonly<Record<string, { email: string; name: string } | undefined>>;

/** The fields of a record the sentence reads (the API's AuditRecord has them all). */
export interface RecordFacts {
  actor_id: number | null;
  action: string;
  resource_type: string;
  resource_id: number | null;
  result: string;
  metadata: Record<string, unknown>;
}

/** Names the page knows beyond the record itself: the page's actors, and the resources other records named. */
export interface Names {
  actors: Actors;
  /** `TYPE/id` → a name seen in another record's metadata (a task's title, a project's name). */
  resources?: ReadonlyMap<string, string>;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) ? v : undefined);
const quoted = (s: string) => `\u201c${s}\u201d`;

/** A user as people know them: "Alice Martin (alice@example.com)", else the email, else "user 12". */
export function userName(id: number | null | undefined, names: Names): string {
  if (id === null || id === undefined) return 'nobody';
  const a = names.actors[String(id)];
  if (!a) return `user ${id}`;
  return a.name ? `${a.name} (${a.email})` : a.email;
}

/** Who acted: a name and email from the page's actors; a null actor is the CLI, or a stranger at the sign-in form. */
export function actorName(r: RecordFacts, names: Names): string {
  if (r.actor_id === null) return r.action === 'LOGIN_FAILURE' ? 'Someone' : 'The command line';
  return userName(r.actor_id, names);
}

/** The resource's name from the record's metadata (or another record's), else its type and id. */
export function resourceName(r: RecordFacts, names: Names): string {
  const m = r.metadata;
  const key = r.resource_id === null ? r.resource_type : `${r.resource_type}/${r.resource_id}`;
  const known = names.resources?.get(key);
  switch (r.resource_type) {
    case 'TASK': {
      const title = str(m.title) ?? known;
      return title ? `the task ${quoted(title)}` : `task ${r.resource_id ?? '?'}`;
    }
    case 'PROJECT': {
      const name = (r.action === 'CREATE_PROJECT' || r.action === 'DELETE_PROJECT' ? str(m.name) : undefined) ?? known;
      return name ? `the project ${quoted(name)}` : `project ${r.resource_id ?? '?'}`;
    }
    case 'USER': {
      if (r.resource_id === null) return str(m.email) ?? 'a user';
      const email = str(m.newEmail) ?? str(m.email) ?? known;
      const a = names.actors[String(r.resource_id)];
      if (a) return userName(r.resource_id, names);
      return email ?? `user ${r.resource_id}`;
    }
    case 'AUDIT_LOG':
      return 'the audit log';
    default:
      return key;
  }
}

/** `TYPE/id` → the name a record's metadata gives its resource, if it gives one (to name it in other records). */
export function nameInMetadata(r: RecordFacts): [string, string] | undefined {
  if (r.resource_id === null) return undefined;
  const name = r.resource_type === 'TASK' ? str(r.metadata.title) : r.resource_type === 'PROJECT' && r.action === 'CREATE_PROJECT' ? str(r.metadata.name) : undefined;
  return name === undefined ? undefined : [`${r.resource_type}/${r.resource_id}`, name];
}

interface Said {
  /** What was done, in the past tense, after the actor: "created the project “Apollo”". */
  did: string;
  /** The same, to follow "tried to": "create the project “Apollo”". */
  tried: string;
}

type Phrase = (r: RecordFacts, who: string, what: string, names: Names) => Said;

/** A verb in both forms, then what follows it. */
const verb = (base: string, past: string, rest: string): Said => ({ did: `${past} ${rest}`, tried: `${base} ${rest}` });
const change = (m: Record<string, unknown>, oldKey: string, newKey: string) => {
  const [a, b] = [str(m[oldKey]), str(m[newKey])];
  return a && b ? ` from ${a} to ${b}` : b ? ` to ${b}` : '';
};
const member = (m: Record<string, unknown>, names: Names) => (num(m.userId) === undefined ? 'a member' : userName(num(m.userId), names));
const plural = (n: number, one: string, many = `${one}s`) => `${n.toLocaleString('en')} ${n === 1 ? one : many}`;

/** One line per action of the contract's vocabulary. */
const PHRASES: Record<AuditAction, Phrase> = {
  CREATE_USER: (r, _w, what) =>
    // A refused creation names no user (resource_id null).
    r.resource_id === null ? verb('create', 'created', 'a user') : verb('create', 'created', `the user ${what}${str(r.metadata.role) ? ` as ${str(r.metadata.role)}` : ''}`),
  DELETE_USER: (_r, _w, what) => verb('delete', 'deleted', `the user ${what}`),
  DEACTIVATE_USER: (_r, _w, what) => verb('deactivate', 'deactivated', what),
  ACTIVATE_USER: (_r, _w, what) => verb('reactivate', 'reactivated', what),
  CHANGE_USER_ROLE: (r, _w, what) => verb('change', 'changed', `the role of ${what}${change(r.metadata, 'oldRole', 'newRole')}`),
  LOGIN_SUCCESS: () => verb('sign in', 'signed in', ''),
  LOGIN_FAILURE: (r) => verb('sign in', 'failed to sign in', `as ${str(r.metadata.email) ?? 'an unknown email'}${str(r.metadata.reason) ? ` (${str(r.metadata.reason)!.replaceAll('_', ' ')})` : ''}`),
  LOGOUT: () => verb('sign out', 'signed out', ''),
  PASSWORD_CHANGED: (r) => {
    const n = num(r.metadata.revokedSessions);
    return verb('change', 'changed', `their password${n ? `, ending ${plural(n, 'other session')}` : ''}`);
  },
  CREATE_PROJECT: (_r, _w, what) => verb('create', 'created', what),
  DELETE_PROJECT: (r, _w, what) => {
    const n = num(r.metadata.taskCount);
    return verb('delete', 'deleted', `${what}${n === undefined ? '' : ` and its ${plural(n, 'task')}`}`);
  },
  ADD_PROJECT_MEMBER: (r, _w, what, names) => verb('add', 'added', `${member(r.metadata, names)} to ${what}${str(r.metadata.role) ? ` as ${str(r.metadata.role)}` : ''}`),
  REMOVE_PROJECT_MEMBER: (r, _w, what, names) => verb('remove', 'removed', `${member(r.metadata, names)} from ${what}`),
  CHANGE_PROJECT_MEMBER_ROLE: (r, _w, what, names) => verb('change', 'changed', `the role of ${member(r.metadata, names)} in ${what}${change(r.metadata, 'oldRole', 'newRole')}`),
  CREATE_TASK: (r, _w, what) =>
    // A refused creation names the project it was aimed at (resource PROJECT).
    r.resource_type === 'PROJECT' ? verb('create', 'created', `a task in ${what}`) : verb('create', 'created', what),
  DELETE_TASK: (_r, _w, what) => verb('delete', 'deleted', what),
  ASSIGN_TASK: (r, _w, what, names) => {
    const to = num(r.metadata.newAssigneeId);
    if ('newAssigneeId' in r.metadata && r.metadata.newAssigneeId === null) return verb('unassign', 'unassigned', what);
    return verb('assign', 'assigned', `${what}${to === undefined ? '' : ` to ${userName(to, names)}`}`);
  },
  CHANGE_TASK_STATUS: (r, _w, what) => verb('move', 'moved', `${what}${change(r.metadata, 'oldStatus', 'newStatus')}`),
  UPDATE_USER_EMAIL: (r, _w, what) => {
    const [a, b] = [str(r.metadata.oldEmail), str(r.metadata.newEmail)];
    return verb('change', 'changed', `the email of ${r.resource_id === null ? 'a user' : a ?? what}${b ? ` to ${b}` : ''}`);
  },
  SESSION_REVOKED: (r) =>
    verb('end', 'had a session ended', r.metadata.reason === 'refresh_reuse' ? 'because its refresh token was used twice (possible theft)' : `(${str(r.metadata.reason) ?? 'revoked'})`),
  EXPORT_AUDIT_LOG: (r) => verb('export', 'exported', `the audit log${str(r.metadata.format) ? ` as ${str(r.metadata.format)!.toUpperCase()}` : ''}`),
  REDACT_PERSONAL_DATA: (r, _w, what) => {
    const n = num(r.metadata.valuesErased);
    const whose = r.resource_id === null ? (str(r.metadata.scope) === 'email' ? 'an email address' : 'personal data') : `the personal data of ${what}`;
    return verb('erase', 'erased', `${whose}${n === undefined ? '' : ` (${plural(n, 'value')})`}`);
  },
};

/** One sentence saying what the record says happened, who did it, to what, and whether it was refused. */
export function sentence(r: RecordFacts, names: Names): string {
  const who = actorName(r, names);
  const what = resourceName(r, names);
  const phrase = (PHRASES as Record<string, Phrase | undefined>)[r.action];
  // An action newer than this page: still a sentence, with the action's own name.
  const said = phrase ? phrase(r, who, what, names) : verb(`do ${r.action} on`, `did ${r.action} on`, what);
  if (r.result === 'DENIED') return `${who} tried to ${said.tried.trimEnd()}, and was refused.`;
  if (r.result === 'FAILURE' && r.action !== 'LOGIN_FAILURE') return `${who} tried to ${said.tried.trimEnd()}, and failed.`;
  return `${who} ${said.did.trimEnd()}.`;
}
