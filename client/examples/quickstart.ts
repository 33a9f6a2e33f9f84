import { createClient, TeamlogError, type Task } from '@teamlog/client';

export async function quickstart(baseUrl: string, email: string, password: string): Promise<Task[]> {
  const teamlog = createClient({ baseUrl });
  teamlog.on('signed-out', ({ reason }) => console.log(`signed out: ${reason}`));
  await teamlog.login(email, password);
  const project = await teamlog.projects.create({ name: 'Spring launch' }); // Idempotency-Key sent for you

  // Real-time: handlers run in event_id order, once each, across reconnects.
  const updates: Task[] = [];
  teamlog.realtime.on('task-updated', (task) => void updates.push(task));
  teamlog.realtime.on('resync-required', ({ namespace }) => console.log(`reload what ${namespace} shows`));
  await teamlog.realtime.ready();

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

  while (updates.length < 2) await new Promise((resolve) => setTimeout(resolve, 50));
  await teamlog.logout();
  return updates;
}
