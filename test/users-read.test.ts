// Users (docs/api.md section 4 "Users"), reading: GET /users (the list, its filters and pages) and
// GET /users/:id (ETags, who sees the email). Creation and updates: users-write.test.ts; roles,
// the active flag, deletion and the last-ADMIN guard: users-admin.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Client } from './helpers/client.js';
import { uniqueWord, type PageBody } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import type { UserBody } from './helpers/users.js';

const h = useTestServer();

// ── GET /users ─────────────────────────────────────────────────────────────────────────

describe('GET /users', () => {
  test('lists users to any authenticated user, newest first, and refuses anonymous callers', async () => {
    const word = uniqueWord();
    const a = await h.newUser({ name: `Ann ${word}` });
    const b = await h.newUser({ name: `Ben ${word}` });
    const c = await h.newUser({ name: `Cat ${word}` });
    const viewer = await h.newUser();

    const res = await viewer.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}`, { token: viewer.token });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.data.map((u) => u.id), [c.id, b.id, a.id]);
    assert.equal(res.body.next_cursor, null);
    assert.equal(res.headers.get('link'), null);

    const all = await viewer.client.get<PageBody<UserBody>>('/api/v1/users?limit=100', { token: viewer.token });
    const ids = all.body.data.map((u) => u.id);
    assert.deepEqual(ids, [...ids].sort((x, y) => y - x));
    assert.ok(ids.includes(h.admin.id) || all.body.next_cursor !== null);

    const anonymous = await new Client(h.server).get('/api/v1/users');
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.code, 'UNAUTHENTICATED');
  });

  test('filters by role and by active flag', async () => {
    const word = uniqueWord();
    const plain = await h.newUser({ name: `Plain ${word}` });
    const boss = await h.newUser({ name: `Boss ${word}`, role: 'ADMIN' });
    const gone = await h.newUser({ name: `Gone ${word}` });
    const off = await h.admin.client.put(`/api/v1/users/${gone.id}/active`, { active: false }, { token: h.admin.token });
    assert.equal(off.status, 200);

    const list = async (query: string) => {
      const res = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}&${query}`, { token: h.admin.token });
      assert.equal(res.status, 200, res.text);
      return res.body.data.map((u) => u.id);
    };
    assert.deepEqual(await list('role=ADMIN'), [boss.id]);
    assert.deepEqual(await list('role=USER'), [gone.id, plain.id]);
    assert.deepEqual(await list('active=false'), [gone.id]);
    assert.deepEqual(await list('active=true'), [boss.id, plain.id]);
    assert.deepEqual(await list('role=USER&active=true'), [plain.id]);

    const badRole = await h.admin.client.get(`/api/v1/users?role=ROOT`, { token: h.admin.token });
    assert.equal(badRole.status, 400);
    assert.equal(badRole.body.code, 'VALIDATION_FAILED');
    const unknownFilter = await h.admin.client.get(`/api/v1/users?colour=red`, { token: h.admin.token });
    assert.equal(unknownFilter.status, 400);

    // Leave no extra active ADMIN behind for the last-ADMIN tests.
    await h.admin.client.put(`/api/v1/users/${boss.id}/role`, { role: 'USER' }, { token: h.admin.token });
  });

  test('q matches names case-insensitively for everyone, and emails only for ADMINs', async () => {
    const word = uniqueWord();
    const mailWord = uniqueWord();
    const named = await h.newUser({ name: `Quinn ${word.toUpperCase()}` });
    const mailed = await h.newUser({ name: 'Mail Only', email: `${mailWord}@test.local` });
    const viewer = await h.newUser();

    const byName = await viewer.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}`, { token: viewer.token });
    assert.deepEqual(byName.body.data.map((u) => u.id), [named.id]);

    const userByEmail = await viewer.client.get<PageBody<UserBody>>(`/api/v1/users?q=${mailWord}`, { token: viewer.token });
    assert.equal(userByEmail.status, 200);
    assert.deepEqual(userByEmail.body.data, [], 'a USER must not find people by their email');

    const adminByEmail = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${mailWord.toUpperCase()}`, { token: h.admin.token });
    assert.deepEqual(adminByEmail.body.data.map((u) => u.id), [mailed.id]);
  });

  test('q treats % and _ literally', async () => {
    const word = uniqueWord();
    const percent = await h.newUser({ name: `100% ${word}` });
    await h.newUser({ name: `1000 ${word}` });
    const res = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${encodeURIComponent('0%')}&limit=100`, { token: h.admin.token });
    assert.equal(res.status, 200);
    assert.ok(res.body.data.length >= 1);
    assert.ok(res.body.data.every((u) => u.name.includes('0%')), 'only names containing a literal "0%" match');
    assert.ok(res.body.data.some((u) => u.id === percent.id));
    const underscore = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}_&limit=100`, { token: h.admin.token });
    assert.deepEqual(underscore.body.data, []);
  });

  test('paginates with limit, next_cursor and a Link header, stable while users are inserted between pages', async () => {
    const word = uniqueWord();
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await h.newUser({ name: `Pager ${i} ${word}` }));
    const newestFirst = made.map((u) => u.id).reverse();

    const first = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}&limit=2`, { token: h.admin.token });
    assert.equal(first.status, 200);
    assert.deepEqual(first.body.data.map((u) => u.id), newestFirst.slice(0, 2));
    assert.equal(typeof first.body.next_cursor, 'string');
    const link = first.headers.get('link');
    assert.ok(link, 'a Link header announces the next page');
    const m = /^<([^>]+)>; rel="next"$/.exec(link);
    assert.ok(m, `Link header has the rel="next" form: ${link}`);
    assert.ok(m[1]!.includes(`cursor=${first.body.next_cursor}`));

    // Users created between page requests never shift later pages.
    const late = await h.newUser({ name: `Pager late ${word}` });

    const second = await h.admin.client.get<PageBody<UserBody>>(m[1]!, { token: h.admin.token });
    assert.equal(second.status, 200, second.text);
    assert.deepEqual(second.body.data.map((u) => u.id), newestFirst.slice(2, 4));

    const third = await h.admin.client.get<PageBody<UserBody>>(
      `/api/v1/users?q=${word}&limit=2&cursor=${second.body.next_cursor}`,
      { token: h.admin.token },
    );
    assert.deepEqual(third.body.data.map((u) => u.id), newestFirst.slice(4));
    assert.equal(third.body.next_cursor, null);
    assert.equal(third.headers.get('link'), null);

    const fresh = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}&limit=2`, { token: h.admin.token });
    assert.deepEqual(fresh.body.data.map((u) => u.id), [late.id, newestFirst[0]]);
  });

  test('rejects a limit outside 1..100 and a cursor it did not issue', async () => {
    for (const query of ['limit=0', 'limit=101', 'limit=abc', 'cursor=not-a-cursor', 'cursor=%25%25']) {
      const res = await h.admin.client.get(`/api/v1/users?${query}`, { token: h.admin.token });
      assert.equal(res.status, 400, `${query}: ${res.text}`);
    }
  });

  test('shows emails only to ADMINs and to the user themself', async () => {
    const word = uniqueWord();
    const other = await h.newUser({ name: `Other ${word}` });
    const me = await h.newUser({ name: `Me ${word}` });

    const asUser = await me.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}`, { token: me.token });
    assert.deepEqual(asUser.body.data.map((u) => u.id), [me.id, other.id]);
    const [mine, theirs] = asUser.body.data;
    assert.equal(mine!.email, me.email);
    assert.ok(!('email' in theirs!), 'a USER sees no email field on another user');
    assert.ok(!asUser.text.includes(other.email));

    const asAdmin = await h.admin.client.get<PageBody<UserBody>>(`/api/v1/users?q=${word}`, { token: h.admin.token });
    assert.deepEqual(asAdmin.body.data.map((u) => u.email), [me.email, other.email]);
  });
});

// ── GET /users/:id ─────────────────────────────────────────────────────────────────────

describe('GET /users/:id', () => {
  test('returns the user with a strong ETag, and 304 with an empty body for a matching If-None-Match', async () => {
    const user = await h.newUser({ name: 'Etag Person' });
    const res = await h.admin.client.get<UserBody>(`/api/v1/users/${user.id}`, { token: h.admin.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.name, 'Etag Person');
    const etag = res.headers.get('etag');
    assert.ok(etag && /^"[^"]+"$/.test(etag), `a strong ETag: ${etag}`);
    assert.equal(res.headers.get('cache-control'), 'private, no-cache');

    const again = await h.admin.client.get(`/api/v1/users/${user.id}`, { token: h.admin.token, headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    assert.equal(again.text, '');
    assert.equal(again.headers.get('etag'), etag);

    // A change bumps the ETag, so the old one no longer matches.
    await h.admin.client.put(`/api/v1/users/${user.id}`, { name: 'Etag Person 2' }, { token: h.admin.token });
    const changed = await h.admin.client.get<UserBody>(`/api/v1/users/${user.id}`, { token: h.admin.token, headers: { 'if-none-match': etag } });
    assert.equal(changed.status, 200);
    assert.equal(changed.body.name, 'Etag Person 2');
    assert.notEqual(changed.headers.get('etag'), etag);
  });

  test('answers 404 for an unknown id and 400 for an id that is not a positive integer', async () => {
    const missing = await h.admin.client.get('/api/v1/users/987654321', { token: h.admin.token });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.code, 'NOT_FOUND');
    for (const id of ['abc', '0', '-1', '99999999999999999999']) {
      const res = await h.admin.client.get(`/api/v1/users/${id}`, { token: h.admin.token });
      assert.equal(res.status, 400, `${id}: ${res.text}`);
    }
  });

  test('shows the email to the user themself and to ADMINs, not to other users', async () => {
    const other = await h.newUser();
    const me = await h.newUser();
    const own = await me.client.get<UserBody>(`/api/v1/users/${me.id}`, { token: me.token });
    assert.equal(own.body.email, me.email);
    const theirs = await me.client.get<UserBody>(`/api/v1/users/${other.id}`, { token: me.token });
    assert.equal(theirs.status, 200);
    assert.equal(theirs.body.id, other.id);
    assert.ok(!('email' in theirs.body));
    assert.ok(!theirs.text.includes(other.email));
    const byAdmin = await h.admin.client.get<UserBody>(`/api/v1/users/${other.id}`, { token: h.admin.token });
    assert.equal(byAdmin.body.email, other.email);
    // The two representations never share an ETag.
    assert.notEqual(theirs.headers.get('etag'), byAdmin.headers.get('etag'));
  });

  test('is also served under /api without the version segment', async () => {
    const user = await h.newUser();
    const res = await h.admin.client.get<UserBody>(`/api/users/${user.id}`, { token: h.admin.token });
    assert.equal(res.status, 200);
    assert.equal(res.body.id, user.id);
    assert.equal(res.headers.get('api-version'), '1');
  });
});
