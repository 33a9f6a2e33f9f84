// Access tokens on every request: the header, the signature (HS256 only, the server's key),
// the expiry, and the session and user as they are in the database right now.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { SignJWT, UnsecuredJWT, decodeJwt } from 'jose';
import { assertProblem, Client, type Session } from './helpers/client.js';
import { useTestServer } from './helpers/harness.js';

const PROFILE = '/api/v1/profile';

const h = useTestServer();


/** The claims a real token of this session carries. */
function claimsOf(session: Session): { sub: string; sid: number } {
  const { sub, sid } = decodeJwt(session.token);
  assert.equal(typeof sub, 'string');
  assert.equal(typeof sid, 'number');
  return { sub: sub!, sid: sid as number };
}

interface SignOptions {
  key?: Uint8Array;
  issuer?: string;
  audience?: string;
  /** Seconds relative to now. */
  issuedAt?: number;
  expiresIn?: number;
}

/** Signs an HS256 access token ourselves (by default exactly as the server would). */
function sign(claims: { sub: string; sid: number }, opts: SignOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ sid: claims.sid })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(claims.sub)
    .setIssuer(opts.issuer ?? 'teamlog')
    .setAudience(opts.audience ?? 'teamlog-api')
    .setIssuedAt(now + (opts.issuedAt ?? 0))
    .setExpirationTime(now + (opts.expiresIn ?? 600))
    .sign(opts.key ?? h.server.deps.secrets.jwtKey);
}

const get = (client: Client, headers: Record<string, string>) => client.get(PROFILE, { headers });

test('refuses a request without an Authorization header with 401 UNAUTHENTICATED', async () => {
  const res = await new Client(h.server).get(PROFILE);
  assertProblem(res, 401, 'UNAUTHENTICATED');
  assert.equal(res.headers.get('www-authenticate'), 'Bearer');
});

test('refuses malformed Authorization headers with 401 UNAUTHENTICATED', async () => {
  const user = await h.newUser();
  const malformed = [
    'Bearer',
    `Token ${user.token}`,
    `Basic ${Buffer.from(`${user.email}:${user.password}`).toString('base64')}`,
    `Bearer ${user.token} ${user.token}`,
    `Bearer${user.token}`,
    'Bearer not-a-jwt',
    'Bearer a.b.c',
    `Bearer ${user.token.slice(0, -4)}`,
  ];
  for (const authorization of malformed) {
    assertProblem(await get(user.client, { authorization }), 401, 'UNAUTHENTICATED');
  }
  // The well-formed header of the same user is accepted: only the form was wrong above.
  assert.equal((await get(user.client, { authorization: `Bearer ${user.token}` })).status, 200);
});

test('accepts a token signed with the server key for a live session (the forged tokens below differ only in what they break)', async () => {
  const user = await h.newUser();
  const res = await user.client.get(PROFILE, { token: await sign(claimsOf(user)) });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.id, user.id);
});

test('refuses an alg:none token with valid claims with 401 UNAUTHENTICATED', async () => {
  const user = await h.newUser();
  const { sub, sid } = claimsOf(user);
  const unsigned = new UnsecuredJWT({ sid })
    .setSubject(sub)
    .setIssuer('teamlog')
    .setAudience('teamlog-api')
    .setIssuedAt()
    .setExpirationTime('10m')
    .encode();
  assert.equal(JSON.parse(Buffer.from(unsigned.split('.')[0]!, 'base64url').toString()).alg, 'none');
  assertProblem(await user.client.get(PROFILE, { token: unsigned }), 401, 'UNAUTHENTICATED');
  // Also with the signature of a real token glued on.
  const glued = `${unsigned.slice(0, -1)}.${user.token.split('.')[2]}`;
  assertProblem(await user.client.get(PROFILE, { token: glued }), 401, 'UNAUTHENTICATED');
});

test('refuses a token signed with another key with 401 UNAUTHENTICATED', async () => {
  const user = await h.newUser();
  const token = await sign(claimsOf(user), { key: randomBytes(48) });
  assertProblem(await user.client.get(PROFILE, { token }), 401, 'UNAUTHENTICATED');
});

test('refuses a correctly signed token for another issuer or audience with 401 UNAUTHENTICATED', async () => {
  const user = await h.newUser();
  assertProblem(await user.client.get(PROFILE, { token: await sign(claimsOf(user), { issuer: 'someone-else' }) }), 401, 'UNAUTHENTICATED');
  assertProblem(await user.client.get(PROFILE, { token: await sign(claimsOf(user), { audience: 'other-api' }) }), 401, 'UNAUTHENTICATED');
});

test('answers a correctly signed but expired token with 401 TOKEN_EXPIRED', async () => {
  const user = await h.newUser();
  const token = await sign(claimsOf(user), { issuedAt: -3600, expiresIn: -60 });
  const res = await user.client.get(PROFILE, { token });
  assertProblem(res, 401, 'TOKEN_EXPIRED');
  assert.equal(res.headers.get('www-authenticate'), 'Bearer');
});

test("refuses a correctly signed token naming one user with another user's session", async () => {
  const alice = await h.newUser();
  const bob = await h.newUser();
  const token = await sign({ sub: claimsOf(alice).sub, sid: claimsOf(bob).sid });
  const res = await alice.client.get(PROFILE, { token });
  assertProblem(res, 401, ['TOKEN_REVOKED', 'UNAUTHENTICATED']);
});

test('answers the access token of a logged-out session with 401 TOKEN_REVOKED on the very next request', async () => {
  const user = await h.newUser();
  assert.equal((await user.client.post('/api/v1/auth/logout', undefined, { token: user.token })).status, 204);
  assertProblem(await user.client.get(PROFILE, { token: user.token }), 401, 'TOKEN_REVOKED');
});

test('answers the token of a user deactivated a moment ago with 403 ACCOUNT_DEACTIVATED on the very next request', async () => {
  const user = await h.newUser();
  assert.equal((await user.client.get(PROFILE, { token: user.token })).status, 200);
  const off = await h.admin.client.put(`/api/v1/users/${user.id}/active`, { active: false }, { token: h.admin.token });
  assert.equal(off.status, 200, off.text);
  assertProblem(await user.client.get(PROFILE, { token: user.token }), 403, 'ACCOUNT_DEACTIVATED');
});

test('answers the token of a deleted user with 401 on the very next request', async () => {
  const user = await h.newUser();
  assert.equal((await user.client.get(PROFILE, { token: user.token })).status, 200);
  const gone = await h.admin.client.delete(`/api/v1/users/${user.id}`, { token: h.admin.token });
  assert.equal(gone.status, 204, gone.text);
  assertProblem(await user.client.get(PROFILE, { token: user.token }), 401, ['TOKEN_REVOKED', 'UNAUTHENTICATED']);
});
