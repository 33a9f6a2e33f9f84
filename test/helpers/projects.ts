// What the projects tests (projects-*.test.ts) look at besides the API's answers: a project's
// audit records, its stored row and members, and an audit insert made to fail. Bound to the
// file's own harness: `const { projectRecords, … } = projectChecks(h)`.
import { auditRows, type Session } from './client.js';
import { uniqueWord, type Problem, type ProjectBody } from './factories.js';
import type { TestHarness } from './harness.js';

export function projectChecks(h: TestHarness) {
  /** Audit records about one project, oldest first. */
  const projectRecords = (projectId: number, action?: string) =>
    action === undefined
      ? auditRows(h.server, `resource_type = 'PROJECT' AND resource_id = $1`, [projectId])
      : auditRows(h.server, `resource_type = 'PROJECT' AND resource_id = $1 AND action = $2`, [projectId, action]);

  async function projectRow(id: number) {
    const rows = await h.server.owner.query<{ name: string; description: string; version: number; updated_at: string }>(
      'SELECT name, description, version, updated_at FROM projects WHERE id = $1',
      [id],
    );
    return rows[0];
  }

  async function memberRoleOf(projectId: number, userId: number): Promise<string | undefined> {
    const rows = await h.server.owner.query<{ role: string }>('SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2', [projectId, userId]);
    return rows[0]?.role;
  }

  async function getProject(by: Session, id: number) {
    return by.client.get<ProjectBody & Problem>(`/api/v1/projects/${id}`, { token: by.token });
  }

  /**
   * A test-only trigger that makes the audit insert of one action fail, so that the change it
   * describes must roll back with it (docs/api.md 5.2). Dropped afterwards whatever happens.
   */
  async function withFailingAudit<T>(action: string, fn: () => Promise<T>): Promise<T> {
    const name = `test_fail_audit_${uniqueWord()}`;
    await h.server.owner.query(
      `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF NEW.action = '${action}' THEN RAISE EXCEPTION 'forced audit failure'; END IF;
         RETURN NEW;
       END $$`,
    );
    await h.server.owner.query(`CREATE TRIGGER ${name} BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION ${name}()`);
    try {
      return await fn();
    } finally {
      await h.server.owner.query(`DROP TRIGGER ${name} ON audit_log`);
      await h.server.owner.query(`DROP FUNCTION ${name}()`);
    }
  }

  return { projectRecords, projectRow, memberRoleOf, getProject, withFailingAudit };
}
