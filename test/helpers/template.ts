// A migrated template database, made once per test pass (scripts/test.mjs) so that each test
// file starts from a copy instead of running every migration itself: on PGlite an archive of
// the data directory (PGlite's dumpDataDir), loaded by each file; on PostgreSQL a database that
// each file's database is created from (CREATE DATABASE … TEMPLATE). Migrating took 5 s per
// file on PGlite and 1 s on PostgreSQL, on the 2-core VM under the suite's load; a copy takes
// about 1 s and 0.2 s. Each file still runs the migrations over its copy (none pending: a check
// of the applied ones' checksums), so a template that does not match the checkout fails loudly.
//
//   node --import tsx test/helpers/template.ts pglite <archive file>
//   node --import tsx test/helpers/template.ts postgres <database name>
//   node --import tsx test/helpers/template.ts drop-postgres <database name>
import { writeFileSync } from 'node:fs';
import { databaseSession, migrate, migratePostgres } from '../../src/db/migrate.js';
import { createPgliteDatabase } from '../../src/db/pglite.js';
import { adminQuery, databaseUrl, withAdminClient } from './postgres.js';

const SAFE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export async function makePgliteTemplate(file: string): Promise<void> {
  const db = await createPgliteDatabase(undefined, () => {});
  try {
    await migrate(databaseSession(db));
    writeFileSync(file, Buffer.from(await (await db.dump()).arrayBuffer()));
  } finally {
    await db.close();
  }
}

export async function makePostgresTemplate(name: string): Promise<void> {
  if (!SAFE_NAME.test(name)) throw new Error(`not a database name: ${name}`);
  await withAdminClient(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.query(`CREATE DATABASE ${name}`);
  });
  await migratePostgres(databaseUrl(name));
}

export async function dropPostgresTemplate(name: string): Promise<void> {
  if (!SAFE_NAME.test(name)) throw new Error(`not a database name: ${name}`);
  await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [what, target] = process.argv.slice(2);
  if (!target) throw new Error('usage: template.ts pglite <file> | postgres <name> | drop-postgres <name>');
  if (what === 'pglite') await makePgliteTemplate(target);
  else if (what === 'postgres') await makePostgresTemplate(target);
  else if (what === 'drop-postgres') await dropPostgresTemplate(target);
  else throw new Error(`unknown: ${what}`);
}
