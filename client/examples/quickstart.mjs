// @ts-check
// Run it: TEAMLOG_URL=http://127.0.0.1:3000 TEAMLOG_EMAIL=… TEAMLOG_PASSWORD=… node quickstart.mjs
import { createClient, TeamlogError } from '@teamlog/client';

const { TEAMLOG_URL = 'http://127.0.0.1:3000', TEAMLOG_EMAIL, TEAMLOG_PASSWORD } = process.env;
if (!TEAMLOG_EMAIL || !TEAMLOG_PASSWORD) {
  console.error('Set TEAMLOG_EMAIL and TEAMLOG_PASSWORD (and TEAMLOG_URL, by default http://127.0.0.1:3000).');
  process.exit(2);
}

const teamlog = createClient({ baseUrl: TEAMLOG_URL });
teamlog.on('signed-out', ({ reason }) => console.log(`signed out: ${reason}`));
const me = await teamlog.login(TEAMLOG_EMAIL, TEAMLOG_PASSWORD);
console.log(`logged in as ${me.email}`);
const project = await teamlog.projects.create({ name: 'Spring launch' }); // Idempotency-Key sent for you

// Real-time: handlers run in event_id order, once each, across reconnects.
/** @type {import('@teamlog/client').Task[]} */
const updates = [];
teamlog.realtime.on('task-updated', (task) => {
  updates.push(task);
  console.log(`task-updated: ${task.title} is ${task.status}`);
});
teamlog.realtime.on('resync-required', ({ namespace }) => console.log(`reload what ${namespace} shows`));
await teamlog.realtime.ready(); // connected: every event committed from now on reaches the handlers

const task = await teamlog.tasks.create({ project_id: project.id, title: 'Write the announcement' });
await teamlog.tasks.setStatus(task.id, 'IN_PROGRESS'); // If-Match: the version created
try {
  await teamlog.tasks.setStatus(task.id, 'CANCELED');
  await teamlog.tasks.setStatus(task.id, 'DONE');
} catch (err) {
  if (!(err instanceof TeamlogError) || err.code !== 'INVALID_TRANSITION') throw err;
  console.log(`allowed from ${err.currentStatus}: ${err.allowedTransitions?.join(', ')}`);
}

// Every page, fetched as the loop gets there.
for await (const t of teamlog.tasks.list({ project_id: project.id, limit: 50 })) console.log(t.id, t.title, t.status);

// The two moves' events (IN_PROGRESS, then CANCELED) come over the socket as they commit.
const deadline = Date.now() + 10_000;
while (updates.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
await teamlog.logout(); // closes the sockets too
if (updates.length < 2) {
  console.error(`only ${updates.length} of 2 task-updated events within 10 s`);
  process.exit(1);
}
