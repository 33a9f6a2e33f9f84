// Posts and likes (docs/api.md section 4 "Posts" and "Notifications"): the team feed (create,
// list with ?author_id= and pagination, read, delete by the author or an ADMIN), and likes,
// which are idempotent, count right under concurrency, and notify the author of a new like
// from someone else.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Session } from './helpers/client.js';
import { allPages, countRows, eventRows, inBatches, notificationRows, uniqueWord, type PageBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { needsPostgres } from './helpers/server.js';

const h = useTestServer();

// ── little helpers ─────────────────────────────────────────────────────────────────────

interface PostBody {
  id: number;
  author_id: number;
  content: string;
  like_count: number;
  liked_by_me: boolean;
  created_at: string;
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const desc = (...ids: number[]) => [...ids].sort((a, b) => b - a);

async function post(by: Session, content = `Hello ${uniqueWord()}`): Promise<PostBody> {
  const res = await by.client.post<PostBody>('/api/v1/posts', { content }, { token: by.token });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

const like = (who: Session, postId: number) => who.client.put<PostBody>(`/api/v1/posts/${postId}/like`, undefined, { token: who.token });
const unlike = (who: Session, postId: number) => who.client.delete<PostBody>(`/api/v1/posts/${postId}/like`, { token: who.token });
const getPost = (who: Session, postId: number) => who.client.get<PostBody>(`/api/v1/posts/${postId}`, { token: who.token });

const likedNotifications = (postId: number) => notificationRows(h.server, `kind = 'post_liked' AND payload->>'post_id' = $1`, [String(postId)]);

const likeRows = (postId: number) => countRows(h.server, 'post_likes WHERE post_id = $1', [postId]);

// ── the feed ───────────────────────────────────────────────────────────────────────────

describe('posting to the feed', () => {
  test('creates a post: 201 with Location, no likes yet', async () => {
    const author = await h.newUser();
    const res = await author.client.post<PostBody>('/api/v1/posts', { content: 'Shipped the beta today!' }, { token: author.token });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.headers.get('location'), `/api/v1/posts/${res.body.id}`);
    assert.equal(res.body.author_id, author.id);
    assert.equal(res.body.content, 'Shipped the beta today!');
    assert.equal(res.body.like_count, 0);
    assert.equal(res.body.liked_by_me, false);
    assert.match(res.body.created_at, ISO);
    const fetched = await getPost(author, res.body.id);
    assert.equal(fetched.status, 200);
    assert.deepEqual(fetched.body, res.body);
  });

  test('accepts 1 and 5000 characters and refuses empty, blank and 5001 characters with 400', async () => {
    const author = await h.newUser();
    assert.equal((await post(author, 'x')).content, 'x');
    assert.equal((await post(author, 'y'.repeat(5000))).content.length, 5000);
    for (const body of [{ content: '' }, { content: '   ' }, { content: 'z'.repeat(5001) }, {}, { content: 5 }, { content: 'ok', author_id: 1 }]) {
      const res = await author.client.post('/api/v1/posts', body, { token: author.token });
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 60)}: ${res.text}`);
      assert.equal(res.body.code, 'VALIDATION_FAILED');
    }
    const mine = await allPages<PostBody>(author, `/api/v1/posts?author_id=${author.id}`);
    assert.equal(mine.length, 2, 'nothing was stored for the refused posts');
  });

  test('lists the feed newest first, filters by author_id, and pages with a cursor', async () => {
    const [alice, bob] = await Promise.all([h.newUser(), h.newUser()]);
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push((await post(alice, `alice ${i}`)).id);
    const bobs = (await post(bob, 'bob speaks')).id;

    const feed = await alice.client.get<PageBody<PostBody>>('/api/v1/posts?limit=6', { token: alice.token });
    assert.equal(feed.status, 200, feed.text);
    assert.deepEqual(feed.body.data.map((p) => p.id), desc(...ids, bobs), 'the newest posts of everyone, newest first');

    const page1 = await bob.client.get<PageBody<PostBody>>(`/api/v1/posts?author_id=${alice.id}&limit=2`, { token: bob.token });
    assert.equal(page1.status, 200);
    assert.deepEqual(page1.body.data.map((p) => p.id), desc(...ids).slice(0, 2));
    assert.ok(page1.body.next_cursor);
    assert.match(page1.headers.get('link') ?? '', /rel="next"/);
    await post(alice, 'posted while bob was reading');
    const page2 = await bob.client.get<PageBody<PostBody>>(
      `/api/v1/posts?author_id=${alice.id}&limit=2&cursor=${page1.body.next_cursor}`,
      { token: bob.token },
    );
    assert.deepEqual(page2.body.data.map((p) => p.id), desc(...ids).slice(2, 4), 'the next page continues where the first ended');
    const page3 = await bob.client.get<PageBody<PostBody>>(
      `/api/v1/posts?author_id=${alice.id}&limit=2&cursor=${page2.body.next_cursor}`,
      { token: bob.token },
    );
    assert.deepEqual(page3.body.data.map((p) => p.id), [ids[0]]);
    assert.equal(page3.body.next_cursor, null);

    const bobsOnly = await allPages<PostBody>(alice, `/api/v1/posts?author_id=${bob.id}`);
    assert.deepEqual(bobsOnly.map((p) => p.id), [bobs]);
    assert.equal((await alice.client.get('/api/v1/posts?author_id=abc', { token: alice.token })).status, 400);
  });

  test('a missing post is 404 and a malformed id is 400', async () => {
    const user = await h.newUser();
    assert.equal((await getPost(user, 987654321)).status, 404);
    assert.equal((await user.client.get('/api/v1/posts/abc', { token: user.token })).status, 400);
    assert.equal((await like(user, 987654321)).status, 404);
    assert.equal((await unlike(user, 987654321)).status, 404);
  });
});

describe('deleting a post', () => {
  test('its author deletes it: 204, then 404', async () => {
    const author = await h.newUser();
    const p = await post(author);
    const res = await author.client.delete(`/api/v1/posts/${p.id}`, { token: author.token });
    assert.equal(res.status, 204, res.text);
    assert.equal((await getPost(author, p.id)).status, 404);
    assert.equal((await author.client.delete(`/api/v1/posts/${p.id}`, { token: author.token })).status, 404);
  });

  test('an ADMIN deletes anyone’s post, likes and all', async () => {
    const [author, fan] = await Promise.all([h.newUser(), h.newUser()]);
    const p = await post(author);
    assert.equal((await like(fan, p.id)).status, 200);
    const res = await h.admin.client.delete(`/api/v1/posts/${p.id}`, { token: h.admin.token });
    assert.equal(res.status, 204, res.text);
    assert.equal((await getPost(author, p.id)).status, 404);
    assert.equal(await likeRows(p.id), 0);
  });

  test('refuses someone else with 403 and keeps the post', async () => {
    const [author, other] = await Promise.all([h.newUser(), h.newUser()]);
    const p = await post(author);
    const res = await other.client.delete(`/api/v1/posts/${p.id}`, { token: other.token });
    assert.equal(res.status, 403, res.text);
    assert.equal(res.body.code, 'FORBIDDEN');
    assert.equal((await getPost(author, p.id)).status, 200);
  });
});

// ── likes ──────────────────────────────────────────────────────────────────────────────

describe('likes', () => {
  test('liking twice counts once: like_count 1, liked_by_me true for the liker only', async () => {
    const [author, fan] = await Promise.all([h.newUser(), h.newUser()]);
    const p = await post(author);
    const first = await like(fan, p.id);
    assert.equal(first.status, 200, first.text);
    assert.equal(first.body.id, p.id);
    assert.equal(first.body.like_count, 1);
    assert.equal(first.body.liked_by_me, true);
    const second = await like(fan, p.id);
    assert.equal(second.status, 200);
    assert.equal(second.body.like_count, 1);
    assert.equal(second.body.liked_by_me, true);
    assert.equal(await likeRows(p.id), 1);

    const asAuthor = await getPost(author, p.id);
    assert.equal(asAuthor.body.like_count, 1);
    assert.equal(asAuthor.body.liked_by_me, false);
    const inFeed = (await allPages<PostBody>(fan, `/api/v1/posts?author_id=${author.id}`))[0]!;
    assert.equal(inFeed.like_count, 1);
    assert.equal(inFeed.liked_by_me, true);
  });

  test('unliking twice leaves like_count 0 and liked_by_me false', async () => {
    const [author, fan, other] = await Promise.all([h.newUser(), h.newUser(), h.newUser()]);
    const p = await post(author);
    await like(fan, p.id);
    await like(other, p.id);
    const first = await unlike(fan, p.id);
    assert.equal(first.status, 200, first.text);
    assert.equal(first.body.like_count, 1);
    assert.equal(first.body.liked_by_me, false);
    const second = await unlike(fan, p.id);
    assert.equal(second.status, 200);
    assert.equal(second.body.like_count, 1, "another user's like stays");
    await unlike(other, p.id);
    const last = await unlike(other, p.id);
    assert.equal(last.body.like_count, 0);
    assert.equal(last.body.liked_by_me, false);
    assert.equal(await likeRows(p.id), 0);
    const never = await unlike(author, p.id);
    assert.equal(never.status, 200, 'unliking a post you never liked is fine');
    assert.equal(never.body.like_count, 0);
  });

  test('a new like notifies the author once with post_liked {post_id, actor_id} and pushes post-liked', async () => {
    const [author, fan] = await Promise.all([h.newUser(), h.newUser()]);
    const p = await post(author);
    await like(fan, p.id);
    await like(fan, p.id);
    const notes = await likedNotifications(p.id);
    assert.equal(notes.length, 1, 'a repeated like is not a new like');
    assert.equal(notes[0]!.user_id, author.id);
    assert.deepEqual(notes[0]!.payload, { post_id: p.id, actor_id: fan.id });

    const listed = await author.client.get<PageBody<{ id: number; kind: string; payload: Record<string, unknown> }>>('/api/v1/notifications', { token: author.token });
    assert.deepEqual(listed.body.data.map((n) => [n.id, n.kind]), [[notes[0]!.id, 'post_liked']]);

    const events = await eventRows(h.server, `room = $1`, [`user:${author.id}`]);
    const pushed = events.filter((e) => e.name === 'post-liked');
    assert.equal(pushed.length, 1);
    assert.deepEqual({ ...pushed[0]!.payload }, { post_id: p.id, user_id: fan.id, like_count: 1 });
    assert.ok(events.some((e) => e.name === 'new-notification' && e.payload.id === notes[0]!.id));

    await unlike(fan, p.id);
    assert.equal((await likedNotifications(p.id)).length, 1, 'unliking notifies nobody');
  });

  test('liking your own post counts but notifies nobody', async () => {
    const author = await h.newUser();
    const p = await post(author);
    const res = await like(author, p.id);
    assert.equal(res.status, 200);
    assert.equal(res.body.like_count, 1);
    assert.equal(res.body.liked_by_me, true);
    assert.equal((await likedNotifications(p.id)).length, 0);
    assert.equal((await notificationRows(h.server, 'user_id = $1', [author.id])).length, 0);
  });

  test('100 different users liking one post at once give like_count 100', { skip: needsPostgres }, async () => {
    const author = await h.newUser();
    const p = await post(author);
    const fans = await inBatches(Array.from({ length: 100 }), 4, () => h.newUser());
    const results = await Promise.all(fans.map((fan) => like(fan, p.id)));
    assert.deepEqual(results.map((r) => r.status), Array(100).fill(200), results.find((r) => r.status !== 200)?.text);
    assert.ok(results.every((r) => r.body.liked_by_me === true));
    const after = await getPost(author, p.id);
    assert.equal(after.body.like_count, 100);
    assert.equal(await likeRows(p.id), 100);
    assert.equal((await likedNotifications(p.id)).length, 100);
  });
});

describe('If-Match on likes', () => {
  test('a like with the ETag the caller read succeeds; a stale one is 412 and changes nothing', async () => {
    const author = await h.newUser();
    const fan = await h.newUser();
    const other = await h.newUser();
    const p = await post(author);
    const read = await getPost(fan, p.id);
    assert.equal(read.status, 200);
    const etag = read.headers.get('etag')!;
    assert.match(etag, /^"post-\d+-v\d+"$/);
    // Someone else likes it meanwhile: the post's version moves on.
    assert.equal((await like(other, p.id)).status, 200);
    const stale = await fan.client.put(`/api/v1/posts/${p.id}/like`, undefined, { token: fan.token, headers: { 'if-match': etag } });
    assert.equal(stale.status, 412);
    assert.equal(stale.body.code, 'PRECONDITION_FAILED');
    assert.equal(await likeRows(p.id), 1, 'the stale like changed nothing');

    const fresh = await getPost(fan, p.id);
    const ok = await fan.client.put<PostBody>(`/api/v1/posts/${p.id}/like`, undefined, { token: fan.token, headers: { 'if-match': fresh.headers.get('etag')! } });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.like_count, 2);
    assert.equal(ok.body.liked_by_me, true);
    // The liker's own view is a different representation (liked_by_me), with its own ETag.
    assert.match(ok.headers.get('etag')!, /-liked"$/);
    assert.doesNotMatch((await getPost(author, p.id)).headers.get('etag')!, /-liked"$/);
    const unliked = await fan.client.delete<PostBody>(`/api/v1/posts/${p.id}/like`, { token: fan.token, headers: { 'if-match': ok.headers.get('etag')! } });
    assert.equal(unliked.status, 200);
    assert.equal(unliked.body.like_count, 1);
  });
});
