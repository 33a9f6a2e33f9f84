import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client, createUser, loginAdmin, auditRows } from './helpers/client.js';
import { startTestServer, type TestServer } from './helpers/server.js';

let server: TestServer;
before(async () => (server = await startTestServer()));
after(() => server?.close());

test('an ADMIN creates a user who can then log in, and both actions are audited', async () => {
  const admin = await loginAdmin(server);
  const bob = await createUser(server, admin, { name: 'Bob' });
  const me = await bob.client.get('/api/v1/profile', { token: bob.token });
  assert.equal(me.status, 200);
  assert.equal(me.body.name, 'Bob');
  const rows = await auditRows(server, `action = 'CREATE_USER' AND resource_id = $1`, [bob.id]);
  assert.equal(rows.length, 1);
  assert.equal(rows[0]!.actor_id, admin.id);
  assert.equal(new Client(server).ip.split('.').length, 4);
});
