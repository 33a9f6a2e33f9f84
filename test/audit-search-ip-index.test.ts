// A search by address or network (ip:…) takes the page's ids from audit_log_ip_idx alone, then
// reads those rows (migrations/0014, audit.repository.ts idsFirst): PostgreSQL checks the
// network on the index's own value instead of reading every match's row and calling audit_ip on
// it. Here 20,000 records hold a sparse network (one record in a hundred, some of them seen as
// ::ffff:a.b.c.d), a dense one, IPv6 addresses and text that is no address. Every page must hold
// exactly the matching records, and the plan must read the matches from the index, not the table.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { queryAuditLog, type AuditFilters } from '../src/modules/audit/audit.repository.js';
import type { IpRef } from '../src/modules/audit/audit.search.js';
import { explainingTx, planNodes, topPlanNode, type PlanNode } from './helpers/explain.js';
import { useTestDatabase } from './helpers/harness.js';

const h = useTestDatabase();
const ROWS = 20_000;
const PAGE = 20;

h.before(async () => {
  const owner = h.database.owner;
  await owner.query(
    `INSERT INTO audit_log (action, resource_type, resource_id, result, metadata, request_id, ip)
     SELECT 'CREATE_TASK', 'TASK', g, 'SUCCESS', '{}', 'ip-' || g,
            CASE WHEN g % 100 = 0 THEN '10.9.9.' || (g / 100) % 250
                 WHEN g % 100 = 50 THEN '::ffff:10.9.9.' || (g / 100) % 250
                 WHEN g % 100 = 25 THEN 'unknown'
                 WHEN g % 100 = 75 THEN '2001:db8::' || to_hex(g)
                 ELSE '192.168.' || g % 50 || '.' || g % 200 END
       FROM generate_series(1, $1::int) g`,
    [ROWS],
  );
  // What autovacuum does to a table that only grows: statistics, and the visibility map that
  // lets an index-only scan skip the table (PGlite runs no autovacuum).
  await owner.exec('VACUUM (ANALYZE) audit_log');
});

const network = (address: string, bits: number): IpRef => ({ family: address.includes(':') ? 6 : 4, address, bits });
const searchFor = (...any: IpRef[]): AuditFilters => ({ search: { ip: { any, not: [] } } });
/** In 10.9.9.0/24 as the table stores it: the planted IPv4 form or its ::ffff: form. */
const inSparseNetwork = (ip: string) => /^(::ffff:)?10\.9\.9\.\d+$/.test(ip);

/** The ids the table holds for `match`, newest first, read without audit_ip. */
async function stored(match: (ip: string) => boolean): Promise<number[]> {
  const rows = await h.database.owner.query<{ id: number; ip: string | null }>('SELECT id, ip FROM audit_log ORDER BY id DESC');
  return rows.filter((r) => r.ip !== null && match(r.ip)).map((r) => Number(r.id));
}

/** Every page of the list for `f`, as the route walks it (limit + 1 rows a page, the last one only a sign of more). */
async function repositoryPages(f: AuditFilters): Promise<number[]> {
  const ids: number[] = [];
  for (let before: number | undefined; ;) {
    const rows = await queryAuditLog(h.database.db, f, before, PAGE);
    assert.ok(rows.length <= PAGE + 1);
    const page = rows.slice(0, PAGE).map((r) => Number(r.id));
    ids.push(...page);
    if (rows.length <= PAGE) return ids;
    before = page.at(-1);
  }
}

/** The plan of the first page's statement, EXPLAIN ANALYZE in place, as the service's role sends it. */
async function firstPagePlan(f: AuditFilters): Promise<PlanNode> {
  let plan: PlanNode | undefined;
  await h.database.db.transaction((tx) =>
    queryAuditLog(explainingTx(tx, (sql) => sql.includes('FROM audit_log'), (_, p) => (plan = topPlanNode(p)), true), f, undefined, PAGE),
  );
  assert.ok(plan, 'the list was explained');
  return plan;
}

describe('GET /audit-logs?q=ip:… through the ip index alone', () => {
  test('every page holds exactly the matching records, newest first: a sparse network, one address, IPv6, a dense network', async () => {
    const sparse = await stored(inSparseNetwork);
    assert.equal(sparse.length, ROWS / 50, 'one record in fifty is in 10.9.9.0/24');
    assert.deepEqual(await repositoryPages(searchFor(network('10.9.9.0', 24))), sparse);
    assert.deepEqual(await repositoryPages(searchFor(network('10.9.9.7', 32))), await stored((ip) => ip === '10.9.9.7' || ip === '::ffff:10.9.9.7'));
    assert.deepEqual(await repositoryPages(searchFor(network('2001:db8::', 112))), await stored((ip) => ip.startsWith('2001:db8::')));
    assert.deepEqual(
      await repositoryPages(searchFor(network('10.9.9.0', 24), network('192.168.7.0', 24))),
      await stored((ip) => inSparseNetwork(ip) || ip.startsWith('192.168.7.')),
    );
  });

  test('the page\'s ids come from an index-only scan of audit_log_ip_idx; the table is read for the page\'s rows only', async () => {
    for (const ref of [network('10.9.9.0', 24), network('10.9.9.7', 32)]) {
      const all = planNodes(await firstPagePlan(searchFor(ref)));
      const label = `${ref.address}/${ref.bits}: ${JSON.stringify(all.map((n) => `${n['Node Type']} ${n['Index Name'] ?? ''}`))}`;
      const onIndex = all.find((n) => n['Node Type'] === 'Index Only Scan' && n['Index Name'] === 'audit_log_ip_idx');
      assert.ok(onIndex, label);
      assert.equal(onIndex['Heap Fetches'], 0, `${label}: the visibility map spares the table`);
      // Rows of audit_log read by any other scan: the page's (limit + 1) and no more.
      const rowsRead = all.filter((n) => n !== onIndex && n['Relation Name'] === 'audit_log').reduce((sum, n) => sum + (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1), 0);
      assert.ok(rowsRead <= PAGE + 1, `${label}: ${rowsRead} rows read from the table`);
      assert.ok(!all.some((n) => n['Node Type'] === 'Bitmap Heap Scan' || n['Node Type'] === 'Seq Scan'), label);
    }
  });
});
