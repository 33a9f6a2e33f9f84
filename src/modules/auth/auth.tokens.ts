// Access tokens are short-lived HS256 JWTs naming the user and the session; refresh tokens
// are opaque random strings stored only as hashes. The algorithm is pinned: a token signed
// with anything else (or `alg: none`) is rejected.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose';
import { unauthenticated } from '../../domain/errors.js';

const ISSUER = 'teamlog';
const AUDIENCE = 'teamlog-api';

export interface AccessClaims {
  userId: number;
  sessionId: number;
  expiresAt: number;
}

export async function signAccessToken(key: Uint8Array, userId: number, sessionId: number, ttlSeconds: number): Promise<string> {
  // A random jti makes every issued token distinct: without it a refresh within the same
  // second would hand back the very access token the client already holds.
  return new SignJWT({ sid: sessionId })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setJti(randomUUID())
    .setSubject(String(userId))
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(`${ttlSeconds}s`)
    .sign(key);
}

/**
 * Signature checks already passed, by token. Whether a given string carries a valid signature
 * never changes, so remembering it is safe; expiry is still checked on every use, and the
 * session (revocation, deactivation, role) is read from the database on every request. The
 * key is part of the entry so a rotated key never honours an old verdict. Bounded: oldest
 * entries go first.
 */
const verified = new Map<string, { key: Uint8Array; claims: AccessClaims }>();
const VERIFIED_MAX = 10_000;

export async function verifyAccessToken(key: Uint8Array, token: string): Promise<AccessClaims> {
  const known = verified.get(token);
  if (known && known.key === key) {
    if (known.claims.expiresAt * 1000 <= Date.now()) {
      verified.delete(token);
      throw unauthenticated('TOKEN_EXPIRED', 'The access token has expired; refresh it');
    }
    return known.claims;
  }
  const claims = await verifySignature(key, token);
  if (verified.size >= VERIFIED_MAX) verified.delete(verified.keys().next().value as string);
  verified.set(token, { key, claims });
  return claims;
}

async function verifySignature(key: Uint8Array, token: string): Promise<AccessClaims> {
  try {
    const { payload } = await jwtVerify(token, key, { algorithms: ['HS256'], issuer: ISSUER, audience: AUDIENCE });
    const userId = Number(payload.sub);
    const sessionId = payload.sid;
    if (!Number.isSafeInteger(userId) || userId < 1 || typeof sessionId !== 'number' || !Number.isSafeInteger(sessionId)) {
      throw unauthenticated('UNAUTHENTICATED', 'The access token is not valid');
    }
    return { userId, sessionId, expiresAt: payload.exp ?? 0 };
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) throw unauthenticated('TOKEN_EXPIRED', 'The access token has expired; refresh it');
    if (err instanceof joseErrors.JOSEError || err instanceof TypeError) {
      throw unauthenticated('UNAUTHENTICATED', 'The access token is not valid');
    }
    throw err;
  }
}

export function newRefreshToken(): string {
  return `tlr_${randomBytes(32).toString('base64url')}`;
}

/** The shape newRefreshToken makes: anything else can match no stored token. */
export const isWellFormedRefreshToken = (token: string): boolean => /^tlr_[A-Za-z0-9_-]{43}$/.test(token);

/** Refresh tokens carry 256 random bits, so a fast hash is enough to keep them unreadable at rest. */
export function hashRefreshToken(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}
