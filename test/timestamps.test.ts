// timestamptz values come out of both databases as the API's ISO 8601 UTC with milliseconds,
// read from PostgreSQL's text without a Date per value (db/timestamps.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isoTimestamp } from '../src/db/timestamps.js';
import { useTestDatabase } from './helpers/harness.js';

const h = useTestDatabase();

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

test('the service\'s connections return every timestamptz as ISO 8601 UTC with milliseconds, the same instant PostgreSQL holds', async () => {
  const inputs = [
    '2026-01-01 00:00:00+00',
    '2026-06-30 23:59:59.999999+00',
    '1999-12-31 23:59:59.9999+05',
    '2024-02-29 12:00:00.1-03:30',
    '2000-01-01 00:00:00.000001+14',
  ];
  const rows = await h.database.db.query<{ ts: string; ms: number }>(
    `SELECT ts, floor(extract(epoch FROM ts) * 1000)::float8 AS ms
       FROM unnest($1::timestamptz[]) WITH ORDINALITY AS t(ts, n) ORDER BY n`,
    [inputs],
  );
  assert.equal(rows.length, inputs.length);
  for (const [i, row] of rows.entries()) {
    assert.equal(typeof row.ts, 'string', inputs[i]);
    assert.match(row.ts, ISO_MS, inputs[i]);
    assert.equal(row.ts, new Date(row.ms).toISOString(), inputs[i]);
  }
  const [now] = await h.database.db.query<{ now: string }>('SELECT now()');
  assert.match(now!.now, ISO_MS);
});

test('text in another zone or form still becomes the same instant; what is not a timestamp passes through', () => {
  assert.equal(isoTimestamp('2026-11-22 20:52:49.123456+00'), '2026-11-22T20:52:49.123Z');
  assert.equal(isoTimestamp('2026-11-22 20:52:49+00'), '2026-11-22T20:52:49.000Z');
  assert.equal(isoTimestamp('2026-11-22 20:52:49.1+00'), '2026-11-22T20:52:49.100Z');
  assert.equal(isoTimestamp('2026-11-22 21:52:49.123456+01'), '2026-11-22T20:52:49.123Z');
  assert.equal(isoTimestamp('2026-11-22 20:52:49.5-03:30'), '2026-11-23T00:22:49.500Z');
  assert.equal(isoTimestamp('infinity'), 'infinity');
});
