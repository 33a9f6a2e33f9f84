// A socket's rooms follow its user's memberships while it stays connected (docs/api.md §6):
// a project its user creates is joined at once, as one they are added to is.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { addMember, createProject, createTask } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { connectRecording, type ClientSocket } from './helpers/sockets.js';

const h = useTestServer();
const open: ClientSocket[] = [];
after(() => open.splice(0).forEach((s) => s.close()));

test("a project's creator receives its task events on the socket they had open before creating it", async () => {
  const owner = await h.newUser();
  const { socket, rec } = await connectRecording(owner);
  open.push(socket);
  const project = await createProject(owner);
  const task = await createTask(owner, project.id);
  const created = await rec.waitFor((e) => e.name === 'task-created' && e.payload.id === task.id);
  assert.equal(created.payload.project_id, project.id);
});

test('a member added to a project receives its task events on the socket they had open before', async () => {
  const [owner, member] = [await h.newUser(), await h.newUser()];
  const { socket, rec } = await connectRecording(member);
  open.push(socket);
  const project = await createProject(owner);
  await addMember(owner, project.id, member.id);
  const task = await createTask(owner, project.id);
  const created = await rec.waitFor((e) => e.name === 'task-created' && e.payload.id === task.id);
  assert.equal(created.payload.project_id, project.id);
});
