// The only reader of process.env. Every setting is parsed once, at start, with a clear
// message naming the variable when it is wrong, so a typo never becomes a runtime surprise.
import { DEFAULT_PASSWORD_HASH_COST } from './modules/auth/auth.passwords.js';
import { existsSync, readFileSync } from 'node:fs';
import { BlockList, isIP } from 'node:net';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { parsePolicy, type Policy } from './tlog/policy.js';

export interface Config {
  port: number;
  host: string;
  databaseUrl: string | undefined;
  /** Owner connection used for migrations; defaults to databaseUrl. */
  migrationDatabaseUrl: string | undefined;
  databasePoolSize: number;
  dataDir: string;
  redisUrl: string | undefined;
  /** Prefix of every Redis key, so that deployments sharing one Redis keep apart. */
  redisKeyPrefix: string;
  logLevel: string;
  adminEmail: string | undefined;
  adminPassword: string | undefined;
  accessTokenTtl: number;
  refreshTokenTtl: number;
  jwtSecret: string | undefined;
  trustProxy: string[];
  rateLimitPerMinute: number;
  /** Exports and verifications running at once on this instance; beyond it 429 RATE_LIMITED with Retry-After. */
  maxConcurrentAuditScans: number;
  /** log2 of scrypt's N for new password hashes (14: 16 MiB and ~45 ms a hash; each hash keeps its own). */
  passwordHashCost: number;
  /** When set, GET /metrics answers only a request with `Authorization: Bearer <token>`. */
  metricsToken: string | undefined;
  /** How long real-time events are kept for replay, in hours. */
  eventRetentionHours: number;
  auditSigningKey: string | undefined;
  auditSigningKeyId: string | undefined;
  auditCheckpointIntervalMs: number;
  /** The log's name in its checkpoints; undefined: generated once and kept in the database. */
  auditLogOrigin: string | undefined;
  /** Note verifier keys of keys that signed this log's checkpoints before a rotation (trusted from outside the database). */
  auditPreviousVerifierKeys: string[];
  /** Whether this instance seals and signs (one instance at a time does, under an advisory lock). */
  auditSealing: boolean;
  /** Committed records waiting this long for their seal, with none made meanwhile, mean sealing has stopped (/health/ready, verification). */
  auditSealStallMs: number;
  auditWebhookUrl: string | undefined;
  auditWebhookSecret: string | undefined;
  /** The shape of each delivered record: `teamlog` (the API's record with its seal) or `ocsf` (an OCSF event, as the export's format=ocsf). */
  auditWebhookFormat: 'teamlog' | 'ocsf';
  /** The witnesses asked to cosign checkpoints and the quorum (AUDIT_WITNESS_POLICY, a C2SP tlog-policy file), read at start. */
  auditWitnessPolicy: WitnessPolicyFile | undefined;
  /** The least time between two submissions to one witness. */
  auditWitnessIntervalMs: number;
  /** The newest witnessed checkpoint lagging this long behind a newer one makes /health/ready "degraded". */
  auditWitnessMaxAgeMs: number;
  /** What keys the refs that audit records hold for personal values; undefined: the JWT secret (secrets.ts). */
  auditPersonalDataSecret: string | undefined;
  /** Secrets that keyed those refs before a rotation, so that verification can still check the values stored under them. */
  auditPersonalDataPreviousSecrets: string[];
  /** Origins whose browsers may call the API (CORS); empty: same origin only; ["*"]: any. */
  corsOrigins: string[];
  /** How long a start waits for PostgreSQL to answer, retrying with backoff; 0: one attempt. */
  databaseStartupTimeoutMs: number;
  /** The commit this build is of (TEAMLOG_COMMIT), for GET /api/v1/version. */
  commit: string | undefined;
}

/** AUDIT_WITNESS_POLICY: the file, its text (served by GET /audit-logs/witnesses) and the policy read from it. */
export interface WitnessPolicyFile {
  file: string;
  text: string;
  policy: Policy;
}

/** One or more invalid settings; `problems` has one sentence per variable. */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string | string[]) {
    const list = typeof problems === 'string' ? [problems] : problems;
    super(list.length === 1 ? list[0] : `${list.length} settings are invalid:\n${list.map((p) => `  - ${p}`).join('\n')}`);
    this.problems = list;
  }
}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = str(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = str(env, name);
  if (raw === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return raw;
}

/** Parses "10.0.0.0/8, ::1/128, 127.0.0.1" into CIDR strings, rejecting anything else. */
export function parseCidrList(name: string, raw: string | undefined): string[] {
  if (!raw) return [];
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const [addr, prefix] = entry.split('/');
      const family = addr ? isIP(addr) : 0;
      const maxPrefix = family === 4 ? 32 : 128;
      const bits = prefix === undefined ? maxPrefix : Number(prefix);
      if (!family || !Number.isInteger(bits) || bits < 0 || bits > maxPrefix || (prefix !== undefined && !/^\d+$/.test(prefix))) {
        throw new ConfigError(`${name} must be a comma-separated list of CIDRs, "${entry}" is not one`);
      }
      return `${addr}/${bits}`;
    });
}

export function trustedNetworks(cidrs: string[]): (address: string) => boolean {
  if (cidrs.length === 0) return () => false;
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [addr, bits] = cidr.split('/') as [string, string];
    list.addSubnet(addr, Number(bits), isIP(addr) === 4 ? 'ipv4' : 'ipv6');
  }
  return (address: string) => {
    // Node reports IPv4 peers on a dual-stack socket as ::ffff:a.b.c.d.
    const v4 = address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
    const family = isIP(v4);
    return family !== 0 && list.check(v4, family === 4 ? 'ipv4' : 'ipv6');
  };
}

const EMAIL = /^[^\s@]+@[^\s@]+$/;

/** The shortest secret accepted (JWT_SECRET and the audit personal-data secrets). */
export const MIN_SECRET = 32;

/**
 * Loads `.env` from the working directory into process.env when there is one, with Node's own
 * parser (process.loadEnvFile): a variable already set in the environment keeps its value.
 * The server and the CLI call it before loadConfig. Answers the file it loaded.
 */
export function loadEnvFile(file = path.resolve('.env')): string | undefined {
  if (!existsSync(file)) return undefined;
  try {
    process.loadEnvFile(file);
  } catch (err) {
    throw new ConfigError(`${file} could not be read: ${(err as Error).message}`);
  }
  return file;
}

/**
 * Every variable loadConfig reads, in order: loadConfig run once on an environment that notes
 * each name asked of it (every setting's parser runs, and reads its variable, whatever the
 * others hold). So the list is the parsers themselves, and a new setting is on it by being read.
 */
export function settingNames(): string[] {
  const asked = new Set<string>();
  const env = new Proxy({} as Env, {
    get(_target, name) {
      if (typeof name === 'string') asked.add(name);
      return undefined;
    },
  });
  try {
    loadConfig(env);
  } catch (err) {
    // A setting that an empty environment leaves invalid is still a name it read.
    if (!(err instanceof ConfigError)) throw err;
  }
  return [...asked];
}

/**
 * Variables a .env may hold for others than Teamlog: compose.yaml's own (its passwords and port
 * belong in deploy/.env, but an env file given to compose may be any; test/containers.test.ts
 * holds compose.yaml to these and the settings), and the PostgreSQL driver's PG* defaults
 * (PGSSLMODE, PGSSLROOTCERT, …), which it reads beside DATABASE_URL.
 */
const READ_BY_OTHERS = new Set(['POSTGRES_PASSWORD', 'TEAMLOG_DB_PASSWORD', 'TEAMLOG_PORT']);
const PG_DRIVER = /^PG[A-Z_]+$/;

/** Levenshtein distance, for the closest setting to a misspelt name. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/**
 * One warning for each variable in the .env `file` that no setting reads (a typo there is
 * otherwise silently a default): "LOG_LEVL in .env is not a setting Teamlog reads; did you mean
 * LOG_LEVEL?", naming the closest setting when one is near enough to be the meant one.
 */
export function unknownEnvFileKeys(file: string): string[] {
  const names = settingNames();
  const known = new Set(names);
  const shown = path.basename(file);
  const text = readFileSync(file, 'utf8');
  const parsed = Object.keys(parseEnv(text));
  // In the file's order (parseEnv's is its own); a key the line scan misses comes last.
  const inFile = [...text.matchAll(/^[ \t]*(?:export[ \t]+)?([^\s=#]+)[ \t]*=/gm)].map((m) => m[1]!);
  const keys = [...new Set([...inFile.filter((key) => parsed.includes(key)), ...parsed])];
  return keys
    .filter((key) => !known.has(key) && !READ_BY_OTHERS.has(key) && !PG_DRIVER.test(key))
    .map((key) => {
      const upper = key.toUpperCase();
      const [closest] = names.map((name) => ({ name, d: distance(upper, name) })).sort((x, y) => x.d - y.d);
      // Near enough: a letter or two (or a few in a long name) away, or the same name in other case.
      const near = closest && closest.d <= Math.max(2, Math.floor(closest.name.length / 5));
      return `${key} in ${shown} is not a setting Teamlog reads${near ? `; did you mean ${closest.name}?` : ' (.env.example lists every setting)'}`;
    });
}

export function loadConfig(env: Env = process.env): Config {
  const databaseUrl = () => url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  // Every setting is a parser; each runs even when another failed, so that one start reports
  // every invalid variable at once instead of one per attempt.
  const parsers: { [K in keyof Config]: () => Config[K] } = {
    port: () => int(env, 'PORT', 3000, 0, 65535),
    host: () => str(env, 'HOST') ?? '127.0.0.1',
    databaseUrl,
    // DATABASE_URL's own problem is reported once, under its own name.
    migrationDatabaseUrl: () => url(env, 'MIGRATION_DATABASE_URL', ['postgres:', 'postgresql:']) ?? optional(databaseUrl),
    databasePoolSize: () => int(env, 'DATABASE_POOL_SIZE', 10, 1, 1000),
    dataDir: () => path.resolve(str(env, 'DATA_DIR') ?? './data'),
    redisUrl: () => url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisKeyPrefix: () => {
      const prefix = str(env, 'REDIS_KEY_PREFIX') ?? 'teamlog:';
      if (!/^[A-Za-z0-9:._-]{1,64}$/.test(prefix)) throw new ConfigError('REDIS_KEY_PREFIX must be 1 to 64 letters, digits, ":", ".", "_" or "-"');
      return prefix;
    },
    logLevel: () => {
      const level = str(env, 'LOG_LEVEL') ?? 'info';
      if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(level)) {
        throw new ConfigError(`LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; got "${level}"`);
      }
      return level;
    },
    adminEmail: () => {
      const email = str(env, 'ADMIN_EMAIL')?.toLowerCase();
      if (email !== undefined && !EMAIL.test(email)) throw new ConfigError('ADMIN_EMAIL is not an email address');
      return email;
    },
    adminPassword: () => {
      const password = env.ADMIN_PASSWORD === '' ? undefined : env.ADMIN_PASSWORD;
      if (password !== undefined && password.length < 10) throw new ConfigError('ADMIN_PASSWORD must have at least 10 characters');
      return password;
    },
    accessTokenTtl: () => int(env, 'ACCESS_TOKEN_TTL', 900, 1, 86_400),
    refreshTokenTtl: () => int(env, 'REFRESH_TOKEN_TTL', 30 * 86_400, 60, 365 * 86_400),
    jwtSecret: () => {
      const secret = str(env, 'JWT_SECRET');
      if (secret !== undefined && secret.length < MIN_SECRET) throw new ConfigError(`JWT_SECRET must have at least ${MIN_SECRET} characters`);
      return secret;
    },
    trustProxy: () => parseCidrList('TRUST_PROXY', str(env, 'TRUST_PROXY')),
    rateLimitPerMinute: () => int(env, 'RATE_LIMIT_PER_MINUTE', 3000, 0, 10_000_000),
    maxConcurrentAuditScans: () => int(env, 'MAX_CONCURRENT_AUDIT_SCANS', 2, 1, 1000),
    passwordHashCost: () => int(env, 'PASSWORD_HASH_COST', DEFAULT_PASSWORD_HASH_COST, 10, 20),
    metricsToken: () => {
      const token = str(env, 'METRICS_TOKEN');
      if (token !== undefined && token.length < 16) throw new ConfigError('METRICS_TOKEN must have at least 16 characters');
      return token;
    },
    eventRetentionHours: () => int(env, 'EVENT_RETENTION_HOURS', 24, 1, 24 * 365),
    // A PEM in one line of an .env file comes with its newlines written as "\n".
    auditSigningKey: () => str(env, 'AUDIT_SIGNING_KEY')?.replaceAll('\\n', '\n'),
    auditSigningKeyId: () => {
      const id = str(env, 'AUDIT_SIGNING_KEY_ID');
      if (id !== undefined && !/^[A-Za-z0-9._:-]{1,64}$/.test(id)) throw new ConfigError('AUDIT_SIGNING_KEY_ID must be 1 to 64 letters, digits, ".", "_", ":" or "-"');
      if (id !== undefined && str(env, 'AUDIT_SIGNING_KEY') === undefined) throw new ConfigError('AUDIT_SIGNING_KEY_ID is set but AUDIT_SIGNING_KEY is not');
      return id;
    },
    auditCheckpointIntervalMs: () => int(env, 'AUDIT_CHECKPOINT_INTERVAL_MS', 5000, 100, 3_600_000),
    auditLogOrigin: () => {
      const origin = str(env, 'AUDIT_LOG_ORIGIN');
      // C2SP: a schema-less URL, no spaces and no "+" (it is also the key name in verifier keys).
      if (origin !== undefined && !/^[^\s+]{1,200}$/.test(origin)) throw new ConfigError('AUDIT_LOG_ORIGIN must be 1 to 200 characters with no spaces and no "+", e.g. example.com/teamlog/audit');
      return origin;
    },
    auditPreviousVerifierKeys: () =>
      (str(env, 'AUDIT_PREVIOUS_VERIFIER_KEYS') ?? '').split(',').map((k) => k.trim()).filter(Boolean).map((k) => {
        // <name>+<8 hex>+<base64>: the shape here; the key itself is parsed (Ed25519 only) where it is used.
        if (!/^[^\s+]+\+[0-9a-f]{8}\+[A-Za-z0-9+/=]+$/.test(k)) {
          throw new ConfigError(`AUDIT_PREVIOUS_VERIFIER_KEYS must be comma-separated note verifier keys (<name>+<key hash>+<key>, as GET /audit-logs/public-keys lists them); "${k.slice(0, 40)}" is not one`);
        }
        return k;
      }),
    auditSealing: () => {
      const v = str(env, 'AUDIT_SEALING') ?? 'on';
      if (v !== 'on' && v !== 'off') throw new ConfigError(`AUDIT_SEALING must be "on" or "off", got "${v}"`);
      return v === 'on';
    },
    auditSealStallMs: () => int(env, 'AUDIT_SEAL_STALL_MS', 60_000, 1000, 86_400_000),
    auditWebhookUrl: () => url(env, 'AUDIT_WEBHOOK_URL', ['http:', 'https:']),
    auditWebhookSecret: () => str(env, 'AUDIT_WEBHOOK_SECRET'),
    auditWebhookFormat: () => {
      const v = str(env, 'AUDIT_WEBHOOK_FORMAT') ?? 'teamlog';
      if (v !== 'teamlog' && v !== 'ocsf') throw new ConfigError(`AUDIT_WEBHOOK_FORMAT must be "teamlog" (the API's records, the default) or "ocsf" (OCSF 1.8 events), got "${v}"`);
      return v;
    },
    auditWitnessPolicy: () => witnessPolicy(str(env, 'AUDIT_WITNESS_POLICY')),
    auditWitnessIntervalMs: () => int(env, 'AUDIT_WITNESS_INTERVAL_MS', 60_000, 100, 86_400_000),
    auditWitnessMaxAgeMs: () => int(env, 'AUDIT_WITNESS_MAX_AGE_MS', 600_000, 1000, 30 * 86_400_000),
    auditPersonalDataSecret: () => {
      const secret = str(env, 'AUDIT_PERSONAL_DATA_SECRET');
      if (secret !== undefined && secret.length < MIN_SECRET) throw new ConfigError(`AUDIT_PERSONAL_DATA_SECRET must have at least ${MIN_SECRET} characters`);
      return secret;
    },
    auditPersonalDataPreviousSecrets: () =>
      (str(env, 'AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS') ?? '').split(',').map((k) => k.trim()).filter(Boolean).map((k) => {
        if (k.length < MIN_SECRET) throw new ConfigError(`AUDIT_PERSONAL_DATA_PREVIOUS_SECRETS must be comma-separated secrets of at least ${MIN_SECRET} characters each (JWT_SECRET or AUDIT_PERSONAL_DATA_SECRET values used before)`);
        return k;
      }),
    corsOrigins: () => parseOrigins('CORS_ORIGINS', str(env, 'CORS_ORIGINS')),
    databaseStartupTimeoutMs: () => int(env, 'DATABASE_STARTUP_TIMEOUT_MS', 30_000, 0, 600_000),
    commit: () => {
      const commit = str(env, 'TEAMLOG_COMMIT');
      if (commit !== undefined && !/^[0-9a-f]{7,64}$/i.test(commit)) throw new ConfigError('TEAMLOG_COMMIT must be a commit id: 7 to 64 hexadecimal digits');
      return commit?.toLowerCase();
    },
  };

  const config: Partial<Config> = {};
  const problems = new Set<string>();
  for (const key of Object.keys(parsers) as Array<keyof Config>) {
    try {
      (config as Record<keyof Config, unknown>)[key] = parsers[key]();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      for (const problem of err.problems) problems.add(problem);
    }
  }
  if (problems.size > 0) throw new ConfigError([...problems]);
  return config as Config;
}

/**
 * Reads and parses the witness policy file (C2SP tlog-policy). Its `log` lines, if any, are held
 * to the service's own key once that is known (evidence/witness.submitter.ts, at start).
 */
function witnessPolicy(file: string | undefined): WitnessPolicyFile | undefined {
  if (file === undefined) return undefined;
  const resolved = path.resolve(file);
  let text: string;
  try {
    text = readFileSync(resolved, 'utf8');
  } catch (err) {
    throw new ConfigError(`AUDIT_WITNESS_POLICY: ${resolved} could not be read: ${(err as Error).message}`);
  }
  try {
    return { file: resolved, text, policy: parsePolicy(text) };
  } catch (err) {
    // A PolicyError names the line; anything else the policy's text raises is as much its problem.
    const message = err instanceof Error ? err.message : String(err);
    throw new ConfigError(`AUDIT_WITNESS_POLICY (${resolved}): ${message}`);
  }
}

/** undefined where the parser fails: for a value that another setting reports under its own name. */
function optional<T>(parse: () => T): T | undefined {
  try {
    return parse();
  } catch (err) {
    if (err instanceof ConfigError) return undefined;
    throw err;
  }
}

/**
 * Parses "https://app.example.com, http://localhost:5173" into origins (scheme, host and port:
 * what a browser sends in Origin), or ["*"] for any origin.
 */
export function parseOrigins(name: string, raw: string | undefined): string[] {
  if (!raw) return [];
  const entries = raw.split(',').map((s) => s.trim()).filter(Boolean);
  if (entries.includes('*')) {
    if (entries.length > 1) throw new ConfigError(`${name} is either "*" or a list of origins, not both`);
    return ['*'];
  }
  return entries.map((entry) => {
    let parsed: URL | undefined;
    try {
      parsed = new URL(entry);
    } catch {
      parsed = undefined;
    }
    const bare = parsed && ['http:', 'https:'].includes(parsed.protocol) && parsed.pathname === '/' && !parsed.search && !parsed.hash && !parsed.username && !parsed.password;
    if (!parsed || !bare) {
      throw new ConfigError(`${name} must be a comma-separated list of origins such as https://app.example.com (scheme, host and port only), "${entry}" is not one`);
    }
    return parsed.origin;
  });
}
