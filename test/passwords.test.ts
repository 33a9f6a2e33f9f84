// Password hashing: scrypt, at most one hash per core at a time (each holds 16 MiB).
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { test } from 'node:test';
import { DEFAULT_PASSWORD_HASH_COST, hashPassword, passwordHashesInProgress, verifyPassword } from '../src/modules/auth/auth.passwords.js';

test('a burst of hashes runs at most one per core at once, and every one of them completes correctly', async () => {
  const passwords = Array.from({ length: 4 * availableParallelism() + 2 }, (_, i) => `burst-password-${i}`);
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, passwordHashesInProgress())), 1);
  try {
    const hashes = await Promise.all(passwords.map((p) => hashPassword(p, DEFAULT_PASSWORD_HASH_COST)));
    const checks = await Promise.all(hashes.map((h, i) => verifyPassword(passwords[i]!, h)));
    const wrong = await Promise.all(hashes.map((h, i) => verifyPassword(`${passwords[i]!}x`, h)));
    assert.deepEqual(checks, passwords.map(() => true));
    assert.deepEqual(wrong, passwords.map(() => false));
  } finally {
    clearInterval(sampler);
  }
  assert.ok(peak >= 1, 'the sampler saw hashing in progress');
  assert.ok(peak <= availableParallelism(), `at most ${availableParallelism()} at once, saw ${peak}`);
  assert.equal(passwordHashesInProgress(), 0, 'every slot was given back');
});
