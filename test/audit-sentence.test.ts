// The audit console's one sentence per record (web/console/sentence.ts): a pure function, checked
// here for every action of the contract's vocabulary (src/domain/audit-vocabulary.ts), with the
// metadata the service writes for it, refused and failed records, a null actor, and the names a
// page knows (its actors, and the titles other records gave a resource).
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { build } from 'esbuild';
import { AUDIT_ACTIONS, type AuditAction } from '../src/domain/audit-vocabulary.js';
import type { Names, RecordFacts } from '../web/console/sentence.js';

// The module as the page gets it: bundled by esbuild from web/console/ (which the suite's
// compiled mirror, scripts/build-tests.mjs, leaves as TypeScript), and imported from its text.
const bundled = await build({
  entryPoints: [fileURLToPath(new URL('../web/console/sentence.ts', import.meta.url))],
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  write: false,
  logLevel: 'warning',
});
const { actorName, nameInMetadata, resourceName, sentence } = (await import(
  `data:text/javascript;base64,${Buffer.from(bundled.outputFiles[0]!.text).toString('base64')}`
)) as typeof import('../web/console/sentence.js');

const names: Names = {
  actors: { '1': { email: 'admin@example.com', name: 'Ada Admin' }, '7': { email: 'bob@example.com', name: 'Bob Builder' }, '9': { email: 'noname@example.com', name: '' } },
  resources: new Map([['TASK/62', 'Fix login'], ['PROJECT/3', 'Apollo']]),
};

const rec = (action: string, resource: [string, number | null], metadata: Record<string, unknown> = {}, extra: Partial<RecordFacts> = {}): RecordFacts => ({
  actor_id: 1, action, resource_type: resource[0], resource_id: resource[1], result: 'SUCCESS', metadata, ...extra,
});

/** Each action, as the service records it (src/modules/*), and the sentence it reads as. */
const EXPECTED: Record<AuditAction, [RecordFacts, string]> = {
  CREATE_USER: [rec('CREATE_USER', ['USER', 20], { email: 'carol@example.com', role: 'USER' }), 'Ada Admin (admin@example.com) created the user carol@example.com as USER.'],
  DELETE_USER: [rec('DELETE_USER', ['USER', 20], { email: 'carol@example.com', role: 'USER' }), 'Ada Admin (admin@example.com) deleted the user carol@example.com.'],
  DEACTIVATE_USER: [rec('DEACTIVATE_USER', ['USER', 7]), 'Ada Admin (admin@example.com) deactivated Bob Builder (bob@example.com).'],
  ACTIVATE_USER: [rec('ACTIVATE_USER', ['USER', 21]), 'Ada Admin (admin@example.com) reactivated user 21.'],
  CHANGE_USER_ROLE: [rec('CHANGE_USER_ROLE', ['USER', 7], { oldRole: 'USER', newRole: 'ADMIN' }), 'Ada Admin (admin@example.com) changed the role of Bob Builder (bob@example.com) from USER to ADMIN.'],
  LOGIN_SUCCESS: [rec('LOGIN_SUCCESS', ['USER', 7], {}, { actor_id: 7 }), 'Bob Builder (bob@example.com) signed in.'],
  LOGIN_FAILURE: [rec('LOGIN_FAILURE', ['USER', null], { email: 'mallory@example.com', reason: 'unknown_email' }, { actor_id: null, result: 'FAILURE' }), 'Someone failed to sign in as mallory@example.com (unknown email).'],
  LOGOUT: [rec('LOGOUT', ['USER', 9], { sessionId: 'x' }, { actor_id: 9 }), 'noname@example.com signed out.'],
  PASSWORD_CHANGED: [rec('PASSWORD_CHANGED', ['USER', 7], { revokedSessions: 2 }, { actor_id: 7 }), 'Bob Builder (bob@example.com) changed their password, ending 2 other sessions.'],
  CREATE_PROJECT: [rec('CREATE_PROJECT', ['PROJECT', 4], { name: 'Gemini' }), 'Ada Admin (admin@example.com) created the project \u201cGemini\u201d.'],
  DELETE_PROJECT: [rec('DELETE_PROJECT', ['PROJECT', 3], { name: 'Apollo', taskCount: 1 }), 'Ada Admin (admin@example.com) deleted the project \u201cApollo\u201d and its 1 task.'],
  ADD_PROJECT_MEMBER: [rec('ADD_PROJECT_MEMBER', ['PROJECT', 3], { userId: 7, role: 'MEMBER' }), 'Ada Admin (admin@example.com) added Bob Builder (bob@example.com) to the project \u201cApollo\u201d as MEMBER.'],
  REMOVE_PROJECT_MEMBER: [rec('REMOVE_PROJECT_MEMBER', ['PROJECT', 5], { userId: 30, role: 'MEMBER' }), 'Ada Admin (admin@example.com) removed user 30 from project 5.'],
  CHANGE_PROJECT_MEMBER_ROLE: [
    rec('CHANGE_PROJECT_MEMBER_ROLE', ['PROJECT', 3], { userId: 7, oldRole: 'MEMBER', newRole: 'OWNER' }),
    'Ada Admin (admin@example.com) changed the role of Bob Builder (bob@example.com) in the project \u201cApollo\u201d from MEMBER to OWNER.',
  ],
  CREATE_TASK: [rec('CREATE_TASK', ['TASK', 63], { projectId: 3, title: 'Ship it', assigneeId: null }), 'Ada Admin (admin@example.com) created the task \u201cShip it\u201d.'],
  DELETE_TASK: [rec('DELETE_TASK', ['TASK', 62], { projectId: 3, title: 'Fix login' }), 'Ada Admin (admin@example.com) deleted the task \u201cFix login\u201d.'],
  ASSIGN_TASK: [rec('ASSIGN_TASK', ['TASK', 62], { oldAssigneeId: null, newAssigneeId: 7 }), 'Ada Admin (admin@example.com) assigned the task \u201cFix login\u201d to Bob Builder (bob@example.com).'],
  CHANGE_TASK_STATUS: [rec('CHANGE_TASK_STATUS', ['TASK', 62], { oldStatus: 'TODO', newStatus: 'IN_PROGRESS' }), 'Ada Admin (admin@example.com) moved the task \u201cFix login\u201d from TODO to IN_PROGRESS.'],
  UPDATE_USER_EMAIL: [rec('UPDATE_USER_EMAIL', ['USER', 22], { oldEmail: 'old@example.com', newEmail: 'new@example.com' }), 'Ada Admin (admin@example.com) changed the email of old@example.com to new@example.com.'],
  SESSION_REVOKED: [
    rec('SESSION_REVOKED', ['USER', 7], { reason: 'refresh_reuse', sessionId: 's' }, { actor_id: 7 }),
    'Bob Builder (bob@example.com) had a session ended because its refresh token was used twice (possible theft).',
  ],
  EXPORT_AUDIT_LOG: [rec('EXPORT_AUDIT_LOG', ['AUDIT_LOG', null], { format: 'csv', filters: { q: 'action:LOGOUT' } }), 'Ada Admin (admin@example.com) exported the audit log as CSV.'],
  REDACT_PERSONAL_DATA: [rec('REDACT_PERSONAL_DATA', ['USER', 7], { valuesErased: 3 }, { actor_id: null }), 'The command line erased the personal data of Bob Builder (bob@example.com) (3 values).'],
};

test('every action of the vocabulary reads as one sentence', () => {
  assert.deepEqual(Object.keys(EXPECTED).sort(), [...AUDIT_ACTIONS].sort());
  for (const action of AUDIT_ACTIONS) {
    const [record, expected] = EXPECTED[action];
    assert.equal(sentence(record, names), expected, action);
  }
});

test('a refused action says what was tried, and that it was refused', () => {
  assert.equal(
    sentence(rec('DELETE_PROJECT', ['PROJECT', 3], {}, { actor_id: 7, result: 'DENIED' }), names),
    'Bob Builder (bob@example.com) tried to delete the project \u201cApollo\u201d, and was refused.',
  );
  // A refused task creation names the project it was aimed at.
  assert.equal(sentence(rec('CREATE_TASK', ['PROJECT', 3], {}, { result: 'DENIED' }), names), 'Ada Admin (admin@example.com) tried to create a task in the project \u201cApollo\u201d, and was refused.');
  assert.equal(sentence(rec('CREATE_USER', ['USER', null], {}, { actor_id: 7, result: 'DENIED' }), names), 'Bob Builder (bob@example.com) tried to create a user, and was refused.');
  assert.equal(sentence(rec('PASSWORD_CHANGED', ['USER', 7], { reason: 'wrong_password' }, { actor_id: 7, result: 'DENIED' }), names), 'Bob Builder (bob@example.com) tried to change their password, and was refused.');
});

test('names: the actor by name and email, a null actor, a resource from metadata, from another record, or by its id', () => {
  assert.equal(actorName(rec('CREATE_USER', ['USER', 1], {}, { actor_id: null }), names), 'The command line');
  assert.equal(actorName(rec('LOGIN_SUCCESS', ['USER', 44], {}, { actor_id: 44 }), names), 'user 44');
  assert.equal(resourceName(rec('CHANGE_TASK_STATUS', ['TASK', 62]), names), 'the task \u201cFix login\u201d');
  assert.equal(resourceName(rec('CHANGE_TASK_STATUS', ['TASK', 99]), names), 'task 99');
  assert.equal(resourceName(rec('ADD_PROJECT_MEMBER', ['PROJECT', 3], { userId: 7 }), names), 'the project \u201cApollo\u201d');
  assert.equal(resourceName(rec('CREATE_USER', ['USER', 50], { email: '[redacted]' }), names), '[redacted]');
  assert.equal(resourceName(rec('EXPORT_AUDIT_LOG', ['AUDIT_LOG', null]), names), 'the audit log');
  assert.deepEqual(nameInMetadata(rec('CREATE_TASK', ['TASK', 63], { title: 'Ship it' })), ['TASK/63', 'Ship it']);
  assert.deepEqual(nameInMetadata(rec('CREATE_PROJECT', ['PROJECT', 4], { name: 'Gemini' })), ['PROJECT/4', 'Gemini']);
  assert.equal(nameInMetadata(rec('CHANGE_TASK_STATUS', ['TASK', 63], {})), undefined);
  // An action this page does not know yet still reads as a sentence.
  assert.equal(sentence(rec('ARCHIVE_PROJECT', ['PROJECT', 3]), names), 'Ada Admin (admin@example.com) did ARCHIVE_PROJECT on the project \u201cApollo\u201d.');
});
