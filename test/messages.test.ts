// Chat messages (docs/api.md section 4 "Messages"): the `general` room for every user and
// `project:<id>` rooms for that project's members and ADMINs (404 for everyone else and
// for unknown projects), newest first with cursor paging back, text limits, room syntax,
// and the new-message events row each message writes in its room.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Session } from './helpers/client.js';
import { addMember, allPages, countRows, createProject, eventRows, uniqueWord, type PageBody, type Problem } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';

const h = useTestServer();

// ── little helpers ─────────────────────────────────────────────────────────────────────

interface MessageBody {
  id: number;
  room: string;
  author_id: number;
  text: string;
  created_at: string;
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const desc = (...ids: number[]) => [...ids].sort((a, b) => b - a);

const send = (who: Session, body: { text?: unknown; room?: unknown }) =>
  who.client.post<MessageBody & Problem>('/api/v1/messages', body, { token: who.token });

// Not postMessage: the general-room tests send no room at all, and read back the whole message.
async function sent(who: Session, text: string, room?: string): Promise<MessageBody> {
  const res = await send(who, room === undefined ? { text } : { text, room });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

const read = (who: Session, query = '') => who.client.get<PageBody<MessageBody> & Problem>(`/api/v1/messages${query}`, { token: who.token });

const messagesIn = (room: string) => countRows(h.server, 'messages WHERE room = $1', [room]);

/** A project with its owner and one MEMBER. */
async function projectRoom() {
  const [owner, member] = await Promise.all([h.newUser(), h.newUser()]);
  const project = await createProject(owner);
  await addMember(owner, project.id, member.id);
  return { owner, member, projectId: project.id, room: `project:${project.id}` };
}

// ── general ────────────────────────────────────────────────────────────────────────────

describe('the general room', () => {
  test('any user posts to general (the default room) and every user reads it, newest first', async () => {
    const [alice, bob] = await Promise.all([h.newUser(), h.newUser()]);
    const text = `good morning ${uniqueWord()}`;
    const res = await send(alice, { text });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(res.body.room, 'general');
    assert.equal(res.body.author_id, alice.id);
    assert.equal(res.body.text, text);
    assert.match(res.body.created_at, ISO);
    const reply = await sent(bob, 'morning!', 'general');

    for (const query of ['', '?room=general']) {
      const listed = await read(bob, query);
      assert.equal(listed.status, 200, listed.text);
      assert.deepEqual(listed.body.data.slice(0, 2).map((m) => m.id), [reply.id, res.body.id], 'newest first');
      assert.deepEqual(listed.body.data[1], res.body);
    }
  });

  test('each message writes one new-message events row in its room, carrying the message', async () => {
    const user = await h.newUser();
    const m = await sent(user, `event check ${uniqueWord()}`);
    const events = await eventRows(h.server, `name = 'new-message' AND payload->>'id' = $1`, [String(m.id)]);
    assert.equal(events.length, 1);
    assert.equal(events[0]!.room, 'general');
    assert.deepEqual(events[0]!.payload, { ...m });

    const { member, room } = await projectRoom();
    const pm = await sent(member, 'in the project room', room);
    const projectEvents = await eventRows(h.server, `name = 'new-message' AND payload->>'id' = $1`, [String(pm.id)]);
    assert.deepEqual(projectEvents.map((e) => e.room), [room]);
    assert.equal(projectEvents[0]!.payload.text, 'in the project room');
  });

  test('accepts 2000 characters and refuses empty, blank, 2001 characters and unknown fields with 400', async () => {
    const { member, room } = await projectRoom();
    assert.equal((await sent(member, 'w'.repeat(2000), room)).text.length, 2000);
    for (const body of [{ text: '', room }, { text: '  \n ', room }, { text: 'w'.repeat(2001), room }, { room }, { text: 7, room }, { text: 'hi', room, author_id: 1 }]) {
      const res = await send(member, body);
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 60)}: ${res.text}`);
      assert.equal(res.body.code, 'VALIDATION_FAILED');
    }
    assert.equal(await messagesIn(room), 1, 'nothing stored for the refused messages');
  });
});

// ── project rooms ──────────────────────────────────────────────────────────────────────

describe('project rooms', () => {
  test('members post to and read their project room', async () => {
    const { owner, member, room } = await projectRoom();
    const a = await sent(owner, 'kick-off at ten', room);
    const b = await sent(member, 'see you there', room);
    assert.equal(a.room, room);
    const listed = await read(member, `?room=${room}`);
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.body.data.map((m) => m.id), [b.id, a.id]);
    assert.equal(listed.body.next_cursor, null);
    const general = await read(member, '?room=general');
    assert.ok(!general.body.data.some((m) => m.id === a.id || m.id === b.id), 'project messages stay out of general');
  });

  test('a non-member gets 404 reading or posting, and nothing is stored', async () => {
    const { owner, room } = await projectRoom();
    await sent(owner, 'private plans', room);
    const outsider = await h.newUser();
    const readRes = await read(outsider, `?room=${room}`);
    assert.equal(readRes.status, 404, readRes.text);
    assert.equal(readRes.body.code, 'NOT_FOUND');
    const postRes = await send(outsider, { text: 'let me in', room });
    assert.equal(postRes.status, 404, postRes.text);
    assert.equal(await messagesIn(room), 1);
  });

  test('an ADMIN who is not a member reads and posts in a project room', async () => {
    const { member, room } = await projectRoom();
    const m = await sent(member, 'hello admin', room);
    const adminMessage = await sent(h.admin, 'hello team', room);
    const listed = await read(h.admin, `?room=${room}`);
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.body.data.map((x) => x.id), [adminMessage.id, m.id]);
  });

  test('a room of a project that does not exist is 404', async () => {
    const user = await h.newUser();
    assert.equal((await read(user, '?room=project:987654321')).status, 404);
    assert.equal((await send(user, { text: 'anyone?', room: 'project:987654321' })).status, 404);
    assert.equal((await read(h.admin, '?room=project:987654321')).status, 404, 'not even for an ADMIN');
  });

  test('a removed member loses the room', async () => {
    const { owner, member, projectId, room } = await projectRoom();
    await sent(member, 'bye', room);
    const res = await owner.client.delete(`/api/v1/projects/${projectId}/members/${member.id}`, { token: owner.token });
    assert.equal(res.status, 204, res.text);
    assert.equal((await read(member, `?room=${room}`)).status, 404);
    assert.equal((await send(member, { text: 'still here?', room })).status, 404);
  });

  test('refuses malformed room names with 400', async () => {
    const user = await h.newUser();
    const bad = ['random', 'General', 'project:', 'project:0', 'project:01', 'project:abc', 'project:1x', 'project:-1', 'user:1', 'project:99999999999999999999', ' general'];
    for (const room of bad) {
      const r = await read(user, `?room=${encodeURIComponent(room)}`);
      assert.equal(r.status, 400, `GET ${room}: ${r.text}`);
      const p = await send(user, { text: 'hi', room });
      assert.equal(p.status, 400, `POST ${room}: ${p.text}`);
    }
    assert.equal((await send(user, { text: 'hi', room: 5 })).status, 400);
  });
});

// ── paging back ────────────────────────────────────────────────────────────────────────

describe('paging back through a room', () => {
  test('the cursor pages back through older messages with no duplicates or gaps, even as new ones arrive', async () => {
    const { owner, member, room } = await projectRoom();
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push((await sent(i % 2 ? owner : member, `message ${i}`, room)).id);

    const first = await read(member, `?room=${room}&limit=2`);
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(first.body.data.map((m) => m.id), desc(...ids).slice(0, 2));
    assert.ok(first.body.next_cursor);
    assert.match(first.headers.get('link') ?? '', /rel="next"/);

    const late = await sent(owner, 'a new message while paging', room);
    const second = await read(member, `?room=${room}&limit=2&cursor=${first.body.next_cursor}`);
    assert.deepEqual(second.body.data.map((m) => m.id), desc(...ids).slice(2, 4));
    const third = await read(member, `?room=${room}&limit=2&cursor=${second.body.next_cursor}`);
    assert.deepEqual(third.body.data.map((m) => m.id), [ids[0]]);
    assert.equal(third.body.next_cursor, null);
    assert.equal(third.headers.get('link'), null);

    const everything = await allPages<MessageBody>(member, `/api/v1/messages?room=${room}&limit=3`);
    assert.deepEqual(everything.map((m) => m.id), desc(...ids, late.id));
    assert.ok(everything.every((m) => m.room === room));
    assert.equal((await read(member, `?room=${room}&cursor=not-a-cursor`)).status, 400);
  });
});
