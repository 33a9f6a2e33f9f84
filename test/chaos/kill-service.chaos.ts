// Chaos: the service (`node dist/server.js` on PostgreSQL) killed with kill -9 in the middle of a
// burst of writes from several concurrent clients, then started again on the same database and
// port. Whatever was acknowledged is kept with exactly one audit record, a request cut off by the
// kill wrote its task and its record together or neither, and the restarted service seals every
// record (those the dead one left unsealed included) into a checkpoint chain that verifies.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Database } from '../../src/db/database.js';
import {
  closeStage, openStage, assertNothingLost, assertSealedAndVerified, isAcked, makeTeam, serviceEnv, sleep, startService, tail, writer, WriteBurst,
  type Service, type Stage,
} from './service.js';

let stage: Stage | undefined;
let urls: { ownerUrl: string; serviceUrl: string };
let owner: Database | undefined;
let service: Service | undefined;
const dataDir = mkdtempSync(path.join(tmpdir(), 'teamlog-chaos-kill-'));

before(async () => {
  stage = await openStage({ redis: false });
  ({ urls, owner } = stage);
}, { timeout: 60_000 });

after(async () => {
  await service?.kill();
  await closeStage(stage);
  rmSync(dataDir, { recursive: true, force: true });
});

test('kill -9 of the service during a write burst, then a restart on the same database: nothing acknowledged is lost, every record is sealed once and verifies', { timeout: 60_000 }, async (t) => {
  // One DATA_DIR and one port for both lives of the service, as a supervisor restarts it.
  const env = serviceEnv(urls, { DATA_DIR: dataDir });
  service = await startService(env);
  await service.waitReady();
  const { url, port } = service;
  const team = await makeTeam(url, 4);
  // Eight concurrent clients: two per member, each on its own connection pool.
  const burst = new WriteBurst(team.members.flatMap((m) => [writer(m, [url]), writer(m, [url])]), team.project.id).start();
  try {
    await burst.moreAcked(150, 30_000);
    const killedAt = Date.now();
    await service.kill();
    const unsealed = (await owner!.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM audit_log a WHERE NOT EXISTS (SELECT 1 FROM audit_seal s WHERE s.record_id = a.id)',
    ))[0]!.n;
    t.diagnostic(`killed after ${burst.acked.length} acknowledged writes; ${unsealed} audit records left unsealed by the dead process`);
    await sleep(300); // the writers meet a closed port meanwhile

    service = await startService(env, { port });
    await service.waitReady();
    await burst.moreAcked(100, 30_000);
    await burst.stop();

    const cutOff = burst.outcomes.filter((o) => o.status === 0);
    t.diagnostic(`outcomes: ${burst.summary()}`);
    assert.ok(cutOff.some((o) => o.startedAt <= killedAt), 'no request was in flight at the kill: the kill did not land mid-burst');
    // The dead service answers nothing, the restarted one answers like any other: no 5xx.
    const odd = burst.outcomes.filter((o) => !isAcked(o) && o.status !== 0);
    assert.deepEqual(odd.map((o) => `${o.status} ${o.error}`), [], `answers other than 201 or none:\n${tail(service.output())}`);

    const tasks = await assertNothingLost(owner!, burst.outcomes);
    t.diagnostic(`${tasks} tasks stored for ${burst.acked.length} acknowledged writes (${tasks - burst.acked.length} committed by requests the kill cut off)`);
    // The restarted service serves what the dead one acknowledged.
    const lastBeforeKill = burst.acked.filter((o) => o.endedAt <= killedAt).at(-1)!;
    const seen = await team.admin.client.get(`/api/v1/tasks/${lastBeforeKill.id}`, { token: team.admin.token });
    assert.equal(seen.status, 200, seen.text);
    assert.equal(seen.body.title, lastBeforeKill.title);

    const head = await assertSealedAndVerified(url, owner!, team.admin);
    t.diagnostic(`sealed and verified: ${head.tree_size} records under the newest checkpoint`);
  } finally {
    await burst.stop();
  }
});
