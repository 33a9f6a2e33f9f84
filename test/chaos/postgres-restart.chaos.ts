// Chaos: PostgreSQL (a cluster of the test's own, never the machine's) stopped and started again
// while clients write: first `pg_ctl stop -m fast` (sessions terminated, 57P01), then
// `-m immediate` (a crash: connections cut, recovery at the next start). Meanwhile clients get
// 201 or 503 UNAVAILABLE as problem+json, never a 500; /health/ready says 503, then 200 again
// without the service being restarted; nothing acknowledged is lost, and the log seals and
// verifies afterwards.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Database } from '../../src/db/database.js';
import type { PgCluster } from './cluster.js';
import {
  closeStage, openStage, assertNothingLost, assertSealedAndVerified, isAcked, makeTeam, serviceEnv, sleep, startService, tail, writer, WriteBurst,
  type Outcome, type Stage, type Service,
} from './service.js';

let stage: Stage | undefined;
let cluster: PgCluster | undefined;
let urls: { ownerUrl: string; serviceUrl: string };
let owner: Database | undefined;
let service: Service | undefined;

before(async () => {
  stage = await openStage({ redis: false });
  ({ cluster, urls, owner } = stage);
}, { timeout: 60_000 });

after(async () => {
  await service?.kill();
  await closeStage(stage);
});

/** What a client may be answered while the database is away: 503 UNAVAILABLE, as problem+json. */
const unavailable = (o: Outcome) => o.status === 503 && /^application\/problem\+json/.test(o.contentType ?? '') && o.code === 'UNAVAILABLE';

test('PostgreSQL stopped (fast, then immediate) and started under load: only 503 UNAVAILABLE meanwhile, nothing acknowledged lost, ready again without a restart', { timeout: 60_000 }, async (t) => {
  service = await startService(serviceEnv(urls));
  await service.waitReady();
  const pid = service.child.pid;
  const team = await makeTeam(service.url, 4);
  const url = service.url;
  const burst = new WriteBurst(team.members.flatMap((m) => [writer(m, [url]), writer(m, [url])]), team.project.id, { pauseAfterFailureMs: 50 }).start();
  try {
    for (const mode of ['fast', 'immediate'] as const) {
      await burst.moreAcked(80, 30_000);
      const from = burst.outcomes.length;
      await cluster!.stop(mode);
      const stoppedAt = Date.now();
      await burst.until(() => burst.outcomes.slice(from).some((o) => o.status === 503), 10_000, `a 503 after pg_ctl stop -m ${mode}`);
      const probe = await fetch(`${url}/health/ready`);
      assert.equal(probe.status, 503, `readiness while PostgreSQL is stopped (-m ${mode})`);
      await sleep(1000);
      await cluster!.start();
      const startedAt = Date.now();
      await service.waitReady(30_000);
      await burst.moreAcked(80, 30_000);
      const during = burst.outcomes.slice(from).filter((o) => o.startedAt >= stoppedAt && o.endedAt <= startedAt);
      t.diagnostic(
        `-m ${mode}: ${startedAt - stoppedAt} ms from the stop's end to the start's; answers to requests made in between: ${burst.summary(during)}` +
          `${during.some(isAcked) ? ' (the 201s: PostgreSQL accepts connections before pg_ctl start returns)' : ''}; ` +
          `ready again ${Date.now() - startedAt} ms later, and 80 more writes acknowledged`,
      );
    }
  } finally {
    await burst.stop();
  }

  assert.ok(service.alive() && service.child.pid === pid, 'the service restarted (or died) instead of recovering');
  t.diagnostic(`outcomes: ${burst.summary()}`);
  const wrong = burst.outcomes.filter((o) => !isAcked(o) && !unavailable(o));
  assert.deepEqual(
    wrong.map((o) => `${o.status} ${o.contentType ?? ''} ${o.error ?? ''}`),
    [],
    `answers other than 201 and 503 UNAVAILABLE (problem+json):\n${tail(service.output())}`,
  );
  assert.ok(burst.outcomes.some(unavailable), 'no client ever saw the outage');

  const tasks = await assertNothingLost(owner!, burst.outcomes);
  t.diagnostic(`${tasks} tasks stored for ${burst.acked.length} acknowledged writes`);
  const head = await assertSealedAndVerified(url, owner!, team.admin);
  t.diagnostic(`sealed and verified: ${head.tree_size} records under the newest checkpoint`);
});
