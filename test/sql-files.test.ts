// The real SQL of every repository is committed in sql/<repository>.sql (npm run sql), so a
// review reads the statements as they are sent. This fails when a statement changed and its
// file was not regenerated, and when two declared statements have the same text.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { declaredStatements } from '../src/db/statements.js';
import { SQL_DIR, renderSqlFiles } from '../scripts/sql-files.js';

test('sql/ holds exactly the statements the source declares (run `npm run sql` after changing one)', async () => {
  const expected = await renderSqlFiles();
  const committed = readdirSync(SQL_DIR).filter((f) => f.endsWith('.sql')).sort();
  assert.deepEqual(committed, [...expected.keys()].sort(), 'one file per repository, no stale file');
  for (const [name, content] of expected) {
    assert.equal(readFileSync(path.join(SQL_DIR, name), 'utf8'), content, `sql/${name} is out of date: run npm run sql`);
  }
});

test('no statement text is declared twice', async () => {
  await renderSqlFiles();
  const byText = new Map<string, string[]>();
  for (const [name, { text }] of declaredStatements()) byText.set(text, [...(byText.get(text) ?? []), name]);
  const repeated = [...byText.values()].filter((names) => names.length > 1);
  assert.deepEqual(repeated, [], `the same statement under several names: ${JSON.stringify(repeated)}`);
});
