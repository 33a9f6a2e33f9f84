// npm run generate -w @teamlog/client: writes src/generated/teamlog-api.ts from the OpenAPI
// document of this checkout's service, started in this process on an in-memory PGlite (nothing
// to run beforehand), or from a running service's: `-- --url http://127.0.0.1:3000`.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config.js';
import { databaseSession, migrate } from '../../src/db/migrate.js';
import { createPgliteDatabase } from '../../src/db/pglite.js';
import { createLogger } from '../../src/logger.js';
import { createApp, createDeps } from '../../src/runtime.js';
import { TYPES_FILE, typesFrom } from './types.js';

async function servedDocument(): Promise<unknown> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-client-generate-'));
  const db = await createPgliteDatabase(undefined, () => {});
  try {
    await migrate(databaseSession(db));
    const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', JWT_SECRET: 'generate-'.padEnd(48, 'x') });
    const { app } = await createApp(createDeps(config, db, createLogger('silent')));
    try {
      const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
      if (res.statusCode !== 200) throw new Error(`GET /api/v1/openapi.json answered ${res.statusCode}`);
      return res.json();
    } finally {
      await app.close();
    }
  } finally {
    await db.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function fetchedDocument(base: string): Promise<unknown> {
  const res = await fetch(new URL('/api/v1/openapi.json', base));
  if (!res.ok) throw new Error(`${base}: GET /api/v1/openapi.json answered ${res.status}`);
  return res.json();
}

const urlAt = process.argv.indexOf('--url');
const document = urlAt === -1 ? await servedDocument() : await fetchedDocument(process.argv[urlAt + 1] ?? '');
const text = await typesFrom(document);
const file = fileURLToPath(TYPES_FILE);
let old: string | undefined;
try {
  old = readFileSync(file, 'utf8');
} catch {
  old = undefined;
}
if (old !== text) writeFileSync(file, text);
console.log(`${path.relative(process.cwd(), file)}: ${old === text ? 'unchanged' : 'written'}`);
