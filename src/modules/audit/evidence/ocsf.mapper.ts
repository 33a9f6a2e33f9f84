// An audit record as an OCSF 1.8 event (docs/api.md 4, export `format=ocsf`, and 5.9,
// AUDIT_WEBHOOK_FORMAT=ocsf), for SIEMs that take the Open Cybersecurity Schema Framework's events
// as they are: the one place that decides which class an action is and how its fields map. Pure:
// the export (export.stream.ts) and the webhook (webhook.sender.ts) hand it records and their
// evidence, and write what it answers.
//
// Classes: Authentication (3002) for sign-ins and sessions, Account Change (3001) for what is
// done to an account, API Activity (6003) for everything else. The record's evidence (its id, its
// seq, its leaf hash, its audit path and its sealed form, which the leaf hashes) goes under
// `unmapped` untouched, so that a copy held by a SIEM still proves itself against a checkpoint.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import type { AuditAction } from '../../../domain/audit-vocabulary.js';
import type { SealedRecord } from './record.sealed-form.js';

/** The OCSF schema release the events follow (test/fixtures/ocsf-1.8.0 holds it, and the tests validate against it). */
export const OCSF_SCHEMA_VERSION = '1.8.0';

/**
 * The release of Teamlog that wrote the event (package.json, four levels up from both
 * src/modules/audit/evidence/ and dist/…): read here, not from ops/version.ts, which sits on a
 * floor above the modules; the export runs in a worker thread that has no app to ask.
 */
const PRODUCT_VERSION = (() => {
  try {
    return String((JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as { version?: unknown }).version ?? '0.0.0');
  } catch {
    return '0.0.0';
  }
})();

const PRODUCT = { name: 'Teamlog', vendor_name: 'Teamlog', version: PRODUCT_VERSION };

type OcsfClass = 'authentication' | 'account_change' | 'api_activity';

/** Each class's uid, category and captions, as the schema gives them (the validator holds the captions to it). */
const CLASSES = {
  authentication: { class_uid: 3002, class_name: 'Authentication', category_uid: 3, category_name: 'Identity & Access Management' },
  account_change: { class_uid: 3001, class_name: 'Account Change', category_uid: 3, category_name: 'Identity & Access Management' },
  api_activity: { class_uid: 6003, class_name: 'API Activity', category_uid: 6, category_name: 'Application Activity' },
} as const;

/** Each class's activities that the mapping uses, by activity_id: their captions in the schema. */
const ACTIVITIES: Record<OcsfClass, Record<number, string>> = {
  authentication: { 1: 'Logon', 2: 'Logoff', 99: 'Other' },
  account_change: { 1: 'Create', 2: 'Enable', 3: 'Password Change', 5: 'Disable', 6: 'Delete', 7: 'Attach Policy', 99: 'Other' },
  api_activity: { 1: 'Create', 2: 'Read', 3: 'Update', 4: 'Delete', 99: 'Other' },
};

interface Mapping {
  ocsf: OcsfClass;
  activity: number;
  /** The source's own name for an activity the schema has no id for (activity_id 99). */
  other?: string;
  /** What was done, for the message: the infinitive ("change the role of") and the past ("changed the role of"). */
  verb: string;
  past: string;
}

const map = (ocsf: OcsfClass, activity: number, verb: string, past: string, other?: string): Mapping => ({ ocsf, activity, verb, past, ...(other ? { other } : {}) });

/**
 * Every action of the vocabulary (typed by it: a new action does not compile until it has its
 * line), with why it is that class and activity:
 * - sign-in and sign-out are Authentication Logon and Logoff; a session revoked because its
 *   refresh token was used twice is a Logoff the service forced (the session ends);
 * - what changes an account (its existence, its state, its password, its role, its email) is
 *   Account Change: Teamlog's role is the set of rights attached to the account, so a role
 *   change is Attach Policy naming the new role (`user` and `user_result` show before and after);
 *   an email change has no activity of its own in 1.8, so it is Other, "Email Change";
 * - the rest is API Activity by its verb. A project's members are rights inside one project,
 *   not the account: adding, removing or changing one updates the project. Erasing personal
 *   values deletes them; an export reads the log.
 */
export const OCSF_MAPPINGS: Record<AuditAction, Mapping> = {
  LOGIN_SUCCESS: map('authentication', 1, 'log on', 'logged on'),
  LOGIN_FAILURE: map('authentication', 1, 'log on', 'logged on'),
  LOGOUT: map('authentication', 2, 'log off', 'logged off'),
  SESSION_REVOKED: map('authentication', 2, 'have a session revoked', 'had a session revoked'),
  CREATE_USER: map('account_change', 1, 'create', 'created'),
  ACTIVATE_USER: map('account_change', 2, 'activate', 'activated'),
  PASSWORD_CHANGED: map('account_change', 3, 'change the password of', 'changed the password of'),
  DEACTIVATE_USER: map('account_change', 5, 'deactivate', 'deactivated'),
  DELETE_USER: map('account_change', 6, 'delete', 'deleted'),
  CHANGE_USER_ROLE: map('account_change', 7, 'change the role of', 'changed the role of'),
  UPDATE_USER_EMAIL: map('account_change', 99, 'change the email of', 'changed the email of', 'Email Change'),
  CREATE_PROJECT: map('api_activity', 1, 'create', 'created'),
  DELETE_PROJECT: map('api_activity', 4, 'delete', 'deleted'),
  ADD_PROJECT_MEMBER: map('api_activity', 3, 'add a member to', 'added a member to'),
  REMOVE_PROJECT_MEMBER: map('api_activity', 3, 'remove a member from', 'removed a member from'),
  CHANGE_PROJECT_MEMBER_ROLE: map('api_activity', 3, "change a member's role in", "changed a member's role in"),
  CREATE_TASK: map('api_activity', 1, 'create', 'created'),
  DELETE_TASK: map('api_activity', 4, 'delete', 'deleted'),
  ASSIGN_TASK: map('api_activity', 3, 'assign', 'assigned'),
  CHANGE_TASK_STATUS: map('api_activity', 3, 'change the status of', 'changed the status of'),
  EXPORT_AUDIT_LOG: map('api_activity', 2, 'export', 'exported'),
  REDACT_PERSONAL_DATA: map('api_activity', 4, 'erase personal data of', 'erased personal data of'),
};

/**
 * An action outside the vocabulary (only someone writing behind the service's back stores one):
 * API Activity by its leading verb, else Other under its own name.
 */
function mappingOf(action: string): Mapping {
  const known = (OCSF_MAPPINGS as Record<string, Mapping | undefined>)[action];
  if (known) return known;
  const verb = action.split('_')[0] ?? '';
  const activity = ({ CREATE: 1, ADD: 1, READ: 2, EXPORT: 2, GET: 2, UPDATE: 3, CHANGE: 3, ASSIGN: 3, SET: 3, DELETE: 4, REMOVE: 4 } as Record<string, number>)[verb] ?? 99;
  return map('api_activity', activity, `do ${action} on`, `did ${action} on`, activity === 99 ? action : undefined);
}

/** A record and what proves it. */
export interface OcsfEvidence {
  /** The record as the API shows it (personal values resolved, or "[redacted]"). */
  record: SealedRecord;
  /** Its sealed form: what its leaf hashes. */
  sealed: SealedRecord;
  /** Its place in the log, null while it is not sealed (or, in an export, not covered by the checkpoint). */
  seq: number | null;
  leaf_hash: string | null;
  /** The export's inclusion proof, against the checkpoint of `tree_size` records. */
  audit_path?: string[] | null;
  tree_size?: number;
}

export type OcsfEvent = Record<string, unknown>;

const SEVERITY = { 1: 'Informational', 2: 'Low', 3: 'Medium', 4: 'High' } as const;

/** The record's outcome: Success, or Failure with the refusal or the failure's reason. */
function status(record: SealedRecord) {
  const reason = typeof record.metadata.reason === 'string' ? record.metadata.reason : undefined;
  switch (record.result) {
    case 'SUCCESS':
      return { status_id: 1, status: 'Success', status_code: record.result };
    case 'FAILURE':
      return { status_id: 2, status: 'Failure', status_code: record.result, status_detail: reason ?? 'FAILURE' };
    case 'DENIED':
      // Refused by authorization: a failure of the attempt, said so in status_detail.
      return { status_id: 2, status: 'Failure', status_code: record.result, status_detail: reason ? `DENIED: ${reason}` : 'DENIED' };
    default:
      return { status_id: 99, status: record.result, status_code: record.result };
  }
}

/**
 * Refusals and failures are worth a look (Low); a session revoked for a refresh token used twice
 * means the token was probably stolen (Medium); the rest is routine (Informational).
 */
function severityId(record: SealedRecord): 1 | 2 | 3 {
  if (record.action === 'SESSION_REVOKED') return 3;
  return record.result === 'SUCCESS' ? 1 : 2;
}

const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
/** The schema's email_t pattern: "[redacted]" and other non-addresses are left out, not sent as an address. */
const EMAIL = /^[a-zA-Z0-9!#$%&'*+\-/=?^_`{|}~.]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9\-.]+$/;
const emailOf = (v: unknown) => (typeof v === 'string' && EMAIL.test(v) ? { email_addr: v } : {});
/** OCSF's account types: Teamlog's ADMIN is an Admin account, USER a User. */
const accountType = (role: unknown) => (role === 'ADMIN' ? { type_id: 2, type: 'Admin' } : role === 'USER' ? { type_id: 1, type: 'User' } : {});

/**
 * An account as OCSF names one: its id, else the name it was given (a login's typed email). The
 * schema wants one of them; a refused creation names no account yet.
 */
function user(id: number | null, name?: string, extra: Record<string, unknown> = {}) {
  return { ...(id !== null ? { uid: String(id) } : { name: name ?? 'unknown' }), ...extra };
}

/** Who acted: a user, else (no actor: the CLI, or a stranger at the sign-in form) the application. */
function actor(r: SealedRecord) {
  const session = text(r.metadata.sessionId);
  if (r.actor_id !== null) return { user: user(r.actor_id), ...(session ? { session: { uid: session } } : {}) };
  if (r.action === 'LOGIN_FAILURE') return { user: user(null, text(r.metadata.email) ?? 'unknown', emailOf(r.metadata.email)) };
  return { app_name: r.ip === null ? 'teamlog-cli' : 'Teamlog' };
}

/** Where the request came from; a record without an address was written by the CLI on the host. */
function srcEndpoint(ip: string | null) {
  if (ip === null) return { name: 'teamlog-cli' };
  return isIP(ip) ? { ip } : { name: ip };
}

const resourceText = (r: SealedRecord) =>
  r.resource_type === 'AUDIT_LOG' ? 'the audit log' : `${r.resource_id !== null ? '' : 'a '}${r.resource_type.toLowerCase()}${r.resource_id !== null ? ` ${r.resource_id}` : ''}`;

/** A short sentence: "User 1 changed the role of user 7." / "User 3 was not allowed to create a user." */
function message(r: SealedRecord, m: Mapping): string {
  const who = r.actor_id !== null ? `User ${r.actor_id}` : r.action === 'LOGIN_FAILURE' ? 'Someone' : 'The command line';
  // A sign-in or a session concerns the actor's own account.
  const target = m.ocsf === 'authentication' ? '' : ` ${resourceText(r)}`;
  const reason = text(r.metadata.reason) ? ` (${text(r.metadata.reason)})` : '';
  if (r.result === 'SUCCESS') return `${who} ${m.past}${target}${reason}.`;
  return `${who} ${r.result === 'DENIED' ? 'was not allowed' : 'failed'} to ${m.verb}${target}${reason}.`;
}

/** What each class adds: Authentication and Account Change name the account; API Activity its API call and resource. */
function classFields(r: SealedRecord, m: Mapping): Record<string, unknown> {
  const md = r.metadata;
  if (m.ocsf === 'authentication') {
    const session = text(md.sessionId);
    return {
      user: user(r.resource_id, text(md.email), emailOf(md.email)),
      service: { name: 'Teamlog', version: PRODUCT_VERSION },
      ...(session ? { session: { uid: session } } : {}),
    };
  }
  if (m.ocsf === 'account_change') {
    if (r.action === 'CHANGE_USER_ROLE') {
      const role = text(md.newRole);
      return {
        user: user(r.resource_id, undefined, accountType(md.oldRole)),
        user_result: user(r.resource_id, undefined, accountType(md.newRole)),
        ...(role ? { policy: { name: role, type: 'role', desc: `Teamlog role ${role}${text(md.oldRole) ? `, replacing ${text(md.oldRole)}` : ''}` } } : {}),
      };
    }
    if (r.action === 'UPDATE_USER_EMAIL') {
      return { user: user(r.resource_id, undefined, emailOf(md.oldEmail)), ...(md.newEmail !== undefined ? { user_result: user(r.resource_id, undefined, emailOf(md.newEmail)) } : {}) };
    }
    return { user: user(r.resource_id, undefined, { ...emailOf(md.email), ...accountType(md.role) }) };
  }
  return {
    api: { operation: r.action, version: 'v1', service: { name: 'Teamlog' }, request: { uid: r.request_id } },
    resources: [{ type: r.resource_type, ...(r.resource_id !== null ? { uid: String(r.resource_id) } : { name: resourceText(r) }) }],
  };
}

/**
 * The record's time in ms since the epoch. The API's form is ISO 8601; a timestamp only someone
 * writing behind the service's back stores (PostgreSQL's "infinity", a year BC or past 9999) is
 * read as PostgreSQL wrote it, infinity as the end of JavaScript's time range; the text itself
 * is kept in metadata.original_time and in the sealed form.
 */
export function ocsfTime(timestamp: string): number {
  if (timestamp === 'infinity') return 8.64e15;
  if (timestamp === '-infinity') return -8.64e15;
  // Read by its parts, not by Date.parse, whose reading of anything but strict ISO 8601 is the engine's guess.
  const m = /^(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|([+-])(\d\d)(?::?(\d\d))?)?( BC)?$/.exec(timestamp);
  if (!m) return 0;
  const offset = m[9] ? (m[9] === '-' ? -1 : 1) * (Number(m[10]) * 60 + Number(m[11] ?? 0)) : 0;
  const at = new Date(Date.UTC(2000, 0, 1, Number(m[4]), Number(m[5]), Number(m[6]), Number((m[7] ?? '0').slice(0, 3).padEnd(3, '0'))));
  // Astronomical years: 1 BC is year 0.
  at.setUTCFullYear(m[12] ? 1 - Number(m[1]) : Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  return Number.isFinite(at.getTime()) ? at.getTime() - offset * 60_000 : 0;
}

const INT32_MAX = 2 ** 31 - 1;

/** The OCSF event of an audit record, its evidence under `unmapped`. */
export function ocsfEvent(e: OcsfEvidence): OcsfEvent {
  const r = e.record;
  const m = mappingOf(r.action);
  const cls = CLASSES[m.ocsf];
  const activityName = m.other ?? ACTIVITIES[m.ocsf][m.activity]!;
  const severity = severityId(r);
  return {
    ...cls,
    activity_id: m.activity,
    activity_name: activityName,
    type_uid: cls.class_uid * 100 + m.activity,
    type_name: `${cls.class_name}: ${ACTIVITIES[m.ocsf][m.activity]!}`,
    severity_id: severity,
    severity: SEVERITY[severity],
    ...status(r),
    time: ocsfTime(r.timestamp),
    message: message(r, m),
    metadata: {
      version: OCSF_SCHEMA_VERSION,
      product: PRODUCT,
      uid: String(r.id),
      correlation_uid: r.request_id,
      event_code: r.action,
      log_name: 'audit_log',
      original_time: r.timestamp,
      ...(e.seq !== null && e.seq <= INT32_MAX ? { sequence: e.seq } : {}),
    },
    actor: actor(r),
    src_endpoint: srcEndpoint(r.ip),
    ...(r.ip !== null || r.user_agent !== null ? { http_request: { uid: r.request_id, ...(r.user_agent !== null ? { user_agent: r.user_agent } : {}) } } : {}),
    ...classFields(r, m),
    unmapped: {
      id: r.id,
      seq: e.seq,
      leaf_hash: e.leaf_hash,
      ...(e.audit_path !== undefined ? { audit_path: e.audit_path } : {}),
      ...(e.tree_size !== undefined && e.seq !== null ? { tree_size: e.tree_size } : {}),
      // The metadata as the API shows it: what the fields above do not carry (a task's title, old and new values).
      metadata: r.metadata,
      sealed: e.sealed,
    },
  };
}

/**
 * A seal whose record row is gone (removed behind the service's back): the webhook sends it as
 * it is (webhook.sender.ts), so in OCSF as an API Activity of unknown kind, High, that says so,
 * with the seal's evidence.
 */
export function missingRecordEvent(recordId: number, seq: number, leafHash: string): OcsfEvent {
  const cls = CLASSES.api_activity;
  return {
    ...cls,
    activity_id: 0,
    activity_name: 'Unknown',
    type_uid: cls.class_uid * 100,
    type_name: `${cls.class_name}: Unknown`,
    severity_id: 4,
    severity: SEVERITY[4],
    status_id: 0,
    status: 'Unknown',
    time: Date.now(),
    message: `Sealed audit record ${recordId} (seq ${seq}) is missing from the database: run teamlog audit verify.`,
    metadata: { version: OCSF_SCHEMA_VERSION, product: PRODUCT, uid: String(recordId), log_name: 'audit_log', ...(seq <= INT32_MAX ? { sequence: seq } : {}) },
    actor: { app_name: 'Teamlog' },
    src_endpoint: { name: 'teamlog' },
    api: { operation: 'UNKNOWN' },
    unmapped: { id: recordId, seq, leaf_hash: leafHash, sealed: null },
  };
}
