// Exporting the audit log over HTTP (docs/api.md 4, GET /audit-logs/export; docs/audit-integrity.md §5):
// NDJSON with each record's seq, leaf hash and inclusion proof and the signed checkpoint last,
// CSV for spreadsheets (with formula-looking cells defused), one EXPORT_AUDIT_LOG record per
// export, and `teamlog audit verify --file` accepting the genuine exports. The offline verifier
// on edited exports is in audit-export-verify.test.ts; `teamlog audit export` in
// audit-export-cli.test.ts. Each seeds its own log (helpers/audit-export.ts, openExportLog).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { AuditFilters } from '../src/modules/audit/audit.repository.js';
import { CSV_COLUMNS, csvCell } from '../src/modules/audit/evidence/export.csv.js';
import { exportAuditLog } from '../src/modules/audit/evidence/export.stream.js';
import { verifyInclusion } from '../src/tlog/merkle.js';
import { canonicalize } from '../src/tlog/jcs.js';
import {
  CANONICAL_HEAD_SQL, CANONICAL_METADATA_SQL, CANONICAL_TAIL_SQL, canonicalLeaf, recordLeaf, type SealedRecord,
} from '../src/modules/audit/evidence/record.sealed-form.js';
import { parseVerifierKey } from '../src/tlog/signed-note.js';
import { verifyExportFile } from '../src/modules/audit/evidence/export.verifier.js';
import {
  CONTROL_AGENTS, FORMULA_AGENTS, FORMULA_REQUEST_IDS, ODD_RECORDS, QUOTED_AGENT, checkStructure, csvRecords, fetchExport, openExportLog, parseNdjsonExport, projectWindow,
  togetherQuery, type CheckpointLine, type ExportLog, type RecordLine,
} from './helpers/audit-export.js';
import { useCliDatabase } from './helpers/cli.js';
import type { Session } from './helpers/client.js';
import { TEST_SIGNING_KEY, type TestServer } from './helpers/server.js';

const unique = () => randomBytes(4).toString('hex');

/** One database for the file; the CLI (verify --file, offline) signs with the servers' key. */
const world = useCliDatabase({ prefix: 'teamlog-export-', env: { AUDIT_SIGNING_KEY: TEST_SIGNING_KEY } });
const { runCli } = world;
const file = (name: string) => path.join(world.dataDir, name);

describe('over HTTP', () => {
  let log: ExportLog;
  let server: TestServer;
  let admin: Session;
  let alice: Session;
  let exportsMade = 0;
  let oddIds: number[];

  before(async () => {
    log = await openExportLog(world);
    ({ server, admin, alice, oddIds } = log);
  });

  after(async () => {
    await log?.close();
  });

  /** GET /audit-logs/export as it comes, counted. */
  async function httpExport(query = ''): Promise<{ type: string; requestId: string; text: string }> {
    const res = await fetchExport(server, admin, query);
    exportsMade++;
    return res;
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
    const exp = parseNdjsonExport(res.text);
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
    const exp = parseNdjsonExport((await httpExport()).text);
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

  test('the sealed form quotes action, resource_type and result without escaping them (record.sealed-form.ts): the database refuses, even to its owner, any value of theirs that would need escaping', async () => {
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
      const report = await verifyExportFile(file(`${name}.ndjson`), [parseVerifierKey(log.verifierKey)]);
      assert.equal(report.ok, true, `${name}: ${report.problem}`);
    }
  });

  test('filters: actor_id, a repeated action, result, from/to, alone and together: exactly the matching records, and the EXPORT_AUDIT_LOG record names them', async () => {
    const { t1, t2 } = await projectWindow(log);
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
      togetherQuery(admin.id, t1),
      `actor_id = $1 AND action IN ('CREATE_PROJECT', 'CREATE_TASK') AND result = 'SUCCESS' AND "timestamp" >= $2`,
      [admin.id, t1],
      { actorId: admin.id, action: ['CREATE_PROJECT', 'CREATE_TASK'], result: 'SUCCESS', from: t1 },
      { actor_id: admin.id, action: ['CREATE_PROJECT', 'CREATE_TASK'], result: 'SUCCESS', from: t1 },
    );
    writeFileSync(file('http-filtered.ndjson'), together.exp.lines.join('\n') + '\n');
  });

  test('personal data: the export shows the email a record names, while the sealed form carries only its keyed ref', async () => {
    const exp = parseNdjsonExport((await httpExport(`actor_id=${admin.id}&action=CREATE_USER`)).text);
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
      runCli(['audit', 'verify', '--file', file('http-filtered.ndjson'), '--verifier-key', log.verifierKey]),
    ]);
    assert.equal(all.code, 0, all.stdout + all.stderr);
    assert.match(all.stdout, /^OK: \d+ records verified against the signed checkpoint of \d+ records/);
    assert.equal(filtered.code, 0, filtered.stdout + filtered.stderr);
    assert.match(filtered.stdout, /^OK: /);
  });

  test('every export above wrote exactly one EXPORT_AUDIT_LOG record', async () => {
    assert.equal((await exportRecords()).length, exportsMade);
  });
});
