// npm run seed: a small living team in the configured database (embedded by default), made
// through the same service functions the API uses, so every action is audited as usual.
// Run it while the server is stopped: embedded PGlite allows one process at a time.
import { randomUUID } from 'node:crypto';
import type { ActorContext } from './context.js';
import { loadConfig } from './config.js';
import { openDatabase } from './db/open.js';
import { ensureFirstAdmin } from './first-admin.js';
import { createLogger } from './logger.js';
import { lockDataDir } from './ops/data-dir-lock.js';
import { insertSession, revokeSession } from './modules/sessions/sessions.repository.js';
import { findFirstAdmin, findUserByEmail } from './modules/users/users.repository.js';
import type { UserRow } from './modules/users/users.repository.js';
import type { TaskStatus } from './modules/tasks/tasks.status.js';
import { createDeps } from './runtime.js';
import { createServices } from './services.js';

export const DEMO_PASSWORD = 'teamlog-demo-password';
const PEOPLE = ['Alice Martin', 'Bob Chen', 'Carol Diaz', 'Dan Okafor', 'Erin Novak'];
const PROJECTS = [
  { name: 'Website relaunch', description: 'New marketing site and docs portal' },
  { name: 'Mobile app', description: 'iOS and Android clients for the team feed' },
  { name: 'Infrastructure', description: 'Databases, backups, monitoring and on-call' },
];
const TASK_WORDS = ['Design', 'Review', 'Migrate', 'Document', 'Test', 'Deploy', 'Benchmark', 'Refactor', 'Fix', 'Plan'];
const TASK_THINGS = ['login page', 'search index', 'backup job', 'release notes', 'push notifications', 'audit export', 'CI pipeline', 'style guide', 'error pages', 'rate limits'];
// How to reach each status from TODO through allowed transitions.
const PATHS: Record<TaskStatus, TaskStatus[]> = {
  TODO: [],
  IN_PROGRESS: ['IN_PROGRESS'],
  IN_REVIEW: ['IN_PROGRESS', 'IN_REVIEW'],
  DONE: ['IN_PROGRESS', 'IN_REVIEW', 'DONE'],
  CANCELED: ['CANCELED'],
};
const STATUSES = Object.keys(PATHS) as TaskStatus[];

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel);
  // The embedded database is one process's alone: a running server holds it.
  if (!config.databaseUrl) lockDataDir(config.dataDir);
  const db = await openDatabase(config, (err) => log.error({ err }, 'database error'));
  try {
    const deps = createDeps(config, db, log);
    await ensureFirstAdmin(deps);
    const s = createServices(deps);
    if (await findUserByEmail(db, 'alice@example.com')) {
      console.log('The demo team is already there (alice@example.com exists); nothing to do.');
      return;
    }
    const adminRow = (await findFirstAdmin(db))!;
    // Each person acts through a session of their own, as over the API (use cases check the
    // caller's session); the sessions end with the seed.
    const sessions = new Map<number, number>();
    for (const u of [adminRow]) sessions.set(u.id, await insertSession(db, { userId: u.id, ttlSeconds: 3600, ip: null, userAgent: 'teamlog-seed' }));
    const as = (u: UserRow): ActorContext => ({
      actor: { id: u.id, role: u.role, email: u.email, name: u.name, sessionId: sessions.get(u.id)! },
      ip: null,
      userAgent: 'teamlog-seed',
      requestId: `seed-${randomUUID()}`,
    });

    const people: UserRow[] = [];
    for (const name of PEOPLE) {
      const email = `${name.split(' ')[0]!.toLowerCase()}@example.com`;
      const person = await s.users.create(as(adminRow), { email, name, password: DEMO_PASSWORD });
      sessions.set(person.id, await insertSession(db, { userId: person.id, ttlSeconds: 3600, ip: null, userAgent: 'teamlog-seed' }));
      people.push(person);
    }
    const [alice, bob, carol, dan, erin] = people as [UserRow, UserRow, UserRow, UserRow, UserRow];
    const teams = [
      { owner: alice, members: [bob, carol, dan] },
      { owner: bob, members: [alice, erin] },
      { owner: carol, members: [dan, erin, alice] },
    ];

    let taskCount = 0;
    for (const [i, def] of PROJECTS.entries()) {
      const team = teams[i]!;
      const project = await s.projects.create(as(team.owner), def);
      for (const m of team.members) await s.projects.setMember(as(team.owner), project.id, m.id, 'MEMBER', undefined);
      const crew = [team.owner, ...team.members];
      for (let n = 0; n < 20; n++) {
        const author = crew[n % crew.length]!;
        const assignee = n % 4 === 3 ? null : crew[(n + 1) % crew.length]!;
        const task = await s.tasks.create(as(author), {
          project_id: project.id,
          title: `${TASK_WORDS[(n + i) % TASK_WORDS.length]} the ${TASK_THINGS[(n * 3 + i) % TASK_THINGS.length]}`,
          description: `Part of ${def.name}. Task ${n + 1} of 20.`,
          assignee_id: assignee?.id ?? null,
        });
        for (const status of PATHS[STATUSES[(n + i) % STATUSES.length]!]) {
          await s.tasks.setStatus(as(assignee ?? author), task.id, status, undefined);
        }
        taskCount++;
      }
      await s.messages.postMessage(as(team.owner), { room: `project:${project.id}`, text: `Welcome to ${def.name}!` });
      await s.messages.postMessage(as(team.members[0]!), { room: `project:${project.id}`, text: 'Glad to be here. Where do we start?' });
    }

    const feed = [
      [alice, 'Shipped the new login page today. Feedback welcome!'],
      [bob, 'Reminder: the mobile beta closes on Friday.'],
      [carol, 'Backups now run every hour and are tested nightly.'],
      [dan, 'Who is up for a code review session tomorrow?'],
      [erin, 'The style guide draft is in the docs folder.'],
    ] as const;
    for (const [i, [author, content]] of feed.entries()) {
      const post = await s.posts.create(as(author), content);
      for (const liker of people.slice(0, i + 1)) if (liker.id !== author.id) await s.posts.like(as(liker), post.id, undefined);
    }
    for (const [author, text] of [[alice, 'Good morning, team!'], [bob, 'Morning! Standup in 10.'], [erin, 'On my way.']] as const) {
      await s.messages.postMessage(as(author), { text });
    }

    for (const sessionId of sessions.values()) await revokeSession(db, sessionId, 'logout');
    console.log(`Seeded: ${people.length} users, ${PROJECTS.length} projects, ${taskCount} tasks, ${feed.length} posts with likes, and messages.`);
    console.log(`Log in as any of ${people.map((p) => p.email).join(', ')} with the password "${DEMO_PASSWORD}".`);
  } finally {
    await db.close();
  }
}

main().catch((err) => {
  console.error('Seeding failed:', err instanceof Error ? err.message : err);
  process.exit(1);
});
