// The audit log's vocabulary (docs/api.md 5.2): what a record may say was done, to what, with what
// result. A module of its own, imported by the writer, the search parser and the schemas, so
// that none of them has to import another to know the words.
export const AUDIT_ACTIONS = [
  'CREATE_USER', 'DELETE_USER', 'DEACTIVATE_USER', 'ACTIVATE_USER', 'CHANGE_USER_ROLE',
  'LOGIN_SUCCESS', 'LOGIN_FAILURE', 'LOGOUT', 'PASSWORD_CHANGED',
  'CREATE_PROJECT', 'DELETE_PROJECT', 'ADD_PROJECT_MEMBER', 'REMOVE_PROJECT_MEMBER',
  'CREATE_TASK', 'DELETE_TASK', 'ASSIGN_TASK', 'CHANGE_TASK_STATUS',
  'UPDATE_USER_EMAIL', 'CHANGE_PROJECT_MEMBER_ROLE', 'SESSION_REVOKED', 'EXPORT_AUDIT_LOG',
  'REDACT_PERSONAL_DATA',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export const RESOURCE_TYPES = ['USER', 'PROJECT', 'TASK', 'AUDIT_LOG'] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];

export const AUDIT_RESULTS = ['SUCCESS', 'FAILURE', 'DENIED'] as const;
export type AuditResult = (typeof AUDIT_RESULTS)[number];

