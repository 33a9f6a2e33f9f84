// Who the actors of audit records are, for the console's names (GET /audit-logs?include=actors,
// the top actors of /audit-logs/stats): the users as they are now, and for a user deleted since,
// the email their DELETE_USER record holds (a personal value: audit.service.ts reads it back).
import type { Queryable } from '../../db/database.js';
import { query, statements } from '../../db/statements.js';

const S = statements('audit-actors', {
  users: 'SELECT id, email, name FROM users WHERE id = ANY ($1::bigint[])',
  // The newest successful deletion of each user asked for, by audit_log_resource_idx; its
  // metadata names the email the user had (users.service.ts), a personal value's ref.
  deleted: `SELECT DISTINCT ON (resource_id) resource_id AS id, metadata
   FROM audit_log
   WHERE resource_type = 'USER' AND resource_id = ANY ($1::bigint[]) AND action = 'DELETE_USER' AND result = 'SUCCESS'
   ORDER BY resource_id, id DESC`,
});

export const findActorUsers = (q: Queryable, ids: number[]) => query<{ id: number; email: string; name: string }>(q, S.users, [ids]);

export const findActorDeletions = (q: Queryable, ids: number[]) => query<{ id: number; metadata: Record<string, unknown> }>(q, S.deleted, [ids]);
