// `teamlog audit export` (docs/audit-integrity.md §5), run once the server has stopped (PGlite
// allows one process at a time), as a child process on the server's data: the same NDJSON as
// the route, filters on the command line, CSV, one EXPORT_AUDIT_LOG record per export with no
// actor, an existing --output refused, and an export after `teamlog audit redact`; each
// verified offline with `teamlog audit verify --file`. The log is the one audit-export.test.ts
// exports over HTTP (helpers/audit-export.ts), with one HTTP export of its own.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { settled } from './helpers/audit-log.js';
import { checkStructure, csvRecords, fetchExport, openExportLog, parseNdjsonExport, REDACTED, type Export } from './helpers/audit-export.js';
import { useCliDatabase, type CliResult } from './helpers/cli.js';
import { TEST_SIGNING_KEY } from './helpers/server.js';

/** One database for the whole file (a server seeds it, then the CLI runs on it); the CLI signs with the servers' key. */
const world = useCliDatabase({ prefix: 'teamlog-export-cli-', env: { AUDIT_SIGNING_KEY: TEST_SIGNING_KEY } });
const { runCli } = world;
const file = (name: string) => path.join(world.dataDir, name);

async function cliOk(args: string[]): Promise<CliResult> {
  const r = await runCli(args);
  assert.equal(r.code, 0, `teamlog ${args.join(' ')} failed:\n${r.stdout}${r.stderr}`);
  return r;
}

/** What the server left for the CLI tests. */
const fromHttp = {
  /** Every record, once the server is done and the log settled. */
  total: 0,
  /** Exports made over HTTP (each wrote an EXPORT_AUDIT_LOG record). */
  exports: 0,
  alice: { id: 0, email: '' },
  /** The CLI's filtered export (see there) and how many records it should hold. */
  from: '',
  to: '',
  filteredCount: 0,
  verifierKey: '',
};

describe('teamlog audit export', () => {
  // Node 20 runs top-level before hooks side by side: this one waits, inside the describe, for useCliDatabase's.
  before(async () => {
    const log = await openExportLog(world);
    try {
      const { server, admin, alice } = log;
      // One export over HTTP, so that the CLI's are counted among others'.
      await fetchExport(server, admin);
      fromHttp.exports = 1;
      await settled(server, admin);
      const ids = async (where: string, params: unknown[] = []) =>
        (await server.owner.query<{ id: number }>(`SELECT id FROM audit_log WHERE ${where} ORDER BY id`, params)).map((r) => r.id);
      // The service's own records' span (the odd ones lie in other centuries, and the filters take ISO 8601 only).
      const stamps = await server.owner.query<{ first: string; next: string }>(
        `SELECT min("timestamp") AS first, (max("timestamp") + interval '1 millisecond') AS next FROM audit_log WHERE request_id NOT LIKE 'odd-%'`,
      );
      fromHttp.from = stamps[0]!.first;
      fromHttp.to = stamps[0]!.next;
      fromHttp.total = (await ids('TRUE')).length;
      fromHttp.filteredCount = (await ids("actor_id = $1 AND action IN ('CREATE_USER', 'LOGIN_SUCCESS') AND result = 'DENIED'", [alice.id])).length;
      assert.equal(fromHttp.filteredCount, 2);
      fromHttp.alice = { id: alice.id, email: alice.email };
      fromHttp.verifierKey = log.verifierKey;
    } finally {
      await log.close();
    }
  });

  let cliAll: Export;
  let cliExports = 0;

  test('--output: the same NDJSON as the route, audited as one EXPORT_AUDIT_LOG with no actor, which comes last and not yet covered (seq null: the CLI runs no sealer); it verifies offline', async () => {
    const r = await cliOk(['audit', 'export', '--output', file('cli-all.ndjson')]);
    cliExports++;
    assert.equal(r.stdout, '', 'the export went to the file');
    cliAll = parseNdjsonExport(readFileSync(file('cli-all.ndjson'), 'utf8'));
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
    const exp = parseNdjsonExport(readFileSync(file('cli-filtered.ndjson'), 'utf8'));
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
    const exp = parseNdjsonExport(readFileSync(file('after-redact.ndjson'), 'utf8'));
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
