// An export streams for as long as its reader takes; the right it began with is checked again
// before each block it reads, so a demoted ADMIN or a revoked session stops it at once instead
// of receiving the rest of the log (evidence.service.ts).
// In the PostgreSQL pass only: the check is above the database, the same on both, and the 80 MB
// this needs (RECORDS below) took over a minute through embedded PGlite on a loaded CI machine.
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import type { Session } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';
import { onPostgres } from './helpers/server.js';

const h = useTestServer();
const skip = onPostgres ? false : 'streams 80 MB: PostgreSQL pass only (see the top of this file)';
/**
 * Records appended behind the service's back, each with 3 KB of metadata: some 80 MB of NDJSON
 * (a line holds the metadata twice), more than twice what the loopback socket buffers can hold,
 * so the server really waits. Those buffers grow with the kernel's TCP settings: on a VM whose
 * tcp_rmem allows 32 MB, 6,000 records (40 MB) nearly all fitted, and the demoted ADMIN
 * received every one of them before the next block's check refused the rest.
 */
const RECORDS = 12_000;

h.before(async () => {
  if (skip) return;
  await h.server.owner.query(
    `INSERT INTO audit_log (actor_id, action, resource_type, resource_id, result, metadata, ip, user_agent, request_id)
     SELECT NULL, 'CREATE_TASK', 'TASK', g, 'SUCCESS', jsonb_build_object('filler', repeat('x', 3000)), '10.0.0.1', 'revocation-test', 'fill-' || g
       FROM generate_series(1, $1::int) g`,
    [RECORDS],
  );
});

interface Outcome {
  status: number;
  lines: string[];
  /** Whether the response ended cleanly (its last chunk), rather than being cut off. */
  complete: boolean;
}

/**
 * Reads an NDJSON export as `session`, pausing after the first chunk until `meanwhile` has run
 * (the server meanwhile blocks on backpressure, part-way through the log), then reads the rest.
 */
function pausedExport(session: Session, meanwhile: () => Promise<void>): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const url = new URL('/api/v1/audit-logs/export?format=ndjson', h.server.url);
    const req = http.get(url, { headers: { authorization: `Bearer ${session.token}`, 'x-forwarded-for': session.client.ip, 'accept-encoding': 'identity' } }, (res) => {
      const chunks: Buffer[] = [];
      let paused = false;
      let complete = false;
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        if (paused) return;
        paused = true;
        res.pause();
        meanwhile().then(() => setTimeout(() => res.resume(), 100), reject);
      });
      res.on('end', () => (complete = true));
      res.on('error', () => {});
      res.on('close', () => resolve({ status: res.statusCode ?? 0, lines: Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean), complete }));
    });
    req.on('error', reject);
  });
}

/** What a refused export answered (its problem+json), for the assertion's message. */
const problemOf = (o: Outcome) => o.lines.join('\n').slice(0, 1000);
const lastType = (o: Outcome) => (JSON.parse(o.lines.at(-1)!) as { type?: string }).type;
/** Whether any line is the checkpoint line (a cut-off response may end in half a line). */
const hasCheckpoint = (o: Outcome) => o.lines.some((l) => l.startsWith('{"type":"checkpoint"'));

test('control: an ADMIN who keeps the right, paused the same way, gets the whole log and its checkpoint line', { skip }, async () => {
  const admin = await h.newUser({ role: 'ADMIN' });
  const o = await pausedExport(admin, async () => {});
  assert.equal(o.status, 200, problemOf(o));
  assert.equal(o.complete, true);
  assert.equal(lastType(o), 'checkpoint');
  assert.ok(o.lines.length > RECORDS, `${o.lines.length} lines`);
});

test('an ADMIN demoted while the export streams: it stops, short of the log and without its checkpoint line', { skip }, async () => {
  const admin = await h.newUser({ role: 'ADMIN' });
  const o = await pausedExport(admin, async () => {
    const res = await h.admin.client.put(`/api/v1/users/${admin.id}/role`, { role: 'USER' }, { token: h.admin.token });
    assert.equal(res.status, 200, res.text);
  });
  assert.equal(o.status, 200, problemOf(o));
  assert.equal(o.complete, false, 'the response is cut off, not ended');
  assert.equal(hasCheckpoint(o), false);
  assert.ok(o.lines.length < RECORDS, `${o.lines.length} lines reached a demoted ADMIN`);
});

test('a session logged out while the export streams: it stops too', { skip }, async () => {
  const admin = await h.newUser({ role: 'ADMIN' });
  const o = await pausedExport(admin, async () => {
    const res = await admin.client.post('/api/v1/auth/logout', undefined, { token: admin.token });
    assert.equal(res.status, 204, res.text);
  });
  assert.equal(o.complete, false, 'the response is cut off, not ended');
  assert.equal(hasCheckpoint(o), false);
  assert.ok(o.lines.length < RECORDS, `${o.lines.length} lines reached a revoked session`);
});
