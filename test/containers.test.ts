// The Dockerfile and compose.yaml, checked without a Docker daemon (CI has none, and base
// images cannot be pulled here): a small Dockerfile parser, and compose.yaml read with `yaml`.
// What they must keep saying: a multi-stage build whose runtime has production dependencies only
// and runs as a non-root user with a health check on /health/ready; PostgreSQL, Redis and two
// instances sharing the database, Redis and keys behind one port; and what a security review
// asks of them: the schema's owner only in a one-shot `migrate` the instances wait for, every
// password and key required (no default), and no /metrics through the proxy.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { settingNames, unknownEnvFileKeys } from '../src/config.js';
import { ROOT } from './helpers/paths.js';

const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

interface Stage {
  image: string;
  name: string | undefined;
  instructions: Instruction[];
}

/**
 * Dockerfile → stages. Comments and parser directives are dropped, continuation lines joined,
 * and `${ARG}` in FROM resolved from the ARGs declared before the first FROM (their defaults).
 */
function parseDockerfile(text: string): { globalArgs: Map<string, string>; stages: Stage[] } {
  const instructions: Instruction[] = [];
  let pending = '';
  let startLine = 0;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trimEnd();
    if (pending === '' && (line.trim() === '' || line.trimStart().startsWith('#'))) return;
    if (pending !== '' && line.trimStart().startsWith('#')) return; // a comment inside a continuation
    if (pending === '') startLine = i + 1;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      return;
    }
    const whole = (pending + line.trim()).trim();
    pending = '';
    const keyword = whole.split(/\s+/)[0] ?? '';
    instructions.push({ keyword: keyword.toUpperCase(), args: whole.slice(keyword.length).trim(), line: startLine });
  });
  assert.equal(pending, '', 'the Dockerfile ends inside a continuation line');

  const globalArgs = new Map<string, string>();
  const stages: Stage[] = [];
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      assert.ok(m, `line ${ins.line}: FROM ${ins.args}`);
      const image = m[1]!.replace(/\$\{?(\w+)\}?/g, (_all, name: string) => globalArgs.get(name) ?? assert.fail(`line ${ins.line}: ARG ${name} has no default`));
      stages.push({ image, name: m[2], instructions: [] });
    } else if (stages.length === 0) {
      assert.equal(ins.keyword, 'ARG', `line ${ins.line}: only ARG may come before the first FROM`);
      const [name = '', value = ''] = ins.args.split('=');
      globalArgs.set(name, value);
    } else {
      stages.at(-1)!.instructions.push(ins);
    }
  }
  return { globalArgs, stages };
}

/** ["node", "-e", "…"] or a shell form, as one string to search. */
const commandOf = (args: string) => (args.startsWith('[') ? (JSON.parse(args) as string[]).join(' ') : args);

describe('Dockerfile', () => {
  const { stages } = parseDockerfile(read('Dockerfile'));
  const byName = new Map(stages.map((s) => [s.name, s]));
  const runtime = stages.at(-1)!;
  const all = (stage: Stage, keyword: string) => stage.instructions.filter((i) => i.keyword === keyword);

  test('has build, deps and runtime stages, all on the standard Node 20 image', () => {
    assert.deepEqual(stages.map((s) => s.name), ['build', 'deps', 'runtime']);
    for (const stage of stages) assert.equal(stage.image, 'node:20-bookworm-slim', `${stage.name} is FROM ${stage.image}`);
  });

  test('builds with the dev dependencies, and ships production dependencies only', () => {
    const build = byName.get('build')!;
    const buildRuns = all(build, 'RUN').map((i) => i.args);
    assert.ok(buildRuns.some((r) => /\bnpm ci\b/.test(r) && !r.includes('--omit=dev')), 'the build stage installs without dev dependencies');
    assert.ok(buildRuns.some((r) => r.includes('scripts/build.mjs')), 'the build stage does not run the build');
    const deps = byName.get('deps')!;
    assert.ok(all(deps, 'RUN').some((i) => /\bnpm ci\b.*--omit=dev/.test(i.args)), 'the deps stage installs dev dependencies');
    assert.ok(!all(runtime, 'RUN').some((i) => /\bnpm (ci|install)\b/.test(i.args)), 'the runtime stage installs packages itself');
    const copies = all(runtime, 'COPY').map((i) => i.args);
    assert.ok(copies.includes('--from=deps /app/node_modules ./node_modules'), 'node_modules do not come from the deps stage');
    assert.ok(copies.includes('--from=build /app/dist ./dist'), 'dist/ does not come from the build stage');
    assert.ok(!copies.some((c) => c.startsWith('--from=build') && c.includes('node_modules')), 'the build stage\'s dev node_modules are shipped');
    for (const needed of ['package.json', 'migrations', 'bin']) assert.ok(copies.some((c) => c.split(/\s+/)[0] === needed), `${needed} is not in the image`);
  });

  test('runs as a non-root user, from the last USER on', () => {
    const users = all(runtime, 'USER');
    assert.ok(users.length > 0, 'no USER: the service would run as root');
    const user = users.at(-1)!;
    assert.ok(!['root', '0', '0:0'].includes(user.args.split(':')[0]!), `USER ${user.args}`);
    const lastRun = all(runtime, 'RUN').at(-1);
    assert.ok(!lastRun || lastRun.line < user.line, 'a RUN after USER');
  });

  test('checks its health on /health/ready, exposes its PORT, keeps DATA_DIR in a volume, and runs dist/server.js', () => {
    const health = all(runtime, 'HEALTHCHECK');
    assert.equal(health.length, 1);
    assert.match(health[0]!.args, /--interval=\S+/);
    assert.match(health[0]!.args, /\bCMD\b.*\/health\/ready/);
    const env = new Map(
      all(runtime, 'ENV').flatMap((i) => [...i.args.matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1]!, m[2]!] as const)),
    );
    assert.equal(env.get('HOST'), '0.0.0.0', 'the service would listen on the container\'s loopback only');
    assert.deepEqual(all(runtime, 'EXPOSE').map((i) => i.args), [env.get('PORT')]);
    const volumes = all(runtime, 'VOLUME').flatMap((i) => (i.args.startsWith('[') ? (JSON.parse(i.args) as string[]) : i.args.split(/\s+/)));
    assert.ok(env.get('DATA_DIR') && volumes.includes(env.get('DATA_DIR')!), `DATA_DIR ${env.get('DATA_DIR')} is not a VOLUME (${volumes.join(', ')})`);
    assert.equal(all(runtime, 'STOPSIGNAL')[0]?.args, 'SIGTERM');
    assert.equal(commandOf(all(runtime, 'CMD').at(-1)!.args), 'node dist/server.js');
  });

  test('copies only what exists, and .dockerignore keeps secrets and local state out without hiding those', () => {
    const ignored = read('.dockerignore').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    for (const secret of ['.env', '.git', 'node_modules', 'data', 'dist']) assert.ok(ignored.includes(secret), `.dockerignore lets ${secret} in`);
    for (const stage of stages) {
      for (const copy of all(stage, 'COPY').filter((i) => !i.args.startsWith('--from='))) {
        const sources = copy.args.split(/\s+/).filter((a) => !a.startsWith('--')).slice(0, -1);
        for (const source of sources) {
          assert.ok(existsSync(path.join(ROOT, source)), `line ${copy.line}: ${source} does not exist`);
          assert.ok(!ignored.includes(source) && !ignored.includes(source.split('/')[0]!), `line ${copy.line}: ${source} is in .dockerignore`);
        }
      }
    }
  });
});

interface Service {
  image?: string;
  build?: { context: string; args?: Record<string, string> };
  command?: string[] | string;
  restart?: string;
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] | string; interval?: string };
}

interface Location {
  modifier: '' | '=' | '^~' | '~' | '~*';
  path: string;
  body: string;
}

/** The location blocks of nginx.conf's server (no nested blocks inside a location here). */
function locations(conf: string): Location[] {
  const text = conf.replace(/#.*$/gm, '');
  return [...text.matchAll(/\blocation\s+(=|\^~|~\*|~)?\s*(\S+)\s*\{([^{}]*)\}/g)].map((m) => ({
    modifier: (m[1] ?? '') as Location['modifier'],
    path: m[2]!,
    body: m[3]!,
  }));
}

/**
 * The location nginx picks for a (decoded, normalized) path: an exact match; else the longest
 * prefix, if it is ^~; else the first regex that matches; else that longest prefix.
 */
function locationFor(all: Location[], uri: string): Location | undefined {
  const exact = all.find((l) => l.modifier === '=' && l.path === uri);
  if (exact) return exact;
  const prefix = all.filter((l) => (l.modifier === '' || l.modifier === '^~') && uri.startsWith(l.path)).sort((a, b) => b.path.length - a.path.length)[0];
  if (prefix?.modifier === '^~') return prefix;
  const regex = all.find((l) => (l.modifier === '~' || l.modifier === '~*') && new RegExp(l.path, l.modifier === '~*' ? 'i' : '').test(uri));
  return regex ?? prefix;
}

/** A location that refuses every request, or passes only one carrying the metrics token. */
const refusesOrChecksToken = (body: string) =>
  /^\s*deny\s+all\s*;/m.test(body) || /^\s*return\s+4\d\d\b/m.test(body) || /\$http_authorization/.test(body);

/** The ${VAR…} interpolations of compose.yaml: name, and what follows it (":?message", ":-default", or nothing). */
function interpolations(text: string): Array<{ name: string; rest: string }> {
  return [...text.replace(/^\s*#.*$/gm, '').matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)([^}]*)\}/g)].map((m) => ({ name: m[1]!, rest: m[2]! }));
}

describe('compose.yaml', () => {
  const text = read('compose.yaml');
  const compose = parse(text, { merge: true }) as { services: Record<string, Service>; volumes?: Record<string, unknown> };
  const { services } = compose;
  const instance = (name: string): readonly [string, Service] => [name, services[name] ?? assert.fail(`no service ${name}`)];
  const instances = [instance('teamlog-1'), instance('teamlog-2')] as const;
  const migrate: Service = services.migrate ?? {};
  /** The variables config.ts reads, so that a misspelt one in compose.yaml fails here. */
  const configVariables = new Set(settingNames());
  /** A URL with its ${…} interpolations replaced, to be parsed. */
  const urlOf = (value: string | undefined) => new URL((value ?? assert.fail('no URL')).replace(/\$\{[^}]*\}/g, 'x'));
  const superuser = services.postgres?.environment?.POSTGRES_USER ?? 'postgres';

  test('runs PostgreSQL 15, Redis 7, two Teamlog instances and the migrations built from this Dockerfile, and a proxy', () => {
    assert.equal(services.postgres?.image, 'postgres:15');
    assert.equal(services.redis?.image, 'redis:7');
    for (const [name, service] of [...instances, ['migrate', migrate] as const]) {
      assert.equal(service.build?.context, '.', `${name} is not built from this repository`);
      assert.equal(service.image, instances[0][1].image, `${name} runs another image`);
    }
    assert.match(services.proxy?.image ?? '', /^nginx:/);
  });

  test('every long-running service has a health check, and each starts only once what it needs is healthy, or done', () => {
    for (const [name, service] of Object.entries(services)) {
      if (name === 'migrate') continue;
      assert.ok(service.healthcheck?.test, `${name} has no healthcheck`);
    }
    for (const [name, service] of instances) {
      assert.deepEqual(
        service.depends_on,
        { postgres: { condition: 'service_healthy' }, redis: { condition: 'service_healthy' }, migrate: { condition: 'service_completed_successfully' } },
        name,
      );
      assert.match(JSON.stringify(service.healthcheck!.test), /\/health\/ready/);
    }
    assert.deepEqual(migrate.depends_on, { postgres: { condition: 'service_healthy' } });
    // Over TCP: PostgreSQL's init-time server listens on its socket only, and is not the one `migrate` reaches.
    assert.match(JSON.stringify(services.postgres!.healthcheck!.test), /pg_isready -h 127\.0\.0\.1 /);
    assert.deepEqual(services.proxy!.depends_on, { 'teamlog-1': { condition: 'service_healthy' }, 'teamlog-2': { condition: 'service_healthy' } });
  });

  test('a one-shot migrate service applies the migrations as the owner, and is never restarted', () => {
    assert.ok(services.migrate, 'no migrate service');
    const command = Array.isArray(migrate.command) ? migrate.command.join(' ') : (migrate.command ?? '');
    assert.match(command, /^(node dist\/cli\.js|teamlog|node bin\/teamlog\.js) migrate$/);
    assert.equal(migrate.restart, 'no', 'a restart policy would run it again after it exits 0');
    const env = migrate.environment ?? {};
    assert.deepEqual(Object.keys(env), ['MIGRATION_DATABASE_URL'], 'migrate holds the owner\'s URL and nothing else');
    const owner = urlOf(env.MIGRATION_DATABASE_URL);
    assert.equal(owner.hostname, 'postgres');
    assert.equal(owner.pathname, `/${services.postgres!.environment!.POSTGRES_DB}`);
    assert.equal(owner.username, superuser, 'the migrations run as the schema\'s owner');
    assert.equal(migrate.ports, undefined);
  });

  test('the instances hold the login of teamlog_app alone: no owner\'s URL, no superuser password', () => {
    for (const [name, service] of instances) {
      const env = service.environment!;
      assert.equal(env.MIGRATION_DATABASE_URL, undefined, `${name} has MIGRATION_DATABASE_URL`);
      for (const [key, value] of Object.entries(env)) {
        assert.ok(!value.includes('POSTGRES_PASSWORD'), `${name}'s ${key} carries the superuser's password`);
      }
      const login = urlOf(env.DATABASE_URL);
      assert.notEqual(login.username, superuser, `${name} logs in as the superuser`);
      assert.match(env.DATABASE_URL!, /^postgres:\/\/\w+:\$\{TEAMLOG_DB_PASSWORD:\?.+\}@/);
    }
  });

  test('every password, secret, key and token is required (${VAR:?message}): no default, and no empty value', () => {
    const secret = /PASSWORD|SECRET|_KEY$|TOKEN/;
    const found = interpolations(text).filter((i) => secret.test(i.name));
    for (const name of ['POSTGRES_PASSWORD', 'TEAMLOG_DB_PASSWORD', 'JWT_SECRET', 'AUDIT_SIGNING_KEY', 'METRICS_TOKEN']) {
      assert.ok(found.some((i) => i.name === name), `${name} is not read from the environment`);
    }
    for (const { name, rest } of found) {
      // ADMIN_PASSWORD empty is no default: Teamlog generates a random one into DATA_DIR.
      if (name === 'ADMIN_PASSWORD') continue;
      assert.match(rest, /^:\?\s*\S/, `\${${name}${rest}} is not required with a message (\${${name}:?…})`);
    }
    // No literal password either, in a URL or a variable.
    for (const service of Object.values(services)) {
      for (const [key, value] of Object.entries(service.environment ?? {})) {
        if (secret.test(key)) assert.match(value, /^\$\{\w+(:\?.+|:-)\}$/, `${key} is not taken from the environment`);
        if (/^postgres(ql)?:/.test(value)) assert.match(value, /^postgres(ql)?:\/\/\w+:\$\{\w+:\?.+\}@/, `${key} has a password that is not required`);
      }
    }
  });

  test('both instances share one configuration: the same database, Redis, keys and data volume', () => {
    const [[, first], [, second]] = instances;
    assert.deepEqual(first.environment, second.environment);
    assert.deepEqual(first.volumes, second.volumes);
    const env = first.environment!;
    for (const key of ['JWT_SECRET', 'AUDIT_SIGNING_KEY', 'METRICS_TOKEN']) {
      // Required from the environment or .env (compose stops with the message otherwise), never a default.
      assert.match(env[key] ?? '', new RegExp(`^\\$\\{${key}:\\?.+\\}$`), `${key} is not a required variable`);
    }
    const database = urlOf(env.DATABASE_URL);
    assert.equal(database.hostname, 'postgres');
    assert.equal(new URL(env.REDIS_URL!).hostname, 'redis');
    for (const name of Object.keys(env)) assert.ok(configVariables.has(name), `${name} is not a Teamlog variable`);
    // The login the instances use is the one the database's init script creates.
    const init = services.postgres!.volumes!.find((v) => v.includes('docker-entrypoint-initdb.d'))!;
    const script = read(init.split(':')[0]!);
    assert.match(script, new RegExp(`CREATE ROLE ${database.username} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`));
    assert.match(script, new RegExp(`GRANT teamlog_app TO ${database.username};`));
    assert.deepEqual([...script.matchAll(/\bGRANT\s+(.+?)\s+TO\s+(\w+)/g)].map((m) => `${m[1]} TO ${m[2]}`), [`teamlog_app TO ${database.username}`], 'the login is given anything but teamlog_app');
    // Its password is the instances' (and required there too).
    assert.match(services.postgres!.environment!.TEAMLOG_DB_PASSWORD ?? '', /^\$\{TEAMLOG_DB_PASSWORD:\?.+\}$/);
    assert.match(script, /"\$\{TEAMLOG_DB_PASSWORD:\?/);
  });

  test('a .env that compose.yaml reads warns of nothing at a Teamlog start: its variables are settings, or compose.yaml\'s own', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'teamlog-compose-env-'));
    try {
      const names = [...new Set(interpolations(text).map((i) => i.name))];
      writeFileSync(path.join(dir, '.env'), names.map((n) => `${n}=x`).join('\n'));
      assert.deepEqual(unknownEnvFileKeys(path.join(dir, '.env')), []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('one port, the proxy\'s: round-robin over both instances, with websocket upgrade', () => {
    for (const [name, service] of [...instances, ['migrate', migrate] as const]) assert.equal(service.ports, undefined, `${name} publishes a port of its own`);
    assert.equal(services.proxy!.ports?.length, 1);
    const [published] = services.proxy!.ports!;
    const conf = read(nginxConf(services));
    const upstream = /upstream\s+(\w+)\s*\{([^}]*)\}/.exec(conf);
    assert.ok(upstream, 'no upstream block');
    assert.deepEqual([...upstream[2]!.matchAll(/^\s*server\s+(\S+)/gm)].map((m) => m[1]), ['teamlog-1:3000', 'teamlog-2:3000']);
    assert.ok(!/\b(ip_hash|hash|sticky)\b/.test(upstream[2]!), 'sticky sessions');
    assert.match(conf, new RegExp(`proxy_pass\\s+http://${upstream[1]};`));
    assert.match(conf, /proxy_set_header\s+Upgrade\s+\$http_upgrade;/);
    assert.match(conf, /proxy_set_header\s+Connection\s+\$connection_upgrade;/);
    assert.match(conf, /proxy_http_version\s+1\.1;/);
    assert.match(conf, new RegExp(`listen\\s+${published!.split(':').at(-1)};`));
  });

  test('the proxy passes no request for /metrics on: the location that takes it refuses it (or checks the token)', () => {
    const all = locations(read(nginxConf(services)));
    assert.ok(all.length > 0, 'no location block');
    for (const uri of ['/metrics', '/metrics/', '/metrics/anything', '/metricsx']) {
      const chosen = locationFor(all, uri);
      assert.ok(chosen, `no location takes ${uri}`);
      assert.ok(refusesOrChecksToken(chosen.body), `${uri} goes to "location ${chosen.modifier} ${chosen.path}", which passes it on:${chosen.body}`);
    }
    // Nor does any other location that names it.
    for (const l of all.filter((l) => l.path.includes('metrics'))) {
      assert.ok(!/proxy_pass/.test(l.body) || refusesOrChecksToken(l.body), `location ${l.modifier} ${l.path} proxies /metrics`);
    }
    // The matcher itself: the API still goes to the instances.
    assert.match(locationFor(all, '/api/v1/tasks')!.body, /proxy_pass/);
  });
});

/** The nginx configuration the proxy mounts. */
function nginxConf(services: Record<string, Service>): string {
  const mount = services.proxy!.volumes!.find((v) => v.includes('/etc/nginx/'))!;
  return mount.split(':')[0]!;
}
