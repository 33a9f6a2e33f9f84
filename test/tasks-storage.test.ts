// How tasks are stored so that a status change stays cheap (migrations/0019): PostgreSQL makes
// an update heap-only (HOT: no index entries, the new row version on the same page) only when no
// index names a column the update changes, and only when the page has room. A status change
// sets status, version and updated_at; these tests fail when an index that names one of them
// comes back (a column, an expression or a partial index's predicate: each counts), or when
// the table loses the room its pages keep for new versions.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { addMember, createProject, createTask } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();

/** What a status change sets (tasks.repository.ts, update): status, and the version and time every change moves. */
const CHANGED_BY_A_STATUS_CHANGE = ['status', 'version', 'updated_at'];

interface IndexRow {
  name: string;
  columns: string[];
  expressions: string | null;
  predicate: string | null;
}

const tasksIndexes = () =>
  h.server.db.query<IndexRow>(
    `SELECT c.relname AS name,
            ARRAY(SELECT a.attname::text FROM unnest(i.indkey) AS k(attnum)
                   JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum) AS columns,
            pg_get_expr(i.indexprs, i.indrelid) AS expressions,
            pg_get_expr(i.indpred, i.indrelid) AS predicate
       FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE i.indrelid = 'tasks'::regclass
      ORDER BY c.relname`,
  );

test('no index of tasks names a column that a status change sets', async () => {
  const indexes = await tasksIndexes();
  // The indexes the list and the search need are there: the check below reads real rows.
  assert.deepEqual(indexes.map((i) => i.name), ['tasks_assignee_idx', 'tasks_pkey', 'tasks_project_idx', 'tasks_words_idx']);
  const names = (text: string | null, column: string) => text !== null && new RegExp(`\\b${column}\\b`).test(text);
  for (const index of indexes) {
    for (const column of CHANGED_BY_A_STATUS_CHANGE) {
      assert.ok(!index.columns.includes(column), `${index.name} has ${column} as a column`);
      assert.ok(!names(index.expressions, column), `${index.name} names ${column} in an expression: ${index.expressions}`);
      assert.ok(!names(index.predicate, column), `${index.name} names ${column} in its predicate: ${index.predicate}`);
    }
  }
});

test('tasks pages keep a tenth free for the new versions of their rows', async () => {
  const [row] = await h.server.db.query<{ options: string[] | null }>(`SELECT reloptions AS options FROM pg_class WHERE oid = 'tasks'::regclass`);
  assert.deepEqual(row?.options, ['fillfactor=90']);
});

test('a status filter still finds every task of that status, newest first, without its index', async () => {
  const owner = await h.newUser();
  const member = await h.newUser();
  const projectId = (await createProject(owner)).id;
  await addMember(owner, projectId, member.id);
  const ids: number[] = [];
  for (let i = 0; i < 6; i++) ids.push((await createTask(owner, projectId, { title: `storage ${i}` })).id);
  const started = ids.filter((_, i) => i % 2 === 1);
  for (const id of started) {
    const res = await member.client.put(`/api/v1/tasks/${id}/status`, { status: 'IN_PROGRESS' }, { token: member.token });
    assert.equal(res.status, 200, res.text);
  }
  const res = await member.client.get<{ data: Array<{ id: number; status: string }> }>(`/api/v1/tasks?project_id=${projectId}&status=IN_PROGRESS`, { token: member.token });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.body.data.map((t) => t.id), [...started].reverse());
  assert.ok(res.body.data.every((t) => t.status === 'IN_PROGRESS'));
});
