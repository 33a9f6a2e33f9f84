import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client, auditRows } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();

test('an ADMIN creates a user who can then log in, and both actions are audited', async () => {
  const bob = await h.newUser({ name: 'Bob' });
  const me = await bob.client.get('/api/v1/profile', { token: bob.token });
  assert.equal(me.status, 200);
  assert.equal(me.body.name, 'Bob');
  const rows = await auditRows(h.server, `action = 'CREATE_USER' AND resource_id = $1`, [bob.id]);
  assert.equal(rows.length, 1);
  assert.equal(rows[0]!.actor_id, h.admin.id);
  assert.equal(new Client(h.server).ip.split('.').length, 4);
});
