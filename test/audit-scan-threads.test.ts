// Where the API's audit scans run (src/modules/audit/evidence/scan.pool.ts, issue 39 item 6):
// GET /audit-logs/verify and /audit-logs/export run in a worker thread at the lowest CPU
// priority, so that the requests of other users do not wait for them. What crosses between the
// threads keeps its meaning (src/db/thread-queries.ts): a database error stays one the error
// handler recognizes; and on PGlite, whose one connection runs on the main thread, a worker's
// statements give way to the service's own. The answers themselves are the other audit test
// files' (they all run through the worker now).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { isUnavailableError, pgErrorCode } from '../src/db/database.js';
import { errorFromWire, errorToWire, nextStatementAt } from '../src/db/thread-queries.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();

/** Each thread of this process and its nice value (Linux: field 19 of /proc/self/task/<tid>/stat). */
function threadNices(): Map<number, number> {
  const nices = new Map<number, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      nices.set(Number(tid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return nices;
}

describe('the API\'s scans run in a worker thread at the lowest priority', () => {
  test('during and after a verification through the API, one thread of this process runs at nice 19; the main thread keeps its own', { skip: process.platform !== 'linux' && 'Linux only: a thread\'s own nice value' }, async () => {
    const mainBefore = threadNices().get(process.pid);
    const verified = await h.admin.client.get('/api/v1/audit-logs/verify', { token: h.admin.token });
    assert.equal(verified.status, 200, verified.text);
    assert.equal(verified.body.ok, true, verified.text);
    // The worker is kept for the next scan: it is still there, still at 19.
    const nices = threadNices();
    assert.ok([...nices.values()].includes(19), `a thread at nice 19 among ${JSON.stringify([...nices])}`);
    assert.equal(nices.get(process.pid), mainBefore, 'the main thread keeps its priority');
    const exported = await h.admin.client.get('/api/v1/audit-logs/export', { token: h.admin.token });
    assert.equal(exported.status, 200);
    assert.match(exported.text, /"type":"checkpoint"/);
    assert.equal(threadNices().get(process.pid), mainBefore);
  });
});

describe('what crosses between the threads', () => {
  test('a database error keeps what classifies it: its SQLSTATE and severity (a 409, a 400), and a lost connection stays a 503', () => {
    const across = (err: Error) => errorFromWire(structuredClone(errorToWire(err)));
    const constraint = across(Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505', severity: 'ERROR', constraint: 'users_email_key' }));
    assert.equal(pgErrorCode(constraint), '23505');
    assert.equal((constraint as Error & { constraint?: string }).constraint, 'users_email_key');
    assert.equal(isUnavailableError(across(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }))), true);
    assert.equal(isUnavailableError(across(new Error('Connection terminated unexpectedly'))), true);
    // A client's mistake with a string code is not taken for the database's.
    assert.equal(pgErrorCode(across(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }))), undefined);
  });

  test('on PGlite a worker\'s statements give way: after one that the service used the database beside, the next waits three times as long; otherwise it goes at once', () => {
    // The share the scans take is 25%: a 30 ms statement then leaves the service 90 ms.
    assert.equal(nextStatementAt(1000, 1030, 0.25, true), 1120);
    assert.equal(nextStatementAt(1000, 1030, 0.25, false), 1030);
    assert.equal(nextStatementAt(1000, 1010, 0.5, true), 1020);
  });
});
