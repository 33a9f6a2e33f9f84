// What the audit export tests share (audit-export.test.ts over HTTP, audit-export-verify.test.ts
// on edited files, audit-export-cli.test.ts with `teamlog audit export`): the log they export,
// seeded with the values an export must carry through (user agents a spreadsheet would run,
// control characters, odd timestamps and metadata), and the readers that check an export's
// NDJSON and CSV. Each file seeds its own database with openExportLog in its own `before`.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { CSV_COLUMNS } from '../../src/modules/audit/evidence/export.csv.js';
import { verifyInclusion } from '../../src/tlog/merkle.js';
import { recordLeaf, type SealedRecord } from '../../src/modules/audit/evidence/record.sealed-form.js';
import { parseVerifierKey } from '../../src/tlog/signed-note.js';
import { settled } from './audit-log.js';
import type { CliDatabase } from './cli.js';
import { createUser, loginAdmin, type Session } from './client.js';
import { startTestServer, type TestDatabase, type TestServer } from './server.js';

export const EXPORT_FIELDS = ['id', 'actor_id', 'action', 'resource_type', 'resource_id', 'timestamp', 'result', 'metadata', 'ip', 'user_agent', 'request_id'];
export const REDACTED = '[redacted]';
const unique = () => randomBytes(4).toString('hex');

/** User agents a spreadsheet would run as formulas, and one that needs quoting. */
export const FORMULA_AGENTS = ['=HYPERLINK("http://evil.test","open me")', '+1+1', '-2-3', '@SUM(1,2)'];
export const QUOTED_AGENT = 'Mozilla/5.0 (X11; "quoted", comma)';
/** Request ids the service keeps (they are sane) that a spreadsheet would still read as formulas. */
export const FORMULA_REQUEST_IDS = [`-cmd-${unique()}`, `@cmd-${unique()}`];
/**
 * Records the owner appends with values the service's own writes rarely hold, for the sealed
 * form an export builds in SQL (export.stream.ts): timestamps on a whole second and just below the
 * next, null columns, escapes, characters beyond ASCII, numbers that JSON writes in more than
 * one way, and a string that holds the personal-data marker.
 */
export const ODD_RECORDS: Array<{ timestamp: string; actor: boolean; resource_id: number | null; metadata: unknown; ip: string | null; user_agent: string | null; request_id: string }> = [
  { timestamp: '2026-01-02 03:04:05+00', actor: false, resource_id: null, metadata: {}, ip: null, user_agent: null, request_id: `odd-${unique()}` },
  {
    timestamp: '2026-01-02 03:04:05.999999+00', actor: true, resource_id: 9007199254740991,
    metadata: { 'ключ': 'значение 😀 \u2028', nested: { a: [1, 1.5, -0.25, 1e21, 2 ** 64, true, null, 'x"y\\z'] }, empty: '', '"$personal"': 'not a ref' },
    ip: '::1', user_agent: 'tab\there "quoted" back\\slash é \b\f\n\u0001\u001f\u007f </script>', request_id: `odd-"quoted"-${unique()}`,
  },
  // Years the service never writes, which the API shows as PostgreSQL prints them: one BC (to_char alone would write it as year 44).
  { timestamp: '0044-03-15 12:00:00+00 BC', actor: false, resource_id: 44, metadata: {}, ip: null, user_agent: null, request_id: `odd-${unique()}` },
  { timestamp: '10000-01-01 00:00:00+00', actor: false, resource_id: 10000, metadata: {}, ip: null, user_agent: null, request_id: `odd-${unique()}` },
  { timestamp: 'infinity', actor: false, resource_id: null, metadata: {}, ip: null, user_agent: null, request_id: `odd-${unique()}` },
  { timestamp: '0999-12-31 23:59:59.123456+00', actor: false, resource_id: 999, metadata: {}, ip: null, user_agent: null, request_id: `odd-${unique()}` },
  { timestamp: '2026-01-02 03:04:05.0005+00', actor: true, resource_id: 0, metadata: { note: 'text with "$personal" inside', email: { $personal: 'looks like a ref but names nothing' } }, ip: '10.0.0.1', user_agent: '', request_id: `odd-${unique()}` },
];

/** Not possible through HTTP (a header value holds no CR; a leading tab is trimmed): appended by the owner. */
export const CONTROL_AGENTS = [`\ttab-${unique()}`, `\rcr-${unique()}`];

export interface RecordLine {
  type: 'record';
  record: SealedRecord;
  sealed: SealedRecord;
  seq: number | null;
  leaf_hash: string | null;
  audit_path: string[] | null;
}
export interface CheckpointLine {
  type: 'checkpoint';
  tree_size: number;
  root_hash?: string;
  note: string | null;
  export: { filters: Record<string, unknown>; records: number; records_with_proof: number; records_without_proof: number };
}
export interface Export { lines: string[]; records: RecordLine[]; checkpoint: CheckpointLine }

export function parseNdjsonExport(text: string): Export {
  assert.ok(text.endsWith('\n'), 'an NDJSON export ends with a newline');
  const lines = text.slice(0, -1).split('\n');
  const parsed = lines.map((l) => JSON.parse(l) as RecordLine | CheckpointLine);
  const checkpoint = parsed.pop() as CheckpointLine;
  assert.equal(checkpoint.type, 'checkpoint', 'the last line is the checkpoint');
  for (const p of parsed) assert.equal(p.type, 'record');
  return { lines, records: parsed as RecordLine[], checkpoint };
}

/**
 * What every NDJSON export must be: records with a proof first, in seq order, each proof
 * leading from the record's sealed form to the checkpoint's root; then the records the
 * checkpoint does not cover yet (seq, leaf_hash and audit_path null); the checkpoint last,
 * counting them.
 */
export function checkStructure(exp: Export): { sealed: RecordLine[]; pending: RecordLine[] } {
  const { records, checkpoint } = exp;
  const firstPending = records.findIndex((r) => r.seq === null);
  const sealed = firstPending < 0 ? records : records.slice(0, firstPending);
  const pending = firstPending < 0 ? [] : records.slice(firstPending);
  const root = checkpoint.root_hash ? Buffer.from(checkpoint.root_hash, 'base64') : undefined;
  let lastSeq = -1;
  for (const r of records) {
    assert.deepEqual(Object.keys(r).sort(), ['audit_path', 'leaf_hash', 'record', 'sealed', 'seq', 'type']);
    assert.deepEqual(Object.keys(r.record).sort(), [...EXPORT_FIELDS].sort());
    assert.deepEqual(Object.keys(r.sealed).sort(), [...EXPORT_FIELDS].sort());
    assert.equal(r.record.id, r.sealed.id);
  }
  for (const r of sealed) {
    assert.equal(typeof r.seq, 'number');
    assert.ok(r.seq! > lastSeq && r.seq! < checkpoint.tree_size, `seq ${r.seq} in order and in the checkpoint's tree`);
    lastSeq = r.seq!;
    const leaf = recordLeaf(r.sealed);
    assert.equal(r.leaf_hash, leaf.toString('base64'));
    assert.ok(Array.isArray(r.audit_path));
    assert.ok(root && verifyInclusion(leaf, r.seq!, checkpoint.tree_size, r.audit_path!.map((h) => Buffer.from(h, 'base64')), root), `the proof of record ${r.record.id}`);
  }
  for (const r of pending) {
    assert.equal(r.seq, null, 'no record with a proof after one without');
    assert.equal(r.leaf_hash, null);
    assert.equal(r.audit_path, null);
  }
  assert.equal(checkpoint.export.records, records.length);
  assert.equal(checkpoint.export.records_with_proof, sealed.length);
  assert.equal(checkpoint.export.records_without_proof, pending.length);
  return { sealed, pending };
}

/** RFC 4180, strictly: a quote only opens a cell, rows end with CRLF, a bare CR or LF only inside quotes. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (quoted) {
      if (c !== '"') cell += c;
      else if (text[i + 1] === '"') {
        cell += '"';
        i++;
      } else {
        quoted = false;
        assert.ok(text[i + 1] === ',' || text[i + 1] === '\r', `a closing quote ends its cell (at ${i})`);
      }
    } else if (c === '"') {
      assert.equal(cell, '', `a quote inside an unquoted cell (at ${i})`);
      quoted = true;
    } else if (c === ',') {
      row.push(cell);
      cell = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
      i++;
    } else {
      assert.ok(c !== '\r' && c !== '\n', `a line break in an unquoted cell (at ${i})`);
      cell += c;
    }
    i++;
  }
  assert.ok(!quoted && cell === '' && row.length === 0, 'the last row ends with CRLF');
  return rows;
}

/** Rows of a CSV export as objects by column. */
export function csvRecords(text: string): Array<Record<string, string>> {
  const [header, ...rows] = parseCsv(text);
  assert.deepEqual(header, CSV_COLUMNS);
  return rows.map((r) => {
    assert.equal(r.length, CSV_COLUMNS.length);
    return Object.fromEntries(CSV_COLUMNS.map((c, i) => [c, r[i]!]));
  });
}

/** GET /audit-logs/export as it comes (the test Client would parse the NDJSON as JSON). */
export async function fetchExport(server: TestServer, session: Session, query = ''): Promise<{ type: string; requestId: string; text: string }> {
  const res = await fetch(`${server.url}/api/v1/audit-logs/export${query ? `?${query}` : ''}`, {
    headers: { authorization: `Bearer ${session.token}`, 'x-forwarded-for': session.client.ip },
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return { type: res.headers.get('content-type') ?? '', requestId: res.headers.get('x-request-id') ?? '', text };
}

/** A seeded log on a test server, as openExportLog leaves it. */
export interface ExportLog {
  database: TestDatabase;
  /** Checkpoints every 100 ms, so that settled() returns soon. */
  server: TestServer;
  admin: Session;
  /** A USER, refused CREATE_USER twice (two DENIED records of hers). */
  alice: Session;
  /** Projects made with FORMULA_AGENTS, QUOTED_AGENT then FORMULA_REQUEST_IDS, in that order. */
  projectIds: number[];
  /** The ids of ODD_RECORDS, in their order. */
  oddIds: number[];
  /** The service's signing key as GET /audit-logs/public-keys gives it, PEM (also written to key.pem in the data directory) and note verifier key. */
  publicKeyPem: string;
  verifierKey: string;
  /** The verifier key's name (the log's origin). */
  origin: string;
  /** Path of a file in the CLI's data directory. */
  file(name: string): string;
  /** Stops the server and closes the database (PGlite: so that the CLI may open it). */
  close(): Promise<void>;
}

/**
 * A server on the file's CLI database, and on it the log the export tests read: alice refused
 * twice, projects made with the user agents and request ids above, two tasks, CONTROL_AGENTS
 * and ODD_RECORDS appended by the owner; settled (every record sealed and in a checkpoint).
 */
export async function openExportLog(world: CliDatabase): Promise<ExportLog> {
  const database = await world.openDatabase();
  const server = await startTestServer({ database, env: { AUDIT_CHECKPOINT_INTERVAL_MS: '100' } });
  const admin = await loginAdmin(server);
  const alice = await createUser(server, admin);
  const projectIds: number[] = [];
  const oddIds: number[] = [];
  // Refusals: DENIED CREATE_USER by alice.
  for (let i = 0; i < 2; i++) {
    const res = await alice.client.post('/api/v1/users', { email: `nope-${unique()}@test.local`, name: 'Nope', password: 'long-enough-pw', role: 'USER' }, { token: alice.token });
    assert.equal(res.status, 403, res.text);
  }
  const project = async (headers: Record<string, string>) => {
    const res = await admin.client.post('/api/v1/projects', { name: `Export ${unique()}` }, { token: admin.token, headers });
    assert.equal(res.status, 201, res.text);
    projectIds.push(res.body.id);
  };
  for (const ua of [...FORMULA_AGENTS, QUOTED_AGENT]) await project({ 'user-agent': ua });
  for (const id of FORMULA_REQUEST_IDS) await project({ 'x-request-id': id });
  for (let i = 0; i < 2; i++) {
    const res = await admin.client.post('/api/v1/tasks', { project_id: projectIds[0], title: `Task ${unique()}` }, { token: admin.token });
    assert.equal(res.status, 201, res.text);
  }
  for (const ua of CONTROL_AGENTS) {
    await server.owner.query(
      `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
       VALUES ($1, 'CREATE_PROJECT', 'PROJECT', $2, 'SUCCESS', '{}', '127.0.0.1', $3, $4)`,
      [admin.id, projectIds[0], ua, `owner-${unique()}`],
    );
  }
  // The stamp trigger would set each timestamp to the clock: off for these inserts alone.
  await server.owner.query('ALTER TABLE audit_log DISABLE TRIGGER audit_log_stamp');
  for (const r of ODD_RECORDS) {
    const [row] = await server.owner.query<{ id: number }>(
      `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, "timestamp", result, metadata, ip, user_agent, request_id)
       VALUES ($1, 'UPDATE_TASK', 'TASK', $2, $3, 'SUCCESS', $4, $5, $6, $7) RETURNING id`,
      [r.actor ? admin.id : null, r.resource_id, r.timestamp, JSON.stringify(r.metadata), r.ip, r.user_agent, r.request_id],
    );
    oddIds.push(row!.id);
  }
  await server.owner.query('ALTER TABLE audit_log ENABLE TRIGGER audit_log_stamp');
  await settled(server, admin);
  const keys = await admin.client.get<Array<{ public_key: string; note_verifier_key: string }>>('/api/v1/audit-logs/public-keys', { token: admin.token });
  assert.equal(keys.status, 200);
  const publicKeyPem = keys.body[0]!.public_key;
  const verifierKey = keys.body[0]!.note_verifier_key;
  const file = (name: string) => path.join(world.dataDir, name);
  writeFileSync(file('key.pem'), publicKeyPem);
  let closed = false;
  return {
    database, server, admin, alice, projectIds, oddIds, publicKeyPem, verifierKey, origin: parseVerifierKey(verifierKey).name, file,
    async close() {
      if (closed) return;
      closed = true;
      await server.close();
      await database.drop();
    },
  };
}

/**
 * The timestamps of the seeded projects' CREATE_PROJECT records, second and last but one: a
 * from/to window that holds some of the seeded records and not all.
 */
export async function projectWindow(log: ExportLog): Promise<{ t1: string; t2: string }> {
  const stamps = await log.server.owner.query<{ t: string }>(
    `SELECT "timestamp" AS t FROM audit_log WHERE resource_id = ANY($1) AND action = 'CREATE_PROJECT' AND resource_type = 'PROJECT' ORDER BY id`,
    [log.projectIds],
  );
  return { t1: stamps[1]!.t, t2: stamps[stamps.length - 2]!.t };
}

/** The filter of the HTTP tests' "together" export (admin's projects and tasks from t1 on), as a query string. */
export const togetherQuery = (adminId: number, t1: string) =>
  `actor_id=${adminId}&action=CREATE_PROJECT&action=CREATE_TASK&result=SUCCESS&from=${encodeURIComponent(t1)}`;
