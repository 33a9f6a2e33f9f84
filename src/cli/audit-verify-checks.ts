// The checks `teamlog audit verify` makes against a database, each with its own verdict: made
// and passed, made and failed, or not made, and why. A check that cannot be made (no key to make
// it with, or a key that is not the deployment's) never reads as a failed one: the rest is
// verified without it, and the command exits with its own code (EXIT.notChecked). A further
// check (a witness quorum) is one more function returning a Verdict, concluded with the others.
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.js';
import type { Queryable } from '../db/database.js';
import type { NoteVerifier } from '../tlog/signed-note.js';
import { EXIT, NotCheckedError, out } from './support.js';

/** What became of one check. */
export type Verdict =
  | { check: string; outcome: 'passed'; said: string }
  | { check: string; outcome: 'failed'; problem: string }
  | { check: string; outcome: 'not-made'; why: string };

/**
 * Prints the verdicts and answers the exit code: FAILED (on stderr, exit 1) when a check that
 * was made failed, naming only what it found; else INCOMPLETE with each check not made and why
 * (exit 3); else OK (exit 0).
 */
export function conclude(verdicts: Verdict[], failure: (problem: string) => Error): number {
  const failed = verdicts.filter((v): v is Extract<Verdict, { outcome: 'failed' }> => v.outcome === 'failed');
  const notMade = verdicts.filter((v): v is Extract<Verdict, { outcome: 'not-made' }> => v.outcome === 'not-made');
  const said = verdicts.flatMap((v) => (v.outcome === 'passed' ? [v.said] : []));
  if (failed.length > 0) {
    for (const v of notMade) process.stderr.write(`teamlog audit verify: ${v.check}: not checked: ${v.why}\n`);
    throw failure(failed.map((v) => v.problem).join('; '));
  }
  if (notMade.length > 0) {
    out(`INCOMPLETE: ${said.join('; ')}`);
    for (const v of notMade) out(`  ${v.check}: not checked: ${v.why}`);
    return EXIT.notChecked;
  }
  out(`OK: ${said.join('; ')}`);
  return EXIT.done;
}

/** Stored personal values looked at to learn whether the keys at hand are the ones their refs were written with. */
const KEY_PROBE = 64;

/** Where the keys for personal values came from, as an operator would name them. */
function keySources(config: Config, file: string): string {
  const sources = [
    config.auditPersonalDataSecret !== undefined ? 'AUDIT_PERSONAL_DATA_SECRET' : '',
    config.jwtSecret !== undefined ? 'JWT_SECRET' : existsSync(file) ? file : '',
    config.auditPersonalDataPreviousSecrets.length > 0 ? 'AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS' : '',
  ].filter(Boolean);
  return sources.join(', ');
}

const PERSONAL_VALUES_FIX =
  "Run it with the JWT_SECRET (or AUDIT_PERSONAL_DATA_SECRET, and AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS) that this database's instances have";

/**
 * The keys to check personal values with, or why that check cannot be made: none is at hand,
 * or none of the stored values matches its ref under any of them, which is what keys of another
 * deployment (or of none) give. A value a key of this deployment does not match is a changed
 * value: that is for the verification itself to find, and to name as such.
 */
export async function personalValueKeys(db: Queryable, config: Config): Promise<{ keys: Buffer[]; stored: boolean; notMade?: Verdict }> {
  const [{ personalDataKeysOnDisk, secretsDir, JWT_SECRET_FILE }, { samplePersonalData }, { personalDataMatches }] = await Promise.all([
    import('../secrets.js'), import('../modules/audit/personal-data.repository.js'), import('../modules/audit/audit.personal-data.js'),
  ]);
  const file = path.join(secretsDir(config), JWT_SECRET_FILE);
  const keys = personalDataKeysOnDisk(config);
  const sample = await samplePersonalData(db, KEY_PROBE);
  if (sample.length === 0) return { keys, stored: false };
  const check = 'personal values';
  if (keys.length === 0) {
    return {
      keys, stored: true,
      notMade: { check, outcome: 'not-made', why: `no key to check them with (JWT_SECRET and AUDIT_PERSONAL_DATA_SECRET are unset, and ${file} does not exist). ${PERSONAL_VALUES_FIX}.` },
    };
  }
  if (sample.some((row) => keys.some((key) => personalDataMatches(key, row)))) return { keys, stored: true };
  return {
    keys: [], stored: true,
    notMade: {
      check, outcome: 'not-made',
      why:
        `none of the ${sample.length} stored values looked at matches its ref under the key${keys.length === 1 ? '' : 's'} at hand (${keySources(config, file)}): ` +
        `they are not the keys its refs were written with (another deployment's?), unless every one of those values was changed. ${PERSONAL_VALUES_FIX}.`,
    },
  };
}

/**
 * The keys the newest checkpoint must verify under: the operator's (`given`), else the service's
 * signing key (AUDIT_SIGNING_KEY, or the file in the deployment's secrets directory). With none,
 * that check is not made: the chain of checkpoints is still checked, under the keys the database
 * itself registers, which whoever rewrites the database could replace.
 */
export async function trustedAnchors(db: Queryable, config: Config, origin: string, given: NoteVerifier[] | undefined): Promise<{ anchors: NoteVerifier[]; notMade?: Verdict }> {
  const [{ noteVerifier, parseVerifierKey }, { loadSigningKey, SIGNING_KEY_FILE }, { signingKeys }, { secretsDir }] = await Promise.all([
    import('../tlog/signed-note.js'), import('../modules/audit/evidence/signing-key.loader.js'), import('../modules/audit/evidence/evidence.repository.js'), import('../secrets.js'),
  ]);
  if (given) return { anchors: given };
  const file = path.join(secretsDir(config), SIGNING_KEY_FILE);
  // The service's own key, never generated here (a key made now could not have signed anything).
  if (config.auditSigningKey || existsSync(file)) return { anchors: [noteVerifier(origin, loadSigningKey(config, () => {}).privateKey)] };
  const registered = (await signingKeys(db)).map((k) => parseVerifierKey(k.note_verifier_key));
  const notMade: Verdict = {
    check: 'the newest checkpoint',
    outcome: 'not-made',
    why:
      `no key held outside the database to hold it to (AUDIT_SIGNING_KEY is unset, and ${file} does not exist); the checkpoints were checked under the keys ` +
      'the database registers, which whoever rewrites it could replace. Pass --public-key <key.pem> (GET /api/v1/audit-logs/public-keys) or ' +
      "--verifier-key <vkey>, or set the AUDIT_SIGNING_KEY this database's instances have",
  };
  return { anchors: registered, notMade };
}

/**
 * Opens the database for a verification, or says it cannot be checked at all: PostgreSQL that
 * does not answer, or refuses the login. (An embedded database that a running server holds is
 * refused where it is locked, the same way.)
 */
export async function openForVerification<T>(config: Config, open: () => Promise<T>): Promise<T> {
  if (!config.databaseUrl) return open();
  const { waitForPostgres, DatabaseUnavailableError } = await import('../db/wait.js');
  const urls: Array<[string, string | undefined]> = [['MIGRATION_DATABASE_URL', config.migrationDatabaseUrl], ['DATABASE_URL', config.databaseUrl]];
  for (const [name, url] of urls) {
    if (url === undefined || (name === 'MIGRATION_DATABASE_URL' && url === config.databaseUrl)) continue;
    try {
      await waitForPostgres(url, { name, timeoutMs: 0 });
    } catch (err) {
      if (err instanceof DatabaseUnavailableError) throw new NotCheckedError(`nothing was checked: ${err.message}`);
      throw err;
    }
  }
  return open();
}
