// Memory-hard password hashes (scrypt). The parameters travel inside each hash, so they can
// be raised later without invalidating stored ones.
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { availableParallelism } from 'node:os';

/**
 * Hashes in progress at once: one per core. Each holds 16 MiB; Node's four thread-pool threads
 * hashing at once on a 2-core machine took no more logins per second, only 32 MiB more memory
 * (the login benchmark's peak RSS went past 300 MB) and every pool thread.
 */
const MAX_CONCURRENT = Math.max(1, availableParallelism());
let running = 0;
const waiting: Array<() => void> = [];

/** Hashes running now (never more than MAX_CONCURRENT). */
export const passwordHashesInProgress = (): number => running;

async function scrypt(password: string, salt: Buffer, keylen: number, opts: ScryptOptions): Promise<Buffer> {
  if (running >= MAX_CONCURRENT) await new Promise<void>((resolve) => waiting.push(resolve));
  else running++;
  try {
    return await new Promise<Buffer>((resolve, reject) =>
      scryptCb(password, salt, keylen, opts, (err, key) => (err ? reject(err) : resolve(key))),
    );
  } finally {
    // The slot passes straight to the next waiter, if any; otherwise it is freed.
    const next = waiting.shift();
    if (next) next();
    else running--;
  }
}

// scrypt's interactive-login parameters (Percival): N=2^14, r=8, p=1, 16 MiB per hash,
// about 45 ms on one core here. OWASP's heavier floor (N=2^17) costs ~280 ms and 128 MiB per
// concurrent login on a 2-core machine, which would let a login burst starve the API.
// PASSWORD_HASH_COST sets log2(N) for new hashes: an operator may raise it on faster machines,
// and the tests lower it (a test suite creates thousands of users; its hashes guard nothing).
export const DEFAULT_PASSWORD_HASH_COST = 14;
const R = 8;
const P = 1;
const KEYLEN = 32;
const maxmem = (N: number, r: number) => 128 * N * r * 2;

/** A new hash of `password` with scrypt's N = 2^`cost` (config.passwordHashCost). */
export async function hashPassword(password: string, cost: number): Promise<string> {
  const salt = randomBytes(16);
  const [N, r, p] = [2 ** cost, R, P];
  const key = await scrypt(password.normalize('NFKC'), salt, KEYLEN, { N, r, p, maxmem: maxmem(N, r) });
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !n || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const N = Number(n), R = Number(r), P = Number(p);
  const key = await scrypt(password.normalize('NFKC'), Buffer.from(salt, 'base64'), expected.length, { N, r: R, p: P, maxmem: maxmem(N, R) });
  return timingSafeEqual(key, expected);
}

/**
 * A hash of a random password, computed once, to verify unknown emails against: a failed
 * login then costs the same whether the email exists or not.
 */
const decoys = new Map<number, Promise<string>>();
export function decoyHash(cost: number): Promise<string> {
  let decoy = decoys.get(cost);
  if (!decoy) decoys.set(cost, (decoy = hashPassword(randomBytes(16).toString('hex'), cost)));
  return decoy;
}
