// Exporting the audit log (docs/api.md 4, GET /audit-logs/export; docs/audit-integrity.md §5) and
// checking an export offline: NDJSON with each record's seq, leaf hash and inclusion proof and
// the signed checkpoint last, CSV for spreadsheets (with formula-looking cells defused), the
// same from `teamlog audit export`, one EXPORT_AUDIT_LOG record per export, and
// `teamlog audit verify --file` accepting a genuine export and refusing an edited one.
//
// The file keeps one database for all its tests: an embedded PGlite under DATA_DIR, or a
// PostgreSQL test database. The HTTP tests run on a server on it; the CLI tests run once that
// server has stopped (PGlite allows one process at a time), as child processes on the same data.
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { AuditFilters } from '../src/modules/audit/audit.repository.js';
import { CSV_COLUMNS, csvCell, exportAuditLog } from '../src/modules/audit/integrity/export.js';
import { verifyInclusion } from '../src/modules/audit/integrity/merkle.js';
import { canonicalize } from '../src/modules/audit/integrity/jcs.js';
import {
  CANONICAL_HEAD_SQL, CANONICAL_METADATA_SQL, CANONICAL_TAIL_SQL, canonicalLeaf, recordLeaf, type SealedRecord,
} from '../src/modules/audit/integrity/sealed-form.js';
import { ed25519PublicKeyRaw, formatVerifierKey, parseVerifierKey, publicKeyPem, type NoteVerifier } from '../src/modules/audit/integrity/signed-note.js';
import { verifyExportFile } from '../src/modules/audit/integrity/verify-export.js';
import { settled } from './helpers/audit-log.js';
import { useCliDatabase, type CliResult } from './helpers/cli.js';
import { createUser, loginAdmin, type Session } from './helpers/client.js';
import { startTestServer, TEST_SIGNING_KEY, type TestDatabase, type TestServer } from './helpers/server.js';

const FIELDS = ['id', 'actor_id', 'action', 'resource_type', 'resource_id', 'timestamp', 'result', 'metadata', 'ip', 'user_agent', 'request_id'];
const REDACTED = '[redacted]';
const unique = () => randomBytes(4).toString('hex');

/** User agents a spreadsheet would run as formulas, and one that needs quoting. */
const FORMULA_AGENTS = ['=HYPERLINK("http://evil.test","open me")', '+1+1', '-2-3', '@SUM(1,2)'];
const QUOTED_AGENT = 'Mozilla/5.0 (X11; "quoted", comma)';
/** Request ids the service keeps (they are sane) that a spreadsheet would still read as formulas. */
const FORMULA_REQUEST_IDS = [`-cmd-${unique()}`, `@cmd-${unique()}`];
/**
 * Records the owner appends with values the service's own writes rarely hold, for the sealed
 * form an export builds in SQL (export.ts): timestamps on a whole second and just below the
 * next, null columns, escapes, characters beyond ASCII, numbers that JSON writes in more than
 * one way, and a string that holds the personal-data marker.
 */
const ODD_RECORDS: Array<{ timestamp: string; actor: boolean; resource_id: number | null; metadata: unknown; ip: string | null; user_agent: string | null; request_id: string }> = [
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
const CONTROL_AGENTS = [`\ttab-${unique()}`, `\rcr-${unique()}`];

interface RecordLine {
  type: 'record';
  record: SealedRecord;
  sealed: SealedRecord;
  seq: number | null;
  leaf_hash: string | null;
  audit_path: string[] | null;
}
interface CheckpointLine {
  type: 'checkpoint';
  tree_size: number;
  root_hash?: string;
  note: string | null;
  export: { filters: Record<string, unknown>; records: number; records_with_proof: number; records_without_proof: number };
}
interface Export { lines: string[]; records: RecordLine[]; checkpoint: CheckpointLine }

/** One database for the whole file (servers and CLI runs come and go on it); the CLI signs with the servers' key. */
const world = useCliDatabase({ prefix: 'teamlog-export-', env: { AUDIT_SIGNING_KEY: TEST_SIGNING_KEY } });
const { runCli, openDatabase } = world;

const file = (name: string) => path.join(world.dataDir, name);

// ---------------------------------------------------------------------------------------
// Helpers

async function cliOk(args: string[]): Promise<CliResult> {
  const r = await runCli(args);
  assert.equal(r.code, 0, `teamlog ${args.join(' ')} failed:\n${r.stdout}${r.stderr}`);
  return r;
}

function parseExport(text: string): Export {
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
function checkStructure(exp: Export): { sealed: RecordLine[]; pending: RecordLine[] } {
  const { records, checkpoint } = exp;
  const firstPending = records.findIndex((r) => r.seq === null);
  const sealed = firstPending < 0 ? records : records.slice(0, firstPending);
  const pending = firstPending < 0 ? [] : records.slice(firstPending);
  const root = checkpoint.root_hash ? Buffer.from(checkpoint.root_hash, 'base64') : undefined;
  let lastSeq = -1;
  for (const r of records) {
    assert.deepEqual(Object.keys(r).sort(), ['audit_path', 'leaf_hash', 'record', 'sealed', 'seq', 'type']);
    assert.deepEqual(Object.keys(r.record).sort(), [...FIELDS].sort());
    assert.deepEqual(Object.keys(r.sealed).sort(), [...FIELDS].sort());
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
function parseCsv(text: string): string[][] {
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
function csvRecords(text: string): Array<Record<string, string>> {
  const [header, ...rows] = parseCsv(text);
  assert.deepEqual(header, CSV_COLUMNS);
  return rows.map((r) => {
    assert.equal(r.length, CSV_COLUMNS.length);
    return Object.fromEntries(CSV_COLUMNS.map((c, i) => [c, r[i]!]));
  });
}

// ---------------------------------------------------------------------------------------
// Over HTTP

/** What the HTTP tests leave for the CLI tests. */
const fromHttp = {
  /** Every record, once the HTTP tests are done and the log settled. */
  total: 0,
  exports: 0,
  alice: { id: 0, email: '' },
  /** The CLI's filtered export (see there) and how many records it should hold. */
  from: '',
  to: '',
  filteredCount: 0,
  publicKeyPem: '',
  verifierKey: '',
  origin: '',
};

describe('over HTTP', () => {
  let server: TestServer;
  let database: TestDatabase;
  let admin: Session;
  let alice: Session;
  let exportsMade = 0;
  const projectIds: number[] = [];
  const oddIds: number[] = [];

  before(async () => {
    database = await openDatabase();
    server = await startTestServer({ database, env: { AUDIT_CHECKPOINT_INTERVAL_MS: '100' } });
    admin = await loginAdmin(server);
    alice = await createUser(server, admin);
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
    fromHttp.publicKeyPem = keys.body[0]!.public_key;
    fromHttp.verifierKey = keys.body[0]!.note_verifier_key;
    fromHttp.origin = parseVerifierKey(fromHttp.verifierKey).name;
    writeFileSync(file('key.pem'), fromHttp.publicKeyPem);
    fromHttp.alice = { id: alice.id, email: alice.email };
  });

  after(async () => {
    await server?.close();
    await database?.drop();
  });

  /** GET /audit-logs/export as it comes (the test Client would parse the NDJSON as JSON). */
  async function httpExport(query = ''): Promise<{ type: string; requestId: string; text: string }> {
    const res = await fetch(`${server.url}/api/v1/audit-logs/export${query ? `?${query}` : ''}`, {
      headers: { authorization: `Bearer ${admin.token}`, 'x-forwarded-for': admin.client.ip },
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    exportsMade++;
    return { type: res.headers.get('content-type') ?? '', requestId: res.headers.get('x-request-id') ?? '', text };
  }

  const ids = async (where: string, params: unknown[] = []) =>
    (await server.owner.query<{ id: number }>(`SELECT id FROM audit_log WHERE ${where} ORDER BY id`, params)).map((r) => r.id);
  const exportRecords = () => server.owner.query<{ id: number; actor_id: number | null; resource_type: string; resource_id: number | null; metadata: Record<string, unknown>; request_id: string }>(
    "SELECT id, actor_id, resource_type, resource_id, metadata, request_id FROM audit_log WHERE action = 'EXPORT_AUDIT_LOG' ORDER BY id",
  );

  /** Exports with this query; checks it holds exactly the records `where` selects, and that it was audited once. */
  async function checkedExport(query: string, where: string, params: unknown[], filters: Record<string, unknown>, snakeFilters: Record<string, unknown>) {
    const before = (await exportRecords()).length;
    const res = await httpExport(query);
    assert.match(res.type, /^application\/x-ndjson/);
    const exp = parseExport(res.text);
    const expected = await ids(where, params);
    assert.ok(expected.length > 0, `the filter ${query} selects something`);
    assert.equal(exp.lines.length, expected.length + 1, `${query}: a line per matching record, and the checkpoint`);
    assert.deepEqual(exp.records.map((r) => r.record.id).sort((a, b) => a - b), expected);
    const parts = checkStructure(exp);
    assert.deepEqual(exp.checkpoint.export.filters, snakeFilters);
    // One EXPORT_AUDIT_LOG record, by this request, naming the format and the filters.
    const after = await exportRecords();
    assert.equal(after.length, before + 1, 'exactly one EXPORT_AUDIT_LOG record per export');
    const record = after[after.length - 1]!;
    assert.equal(record.actor_id, admin.id);
    assert.equal(record.resource_type, 'AUDIT_LOG');
    assert.equal(record.resource_id, null);
    assert.equal(record.request_id, res.requestId);
    assert.deepEqual(record.metadata, { format: 'ndjson', filters });
    return { exp, ...parts };
  }

  test('an unfiltered NDJSON export: every record with its seq, leaf hash and proof, those not covered yet after them, the checkpoint last; audited once', async () => {
    const { exp, sealed, pending } = await checkedExport('', 'TRUE', [], {}, {});
    // Unfiltered: the proven part is the whole tree, seq 0 … tree_size - 1.
    assert.deepEqual(sealed.map((r) => r.seq), [...Array(exp.checkpoint.tree_size).keys()]);
    // The checkpoint line is the newest checkpoint, as GET /checkpoints/latest shows it.
    const latest = await admin.client.get('/api/v1/audit-logs/checkpoints/latest', { token: admin.token });
    assert.ok(latest.body.tree_size >= exp.checkpoint.tree_size);
    for (const k of ['origin', 'tree_size', 'root_hash', 'prev_checkpoint_hash', 'key_id', 'signature', 'created_at', 'note']) assert.ok(k in exp.checkpoint, k);
    // This export's own record was written before it was read: there, with or without a proof.
    assert.ok([...sealed, ...pending].some((r) => r.record.action === 'EXPORT_AUDIT_LOG' && r.record.actor_id === admin.id));
    writeFileSync(file('http-all.ndjson'), exp.lines.join('\n') + '\n');
  });

  test("each line's sealed form is the record as the service reads it (the API's form), odd values included: timestamps, nulls, escapes, Unicode, numbers, the personal-data marker in a string", async () => {
    const exp = parseExport((await httpExport()).text);
    const lines = new Map(exp.records.map((r) => [r.record.id, r]));
    for (const [i, id] of oddIds.entries()) {
      const line = lines.get(id);
      assert.ok(line, `record ${id} is exported`);
      const api = await admin.client.get<SealedRecord>(`/api/v1/audit-logs/${id}`, { token: admin.token });
      assert.equal(api.status, 200, api.text);
      assert.deepEqual(line.record, api.body, `record ${id}: the API form`);
      // The sealed form is the same record with its metadata as stored (a ref, where the API shows "[redacted]").
      assert.deepEqual(line.sealed, { ...api.body, metadata: JSON.parse(JSON.stringify(ODD_RECORDS[i]!.metadata)) as unknown }, `record ${id}: the sealed form`);
      assert.equal(recordLeaf(line.sealed).toString('base64'), line.leaf_hash, `record ${id}: the leaf`);
    }
    assert.deepEqual(
      oddIds.map((id) => lines.get(id)!.sealed.timestamp),
      ['2026-01-02T03:04:05.000Z', '2026-01-02T03:04:05.999Z', '0044-03-15 12:00:00+00 BC', '10000-01-01 00:00:00+00', 'infinity', '0999-12-31T23:59:59.123Z', '2026-01-02T03:04:05.000Z'],
      'milliseconds, truncated; other years as PostgreSQL prints them',
    );
  });

  test("the database verification's canonical text, built by PostgreSQL, is the sealer's byte for byte, odd values included; GET /audit-logs/verify accepts the log", async () => {
    const parts = (where: string, params: unknown[]) =>
      server.owner.query<{ id: number; leaf_hash: Uint8Array; head: string; metadata: string; tail: string }>(
        `SELECT a.id, s.leaf_hash, ${CANONICAL_HEAD_SQL} AS head, ${CANONICAL_METADATA_SQL} AS metadata, ${CANONICAL_TAIL_SQL} AS tail
         FROM audit_log a JOIN audit_seal s ON s.record_id = a.id WHERE ${where} ORDER BY a.id`,
        params,
      );
    // The odd records as text, against RFC 8785 of the sealed form as the API and the stored metadata give it.
    const odd = await parts('a.id = ANY($1::bigint[])', [oddIds]);
    assert.equal(odd.length, oddIds.length);
    for (const [i, row] of odd.entries()) {
      const api = await admin.client.get<SealedRecord>(`/api/v1/audit-logs/${row.id}`, { token: admin.token });
      assert.equal(api.status, 200, api.text);
      const sealed = { ...api.body, metadata: JSON.parse(JSON.stringify(ODD_RECORDS[i]!.metadata)) as unknown };
      assert.equal(row.head + canonicalize(JSON.parse(row.metadata)) + row.tail, canonicalize(sealed), `record ${row.id}`);
    }
    // Every record (control characters in user agents, personal-data refs, the service's own),
    // against the leaf the sealer computed from the values in JavaScript.
    const all = await parts('true', []);
    assert.ok(all.length > oddIds.length + CONTROL_AGENTS.length);
    for (const row of all) assert.ok(canonicalLeaf(row.head, JSON.parse(row.metadata), row.tail).equals(row.leaf_hash), `record ${row.id}: its leaf`);
    const report = await admin.client.get<{ ok: boolean; records_checked: number; problem?: string }>('/api/v1/audit-logs/verify', { token: admin.token });
    assert.equal(report.status, 200, report.text);
    assert.equal(report.body.ok, true, report.body.problem);
    assert.ok(report.body.records_checked >= all.length);
  });

  test('the sealed form quotes action, resource_type and result without escaping them (sealed-form.ts): the database refuses, even to its owner, any value of theirs that would need escaping', async () => {
    const insert = (column: 'action' | 'resource_type' | 'result', value: string) => {
      const values = { action: 'CREATE_PROJECT', resource_type: 'PROJECT', result: 'SUCCESS', [column]: value };
      return server.owner.query(
        `INSERT INTO audit_log (action, resource_type, result, request_id) VALUES ($1, $2, $3, $4)`,
        [values.action, values.resource_type, values.result, `word-${unique()}`],
      );
    };
    for (const column of ['action', 'resource_type', 'result'] as const) {
      for (const value of ['A"B', 'A\\B', 'A\u0001B', 'A\nB', 'lower', '']) {
        await assert.rejects(insert(column, value), (err: { code?: string }) => err.code === '23514', `${column} = ${JSON.stringify(value)} is refused`);
      }
    }
  });

  test('block by block: with 4 seqs a block, complete blocks share their path above the block and the last takes the general proof; every line of the unfiltered and a filtered export verifies', async () => {
    const collect = async (filters: AuditFilters) => {
      let text = '';
      for await (const part of exportAuditLog(server.owner, { filters, format: 'ndjson', chunk: 3, block: 4, ahead: 3 })) text += part.toString();
      return text;
    };
    for (const [name, filters] of [['blocks-all', {}], ['blocks-filtered', { action: ['CREATE_PROJECT'] }]] as Array<[string, AuditFilters]>) {
      const text = await collect(filters);
      const records = text.split('\n').filter((l) => l.startsWith('{"type":"record"')).map((l) => JSON.parse(l) as RecordLine);
      const checkpoint = JSON.parse(text.trimEnd().split('\n').at(-1)!) as CheckpointLine;
      // Several complete blocks, and a proof for each record as the tree itself gives it.
      assert.ok(checkpoint.tree_size > 8, `tree size ${checkpoint.tree_size}`);
      const root = Buffer.from(checkpoint.root_hash!, 'base64');
      for (const r of records.filter((x) => x.seq !== null)) {
        const leaf = recordLeaf(r.sealed);
        assert.equal(r.leaf_hash, leaf.toString('base64'));
        assert.ok(verifyInclusion(leaf, r.seq!, checkpoint.tree_size, r.audit_path!.map((h) => Buffer.from(h, 'base64')), root), `${name}: seq ${r.seq}`);
      }
      if (name === 'blocks-all') assert.deepEqual(records.filter((x) => x.seq !== null).map((x) => x.seq), [...Array(checkpoint.tree_size).keys()]);
      else assert.ok(records.length > 0 && records.every((x) => x.record.action === 'CREATE_PROJECT'));
      writeFileSync(file(`${name}.ndjson`), text);
      const report = await verifyExportFile(file(`${name}.ndjson`), [parseVerifierKey(fromHttp.verifierKey)]);
      assert.equal(report.ok, true, `${name}: ${report.problem}`);
    }
  });

  test('filters: actor_id, a repeated action, result, from/to, alone and together: exactly the matching records, and the EXPORT_AUDIT_LOG record names them', async () => {
    const stamps = await server.owner.query<{ t: string }>(
      `SELECT "timestamp" AS t FROM audit_log WHERE resource_id = ANY($1) AND action = 'CREATE_PROJECT' AND resource_type = 'PROJECT' ORDER BY id`,
      [projectIds],
    );
    const t1 = stamps[1]!.t;
    const t2 = stamps[stamps.length - 2]!.t;
    const q = encodeURIComponent;
    await checkedExport(`actor_id=${alice.id}`, 'actor_id = $1', [alice.id], { actorId: alice.id }, { actor_id: alice.id });
    await checkedExport(
      'action=CREATE_PROJECT&action=CREATE_TASK',
      "action IN ('CREATE_PROJECT', 'CREATE_TASK')",
      [],
      { action: ['CREATE_PROJECT', 'CREATE_TASK'] },
      { action: ['CREATE_PROJECT', 'CREATE_TASK'] },
    );
    const denied = await checkedExport('result=DENIED', "result = 'DENIED'", [], { result: 'DENIED' }, { result: 'DENIED' });
    assert.ok(denied.exp.records.every((r) => r.record.result === 'DENIED' && r.record.actor_id === alice.id));
    await checkedExport(`from=${q(t1)}&to=${q(t2)}`, '"timestamp" >= $1 AND "timestamp" < $2', [t1, t2], { from: t1, to: t2 }, { from: t1, to: t2 });
    const together = await checkedExport(
      `actor_id=${admin.id}&action=CREATE_PROJECT&action=CREATE_TASK&result=SUCCESS&from=${q(t1)}`,
      `actor_id = $1 AND action IN ('CREATE_PROJECT', 'CREATE_TASK') AND result = 'SUCCESS' AND "timestamp" >= $2`,
      [admin.id, t1],
      { actorId: admin.id, action: ['CREATE_PROJECT', 'CREATE_TASK'], result: 'SUCCESS', from: t1 },
      { actor_id: admin.id, action: ['CREATE_PROJECT', 'CREATE_TASK'], result: 'SUCCESS', from: t1 },
    );
    writeFileSync(file('http-filtered.ndjson'), together.exp.lines.join('\n') + '\n');
  });

  test('personal data: the export shows the email a record names, while the sealed form carries only its keyed ref', async () => {
    const exp = parseExport((await httpExport(`actor_id=${admin.id}&action=CREATE_USER`)).text);
    const created = exp.records.find((r) => r.record.resource_id === alice.id);
    assert.ok(created, "alice's CREATE_USER is exported");
    assert.equal(created.record.metadata.email, alice.email);
    const ref = created.sealed.metadata.email as { $personal?: unknown };
    assert.deepEqual(Object.keys(ref), ['$personal']);
    assert.equal(typeof ref.$personal, 'string');
    assert.ok(!JSON.stringify(created.sealed).includes(alice.email), 'the sealed form holds no email');
  });

  test('CSV: a header and one row per record (filtered too); cells a spreadsheet would run as formulas start with an apostrophe, and cells are quoted where they must be', async () => {
    const before = (await exportRecords()).length;
    const res = await fetch(`${server.url}/api/v1/audit-logs/export?format=csv`, { headers: { authorization: `Bearer ${admin.token}`, 'x-forwarded-for': admin.client.ip } });
    exportsMade++;
    const text = await res.text();
    assert.equal(res.status, 200, text);
    assert.match(res.headers.get('content-type') ?? '', /^text\/csv/);
    const rows = csvRecords(text);
    assert.deepEqual(rows.map((r) => Number(r.id)).sort((a, b) => a - b), await ids('TRUE'));
    const after = await exportRecords();
    assert.equal(after.length, before + 1);
    assert.deepEqual(after[after.length - 1]!.metadata, { format: 'csv', filters: {} });

    const byAgent = new Map(rows.map((r) => [r.user_agent, r]));
    for (const ua of [...FORMULA_AGENTS, ...CONTROL_AGENTS]) assert.ok(byAgent.has(`'${ua}`), `user agent ${JSON.stringify(ua)} comes out as ${JSON.stringify(`'${ua}`)}`);
    assert.ok(byAgent.has(QUOTED_AGENT), 'a harmless user agent is left as it is');
    const byRequest = new Set(rows.map((r) => r.request_id));
    for (const id of FORMULA_REQUEST_IDS) assert.ok(byRequest.has(`'${id}`), `request id ${id} is defused`);
    // No cell that a spreadsheet would run: none starts with = + - @ tab or CR.
    for (const r of rows) for (const c of CSV_COLUMNS) assert.doesNotMatch(r[c]!, /^[=+\-@\t\r]/, `${c} of record ${r.id}`);
    // Quoted as RFC 4180 wants (the parser above is strict): quotes doubled, CR inside quotes.
    assert.ok(text.includes(`"'=HYPERLINK(""http://evil.test"",""open me"")"`));
    assert.ok(text.includes(`"'${CONTROL_AGENTS[1]}"`));
    assert.ok(text.includes(`,'${CONTROL_AGENTS[0]},`), 'a tab needs no quotes, only the apostrophe');
    // The metadata cell is the record's metadata as JSON, with the email shown.
    const created = rows.find((r) => r.action === 'CREATE_USER' && Number(r.resource_id) === alice.id && r.result === 'SUCCESS');
    assert.ok(created);
    assert.equal(JSON.parse(created.metadata!).email, alice.email);
    assert.ok(rows.every((r) => r.seq === '' || /^\d+$/.test(r.seq!)));

    const filtered = await fetch(`${server.url}/api/v1/audit-logs/export?format=csv&action=CREATE_PROJECT&result=SUCCESS`, {
      headers: { authorization: `Bearer ${admin.token}`, 'x-forwarded-for': admin.client.ip },
    });
    exportsMade++;
    const filteredRows = csvRecords(await filtered.text());
    assert.deepEqual(filteredRows.map((r) => Number(r.id)).sort((a, b) => a - b), await ids("action = 'CREATE_PROJECT' AND result = 'SUCCESS'"));
  });

  test('csvCell: formula starts (= + - @ tab CR) get an apostrophe; commas, quotes and line breaks get quotes', () => {
    assert.equal(csvCell('=1+1'), "'=1+1");
    assert.equal(csvCell('+1'), "'+1");
    assert.equal(csvCell('-1'), "'-1");
    assert.equal(csvCell('@x'), "'@x");
    assert.equal(csvCell('\tx'), "'\tx");
    assert.equal(csvCell('\rx'), `"'\rx"`);
    assert.equal(csvCell('=a,b'), `"'=a,b"`);
    assert.equal(csvCell('say "hi"'), '"say ""hi"""');
    assert.equal(csvCell('two\nlines'), '"two\nlines"');
    assert.equal(csvCell('plain'), 'plain');
    assert.equal(csvCell(null), '');
    assert.equal(csvCell({ a: 1, b: 'x' }), '"{""a"":1,""b"":""x""}"');
  });

  test('the offline verifier (teamlog audit verify --file) accepts the genuine exports: unfiltered with --public-key, filtered with --verifier-key', async () => {
    const [all, filtered] = await Promise.all([
      runCli(['audit', 'verify', '--file', file('http-all.ndjson'), '--public-key', file('key.pem')]),
      runCli(['audit', 'verify', '--file', file('http-filtered.ndjson'), '--verifier-key', fromHttp.verifierKey]),
    ]);
    assert.equal(all.code, 0, all.stdout + all.stderr);
    assert.match(all.stdout, /^OK: \d+ records verified against the signed checkpoint of \d+ records/);
    assert.equal(filtered.code, 0, filtered.stdout + filtered.stderr);
    assert.match(filtered.stdout, /^OK: /);
  });

  test('every export above wrote exactly one EXPORT_AUDIT_LOG record', async () => {
    assert.equal((await exportRecords()).length, exportsMade);
    // For the CLI tests: the log settled, and what they should find.
    await settled(server, admin);
    // The service's own records' span (the odd ones lie in other centuries, and the filters take ISO 8601 only).
    const stamps = await server.owner.query<{ first: string; next: string }>(
      `SELECT min("timestamp") AS first, (max("timestamp") + interval '1 millisecond') AS next FROM audit_log WHERE request_id NOT LIKE 'odd-%'`,
    );
    fromHttp.from = stamps[0]!.first;
    fromHttp.to = stamps[0]!.next;
    fromHttp.total = (await ids('TRUE')).length;
    fromHttp.exports = exportsMade;
    fromHttp.filteredCount = (await ids("actor_id = $1 AND action IN ('CREATE_USER', 'LOGIN_SUCCESS') AND result = 'DENIED'", [alice.id])).length;
    assert.equal(fromHttp.filteredCount, 2);
  });
});

// ---------------------------------------------------------------------------------------
// The offline verifier, on edited exports

describe('the offline verifier refuses an edited export', () => {
  let genuine: string;
  let filtered: string;
  let key: NoteVerifier;

  before(() => {
    genuine = readFileSync(file('http-all.ndjson'), 'utf8');
    filtered = readFileSync(file('http-filtered.ndjson'), 'utf8');
    key = parseVerifierKey(fromHttp.verifierKey);
  });

  const lines = (text: string) => text.slice(0, -1).split('\n');
  const write = (name: string, ls: string[]) => {
    writeFileSync(file(name), ls.join('\n') + '\n');
    return file(name);
  };
  /** A record line with a proof, from the middle of the export. */
  const middle = (ls: string[]) => {
    const proven = ls.map((l, i) => [l, i] as const).filter(([l]) => l.includes('"seq":') && !l.includes('"seq":null') && l.startsWith('{"type":"record"'));
    return proven[Math.floor(proven.length / 2)]!;
  };

  test('via the CLI: one byte changed in a record line, a dropped line, or the wrong key (PEM or verifier key): exit 1, naming the problem', async () => {
    const ls = lines(genuine);
    const [line, at] = middle(ls);
    const id = (JSON.parse(line) as RecordLine).record.id;
    // One byte of the sealed form: the first character of its request id.
    const sealedAt = line.indexOf('"request_id":"', line.indexOf('"sealed":')) + '"request_id":"'.length;
    const edited = line.slice(0, sealedAt) + (line[sealedAt] === 'x' ? 'y' : 'x') + line.slice(sealedAt + 1);
    assert.equal(edited.length, line.length);
    const oneByte = write('one-byte.ndjson', ls.map((l, i) => (i === at ? edited : l)));
    const dropped = write('dropped.ndjson', ls.filter((_, i) => i !== at));
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(file('wrong.pem'), publicKeyPem(privateKey));
    const wrongVerifier = formatVerifierKey(fromHttp.origin, ed25519PublicKeyRaw(privateKey));

    const [a, b, c, d] = await Promise.all([
      runCli(['audit', 'verify', '--file', oneByte, '--public-key', file('key.pem')]),
      runCli(['audit', 'verify', '--file', dropped, '--public-key', file('key.pem')]),
      runCli(['audit', 'verify', '--file', file('http-all.ndjson'), '--public-key', file('wrong.pem')]),
      runCli(['audit', 'verify', '--file', file('http-all.ndjson'), '--verifier-key', wrongVerifier]),
    ]);
    assert.equal(a.code, 1, a.stdout + a.stderr);
    assert.match(a.stderr, new RegExp(`verification FAILED: record ${id}\\b.*\\(first bad record: ${id}, line ${at + 1}\\)`));
    assert.equal(b.code, 1, b.stdout + b.stderr);
    assert.match(b.stderr, /verification FAILED: seq \d+ is missing from an unfiltered export: a line was removed/);
    for (const r of [c, d]) {
      assert.equal(r.code, 1, r.stdout + r.stderr);
      assert.match(r.stderr, /verification FAILED: the checkpoint: it is not signed by the expected key/);
      assert.equal(r.stdout, '');
    }
  });

  test('via the engine: an edit anywhere (the API form, the proof, the checkpoint note), lines swapped, duplicated, added after the checkpoint, or the checkpoint missing', async () => {
    const ls = lines(genuine);
    const [line, at] = middle(ls);
    const entry = JSON.parse(line) as RecordLine;
    const id = entry.record.id;
    const check = async (name: string, edited: string[], problem: RegExp, firstBadId?: number) => {
      const report = await verifyExportFile(write(`${name}.ndjson`, edited), [key]);
      assert.equal(report.ok, false, `${name} went unnoticed`);
      assert.match(report.problem!, problem, name);
      if (firstBadId !== undefined) assert.equal(report.first_bad_id, firstBadId, name);
    };
    const replace = (l: string) => ls.map((x, i) => (i === at ? l : x));

    assert.equal((await verifyExportFile(file('http-all.ndjson'), [key])).ok, true);
    const sealedToo = { ...entry.record, action: 'LOGOUT' };
    await check('record-and-sealed', replace(JSON.stringify({ ...entry, record: sealedToo, sealed: sealedToo })), new RegExp(`record ${id} does not match its leaf hash`), id);
    await check('api-form', replace(JSON.stringify({ ...entry, record: { ...entry.record, action: 'LOGOUT' } })), /record and its sealed form differ in action/, id);
    const path0 = Buffer.from(entry.audit_path![0]!, 'base64');
    path0[0] = path0[0]! ^ 1;
    await check('proof', replace(JSON.stringify({ ...entry, audit_path: [path0.toString('base64'), ...entry.audit_path!.slice(1)] })), /inclusion proof does not lead to the checkpoint's root/, id);
    const trailer = JSON.parse(ls[ls.length - 1]!) as CheckpointLine & { root_hash: string };
    const forgedNote = trailer.note!.replace(`\n${trailer.tree_size}\n`, `\n${trailer.tree_size + 1}\n`);
    await check('note', [...ls.slice(0, -1), JSON.stringify({ ...trailer, note: forgedNote, tree_size: trailer.tree_size + 1 })], /the checkpoint: its signature does not verify/);
    await check('swapped', ls.map((x, i) => (i === at ? ls[at + 1]! : i === at + 1 ? ls[at]! : x)), /out of order|is missing/);
    await check('duplicated', [...ls.slice(0, at + 1), ls[at]!, ...ls.slice(at + 1)], /out of order/);
    await check('after-checkpoint', [...ls, ls[at]!], /the last line is not the export's checkpoint line|follows the checkpoint/);
    await check('no-checkpoint', ls.slice(0, -1), /checkpoint line/);
    // A filtered export: a dropped line shows in its count.
    const fl = lines(filtered);
    await check('filtered-dropped', fl.filter((_, i) => i !== 1), /says it holds \d+ records, but has \d+/);
  });

  test('a signed checkpoint is required: an export stripped of it, its records passed off as not yet covered, does not verify', async () => {
    // The downgrade an editor of a file would try: no checkpoint to hold the records to, every
    // record "not covered yet" (no proof to check), one of them changed.
    const ls = lines(genuine);
    const [, at] = middle(ls);
    const records = ls.slice(0, -1).map((l, i) => {
      const e = JSON.parse(l) as RecordLine;
      const changed = i === at ? { ...e.record, action: 'LOGOUT' } : e.record;
      return JSON.stringify({ ...e, record: changed, sealed: i === at ? changed : e.sealed, seq: null, leaf_hash: null, audit_path: null });
    });
    const trailer = JSON.parse(ls[ls.length - 1]!) as CheckpointLine;
    const stripped = JSON.stringify({ type: 'checkpoint', tree_size: 0, note: null, export: { ...trailer.export, records_with_proof: 0, records_without_proof: records.length } });
    const report = await verifyExportFile(write('stripped.ndjson', [...records, stripped]), [key]);
    assert.equal(report.ok, false, 'an export with no signed checkpoint verified: nothing in it was checked against the key');
    assert.match(report.problem!, /checkpoint/);
  });

  test('what a filtered export cannot show (docs/audit-integrity.md §7): a record left out, when its count is edited to match', async () => {
    const fl = lines(filtered);
    const trailer = JSON.parse(fl[fl.length - 1]!) as CheckpointLine;
    const edited = [...fl.slice(1, -1), JSON.stringify({ ...trailer, export: { ...trailer.export, records: trailer.export.records - 1, records_with_proof: trailer.export.records_with_proof - 1 } })];
    const report = await verifyExportFile(write('filtered-left-out.ndjson', edited), [key]);
    assert.equal(report.ok, true, report.problem);
  });

  test('--complete: a full export whose unsigned trailer is edited to look filtered still fails when a line is dropped', async () => {
    const ls = lines(genuine);
    const trailer = JSON.parse(ls[ls.length - 1]!) as CheckpointLine;
    const [, at] = middle(ls);
    const edited = [...ls.slice(0, at), ...ls.slice(at + 1, -1), JSON.stringify({ ...trailer, export: { ...trailer.export, filters: { actor_id: 1 }, records: trailer.export.records - 1, records_with_proof: trailer.export.records_with_proof - 1 } })];
    const path_ = write('disguised.ndjson', edited);
    assert.equal((await verifyExportFile(path_, [key])).ok, true, 'without --complete the disguise holds (the trailer is not signed)');
    const complete = await verifyExportFile(path_, [key], undefined, true);
    assert.equal(complete.ok, false);
    assert.match(complete.problem!, /missing|removed/);
  });
});

// ---------------------------------------------------------------------------------------
// With the CLI (the server has stopped)

describe('teamlog audit export', () => {
  let cliAll: Export;
  let cliExports = 0;

  test('--output: the same NDJSON as the route, audited as one EXPORT_AUDIT_LOG with no actor, which comes last and not yet covered (seq null: the CLI runs no sealer); it verifies offline', async () => {
    const r = await cliOk(['audit', 'export', '--output', file('cli-all.ndjson')]);
    cliExports++;
    assert.equal(r.stdout, '', 'the export went to the file');
    cliAll = parseExport(readFileSync(file('cli-all.ndjson'), 'utf8'));
    assert.equal(cliAll.lines.length, fromHttp.total + 1 + 1, 'every record, this export\'s own, and the checkpoint');
    const { sealed, pending } = checkStructure(cliAll);
    assert.deepEqual(sealed.map((l) => l.seq), [...Array(fromHttp.total).keys()], 'everything from before is covered by the checkpoint');
    assert.equal(pending.length, 1);
    const own = pending[0]!.record;
    assert.equal(own.action, 'EXPORT_AUDIT_LOG');
    assert.equal(own.actor_id, null);
    assert.equal(own.ip, null);
    assert.equal(own.resource_type, 'AUDIT_LOG');
    assert.match(own.request_id, /^cli-[0-9a-f-]{36}$/);
    assert.deepEqual(own.metadata, { format: 'ndjson', filters: {} });

    const v = await cliOk(['audit', 'verify', '--file', file('cli-all.ndjson'), '--public-key', file('key.pem')]);
    assert.match(v.stdout, new RegExp(`^OK: ${fromHttp.total} records verified against the signed checkpoint of ${fromHttp.total} records; 1 newer records carry no proof yet`));
  });

  test('filters on the command line (--actor-id, --action twice, --result, --from, --to): exactly the matching records; the filtered export verifies offline', async () => {
    const args = ['--actor-id', String(fromHttp.alice.id), '--action', 'CREATE_USER', '--action', 'LOGIN_SUCCESS', '--result', 'DENIED', '--from', fromHttp.from, '--to', fromHttp.to];
    await cliOk(['audit', 'export', '--output', file('cli-filtered.ndjson'), ...args]);
    cliExports++;
    const exp = parseExport(readFileSync(file('cli-filtered.ndjson'), 'utf8'));
    assert.equal(exp.lines.length, fromHttp.filteredCount + 1);
    assert.ok(exp.records.every((l) => l.record.actor_id === fromHttp.alice.id && l.record.action === 'CREATE_USER' && l.record.result === 'DENIED'));
    checkStructure(exp);
    assert.deepEqual(exp.checkpoint.export.filters, { actor_id: fromHttp.alice.id, action: ['CREATE_USER', 'LOGIN_SUCCESS'], result: 'DENIED', from: fromHttp.from, to: fromHttp.to });
    await cliOk(['audit', 'verify', '--file', file('cli-filtered.ndjson'), '--verifier-key', fromHttp.verifierKey]);
  });

  test('--format csv: a header and a row per record; one EXPORT_AUDIT_LOG record per CLI export, naming its format and filters', async () => {
    await cliOk(['audit', 'export', '--format', 'csv', '--action', 'EXPORT_AUDIT_LOG', '--output', file('cli-exports.csv')]);
    cliExports++;
    const rows = csvRecords(readFileSync(file('cli-exports.csv'), 'utf8'));
    assert.equal(rows.length, fromHttp.exports + cliExports);
    const cli = rows.filter((r) => r.request_id!.startsWith('cli-'));
    assert.equal(new Set(cli.map((r) => r.request_id)).size, cliExports);
    assert.deepEqual(cli.map((r) => JSON.parse(r.metadata!)), [
      { format: 'ndjson', filters: {} },
      { format: 'ndjson', filters: { actorId: fromHttp.alice.id, action: ['CREATE_USER', 'LOGIN_SUCCESS'], result: 'DENIED', from: fromHttp.from, to: fromHttp.to } },
      { format: 'csv', filters: { action: ['EXPORT_AUDIT_LOG'] } },
    ]);
    assert.ok(cli.every((r) => r.actor_id === '' && r.ip === '' && r.seq === '' && r.leaf_hash === ''));
  });

  test('an existing --output file is refused (exit 1) before anything is written or audited', async () => {
    const before = readFileSync(file('cli-all.ndjson'));
    const r = await runCli(['audit', 'export', '--output', file('cli-all.ndjson')]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /already exists; nothing was written/);
    assert.deepEqual(readFileSync(file('cli-all.ndjson')), before);
  });

  test('after `teamlog audit redact --user`, an export shows "[redacted]" where the email was, the sealed form unchanged, and still verifies offline', async () => {
    const redact = await cliOk(['audit', 'redact', '--user', String(fromHttp.alice.id)]);
    assert.match(redact.stdout, /Erased [1-9]\d* personal value/);
    await cliOk(['audit', 'export', '--output', file('after-redact.ndjson')]);
    cliExports++;
    const exp = parseExport(readFileSync(file('after-redact.ndjson'), 'utf8'));
    checkStructure(exp);
    const beforeLine = cliAll.records.find((l) => l.record.action === 'CREATE_USER' && l.record.resource_id === fromHttp.alice.id && l.record.result === 'SUCCESS')!;
    assert.equal(beforeLine.record.metadata.email, fromHttp.alice.email);
    const afterLine = exp.records.find((l) => l.record.id === beforeLine.record.id)!;
    assert.equal(afterLine.record.metadata.email, REDACTED);
    assert.deepEqual(afterLine.sealed, beforeLine.sealed);
    assert.equal(afterLine.leaf_hash, beforeLine.leaf_hash);
    assert.ok(!readFileSync(file('after-redact.ndjson'), 'utf8').includes(fromHttp.alice.email), 'the email is nowhere in the export');
    // The refused export above wrote no record; the redaction wrote its own.
    const cli = exp.records.filter((l) => l.record.action === 'EXPORT_AUDIT_LOG' && l.record.request_id.startsWith('cli-'));
    assert.equal(cli.length, cliExports);
    assert.equal(exp.records.filter((l) => l.record.action === 'REDACT_PERSONAL_DATA').length, 1);
    const v = await cliOk(['audit', 'verify', '--file', file('after-redact.ndjson'), '--public-key', file('key.pem')]);
    assert.match(v.stdout, /^OK: /);
  });
});
