// An example client of the Teamlog API, written as a user would: openapi-fetch over the types
// openapi-typescript generates from /api/v1/openapi.json. test/typed-client.test.ts generates
// those types from the document the app serves, type-checks this file against them (a schema
// change that breaks this client fails the test) and runs it against a live server.
import createClient from 'openapi-fetch';
import type { components, paths } from './teamlog-api.js';

export type Task = components['schemas']['Task'];
export type Project = components['schemas']['Project'];
type Problem = components['schemas']['Problem'];

/** Fails with the problem's code and detail: every error of the API is a problem document. */
function fail(what: string, problem: Problem | undefined): never {
  throw new Error(`${what}: ${problem?.code ?? 'no answer'} ${problem?.detail ?? ''}`.trim());
}

/** Logs in, creates a project with one task, and lists the project's tasks. */
export async function tryTeamlog(baseUrl: string, email: string, password: string): Promise<{ project: Project; tasks: Task[] }> {
  const api = createClient<paths>({ baseUrl });

  const login = await api.POST('/api/v1/auth/login', { body: { email, password } });
  if (!login.data) fail('login', login.error);
  const { access_token, user } = login.data;
  api.use({ onRequest: ({ request }) => void request.headers.set('Authorization', `Bearer ${access_token}`) });

  const created = await api.POST('/api/v1/projects', {
    body: { name: `Launch plan of ${user.name}`, description: 'Everything for the spring launch' },
    params: { header: { 'Idempotency-Key': `launch-plan-${user.id}-${Date.now()}` } },
  });
  if (!created.data) fail('create the project', created.error);
  const project = created.data;

  const task = await api.POST('/api/v1/tasks', { body: { project_id: project.id, title: 'Write the launch announcement', assignee_id: user.id } });
  if (!task.data) fail('create a task', task.error);
  const moved = await api.PUT('/api/v1/tasks/{id}/status', {
    params: { path: { id: task.data.id }, header: { 'If-Match': task.response.headers.get('etag') ?? undefined } },
    body: { status: 'IN_PROGRESS' },
  });
  if (!moved.data) fail('start the task', moved.error);

  // A page's next_cursor goes back as ?cursor= as it is (null: openapi-fetch leaves it out).
  const tasks: Task[] = [];
  let cursor: string | null = null;
  do {
    const page: { data?: components['schemas']['TaskPage']; error?: Problem } = await api.GET('/api/v1/tasks', { params: { query: { project_id: project.id, limit: 50, cursor } } });
    if (!page.data) fail('list the tasks', page.error);
    tasks.push(...page.data.data);
    cursor = page.data.next_cursor;
  } while (cursor !== null);
  return { project, tasks };
}
