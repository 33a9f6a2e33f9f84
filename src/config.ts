// The only reader of process.env. Every setting is parsed once, at start, with a clear
// message naming the variable when it is wrong, so a typo never becomes a runtime surprise.
import { BlockList, isIP } from 'node:net';
import path from 'node:path';

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
  /** How long real-time events are kept for replay, in hours. */
  eventRetentionHours: number;
  auditSigningKey: string | undefined;
  auditSigningKeyId: string | undefined;
  auditCheckpointIntervalMs: number;
  auditWebhookUrl: string | undefined;
  auditWebhookSecret: string | undefined;
}

export class ConfigError extends Error {}

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

export function loadConfig(env: Env = process.env): Config {
  const adminEmail = str(env, 'ADMIN_EMAIL')?.toLowerCase();
  if (adminEmail !== undefined && !EMAIL.test(adminEmail)) throw new ConfigError('ADMIN_EMAIL is not an email address');
  const adminPassword = env.ADMIN_PASSWORD === '' ? undefined : env.ADMIN_PASSWORD;
  if (adminPassword !== undefined && adminPassword.length < 10) {
    throw new ConfigError('ADMIN_PASSWORD must have at least 10 characters');
  }
  const jwtSecret = str(env, 'JWT_SECRET');
  if (jwtSecret !== undefined && jwtSecret.length < 32) {
    throw new ConfigError('JWT_SECRET must have at least 32 characters');
  }
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  return {
    port: int(env, 'PORT', 3000, 0, 65535),
    host: str(env, 'HOST') ?? '127.0.0.1',
    databaseUrl,
    migrationDatabaseUrl: url(env, 'MIGRATION_DATABASE_URL', ['postgres:', 'postgresql:']) ?? databaseUrl,
    databasePoolSize: int(env, 'DATABASE_POOL_SIZE', 10, 1, 1000),
    dataDir: path.resolve(str(env, 'DATA_DIR') ?? './data'),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisKeyPrefix: (() => {
      const prefix = str(env, 'REDIS_KEY_PREFIX') ?? 'teamlog:';
      if (!/^[A-Za-z0-9:._-]{1,64}$/.test(prefix)) throw new ConfigError('REDIS_KEY_PREFIX must be 1 to 64 letters, digits, ":", ".", "_" or "-"');
      return prefix;
    })(),
    logLevel: (() => {
      const level = str(env, 'LOG_LEVEL') ?? 'info';
      if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(level)) {
        throw new ConfigError(`LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; got "${level}"`);
      }
      return level;
    })(),
    adminEmail,
    adminPassword,
    accessTokenTtl: int(env, 'ACCESS_TOKEN_TTL', 900, 1, 86_400),
    refreshTokenTtl: int(env, 'REFRESH_TOKEN_TTL', 30 * 86_400, 60, 365 * 86_400),
    jwtSecret,
    trustProxy: parseCidrList('TRUST_PROXY', str(env, 'TRUST_PROXY')),
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 3000, 0, 10_000_000),
    eventRetentionHours: int(env, 'EVENT_RETENTION_HOURS', 24, 1, 24 * 365),
    auditSigningKey: str(env, 'AUDIT_SIGNING_KEY'),
    auditSigningKeyId: str(env, 'AUDIT_SIGNING_KEY_ID'),
    auditCheckpointIntervalMs: int(env, 'AUDIT_CHECKPOINT_INTERVAL_MS', 5000, 100, 3_600_000),
    auditWebhookUrl: url(env, 'AUDIT_WEBHOOK_URL', ['http:', 'https:']),
    auditWebhookSecret: str(env, 'AUDIT_WEBHOOK_SECRET'),
  };
}
