// What the users tests (users-*.test.ts) look at besides the API's answers: the audit records
// about a user, the active ADMINs, and requests queued behind a lock. Bound to the file's own
// harness: `const { recordsOn, … } = userChecks(h)`.
import assert from 'node:assert/strict';
import { auditRows } from './client.js';
import { uniqueWord, type AuditRecordBody, type PageBody } from './factories.js';
import type { TestHarness } from './harness.js';

export interface UserBody {
  id: number;
  email?: string;
  name: string;
  role: 'USER' | 'ADMIN';
  active: boolean;
  created_at: string;
  updated_at: string;
}

export const uniqueEmail = (prefix = 'u') => `${prefix}-${uniqueWord()}@test.local`;

/** A metadata value that is a reference to stored personal data ({ $personal: ref }). */
export const isPersonalRef = (v: unknown) =>
  typeof v === 'object' && v !== null && typeof (v as Record<string, unknown>).$personal === 'string';

export function userChecks(h: TestHarness) {
  /** Audit records about one user of one action, read through the owner connection. */
  const recordsOn = (userId: number, action: string, result?: string) =>
    result === undefined
      ? auditRows(h.server, 'resource_type = $1 AND resource_id = $2 AND action = $3', ['USER', userId, action])
      : auditRows(h.server, 'resource_type = $1 AND resource_id = $2 AND action = $3 AND result = $4', ['USER', userId, action, result]);

  /** Every audit record that names a user as actor or resource. */
  const recordsNaming = (userId: number) => auditRows(h.server, '(actor_id = $1 OR (resource_type = $2 AND resource_id = $1))', [userId, 'USER']);

  /** The records as the API shows them to an ADMIN (personal data resolved). */
  async function auditApi(query: string): Promise<AuditRecordBody[]> {
    const res = await h.admin.client.get<PageBody<AuditRecordBody>>(`/api/v1/audit-logs?${query}`, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
    return res.body.data;
  }

  async function activeAdminIds(): Promise<number[]> {
    const rows = await h.server.owner.query<{ id: number }>(`SELECT id FROM users WHERE role = 'ADMIN' AND active ORDER BY id`);
    return rows.map((r) => Number(r.id));
  }

  /** Demotes every active ADMIN but the first one, so that it is the last active ADMIN. */
  async function leaveOnlyFirstAdmin(): Promise<void> {
    for (const id of await activeAdminIds()) {
      if (id === h.admin.id) continue;
      const res = await h.admin.client.put(`/api/v1/users/${id}/role`, { role: 'USER' }, { token: h.admin.token });
      assert.equal(res.status, 200, res.text);
    }
    assert.deepEqual(await activeAdminIds(), [h.admin.id]);
  }

  /** Waits (a bounded while) until `n` backends of this database wait for a lock. */
  async function waitForLockWaiters(n: number): Promise<void> {
    for (let i = 0; i < 400; i++) {
      const rows = await h.server.owner.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      if (rows[0]!.n >= n) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail(`${n} requests never queued behind the held rows`);
  }

  return { recordsOn, recordsNaming, auditApi, activeAdminIds, leaveOnlyFirstAdmin, waitForLockWaiters };
}
