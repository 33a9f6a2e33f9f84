// The layering docs/architecture.md asks for, checked on the source's imports, so that it holds
// as modules are added: no import cycles; services, use cases and repositories know nothing
// of HTTP; routes never reach the database; only the use-case runner writes audit records;
// SQL only in repositories; sockets never import HTTP; a module's files named <noun>.<role>.ts;
// src/tlog/ imports nothing of the app; imports point down the floors of src/; no test-only
// mutable export; no test helper declared twice.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const SRC = path.resolve('src');

function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

/**
 * Relative imports of a file, as source paths: all of them (type-only ones couple the code all
 * the same), or only those that load code at run time.
 */
function importsOf(file: string, only: 'all' | 'values'): string[] {
  const text = readFileSync(file, 'utf8');
  const statements = [...text.matchAll(/(?:^|\n)\s*((?:import|export)\s[^'"]*?from\s+'(\.[^']+)')/g)].map((m) => ({ clause: m[1]!, spec: m[2]! }));
  const dynamic = [...text.matchAll(/import\('(\.[^']+)'\)/g)].map((m) => ({ clause: '', spec: m[1]! }));
  return [...statements, ...dynamic]
    .filter(({ clause }) => only === 'all' || !/^(?:import|export)\s+type\s/.test(clause))
    .map(({ spec }) => path.resolve(path.dirname(file), spec.replace(/\.js$/, '.ts')));
}

const files = sourceFiles();
const graph = new Map(files.map((f) => [f, importsOf(f, 'all')]));
const rel = (f: string) => path.relative(SRC, f);

/** Every file a file reaches through imports. */
function reach(file: string, seen = new Set<string>()): Set<string> {
  for (const dep of graph.get(file) ?? []) {
    if (!seen.has(dep)) {
      seen.add(dep);
      reach(dep, seen);
    }
  }
  return seen;
}

test('no import cycles among the source files', () => {
  const cycles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (f: string) => {
    state.set(f, 'open');
    stack.push(f);
    for (const dep of graph.get(f) ?? []) {
      if (state.get(dep) === 'open') cycles.push([...stack.slice(stack.indexOf(dep)), dep].map(rel).join(' → '));
      else if (!state.has(dep)) visit(dep);
    }
    stack.pop();
    state.set(f, 'done');
  };
  for (const f of files) if (!state.has(f)) visit(f);
  assert.deepEqual(cycles, []);
});

test('services, use cases, policies, repositories and events never reach the HTTP layer', () => {
  // By role (`<noun>.<role>.ts`): a module's logic and data, not its HTTP side (routes, schemas, presenters).
  const roles = /\.(service|repository|policy|access|events|control-events|writer|deletion|user-deletion|status|limit|search|vocabulary|passwords|tokens|throttle|verdict|personal-data)\.ts$/;
  const domain = files.filter((f) => roles.test(f) || [`use-cases`, 'domain', 'validation'].some((dir) => f.includes(`${path.sep}${dir}${path.sep}`)));
  assert.ok(domain.length > 20, 'the check sees the domain files');
  const leaks = domain.flatMap((f) => [...reach(f)].filter((d) => d.startsWith(path.join(SRC, 'http') + path.sep) && !d.endsWith('.repository.ts')).map((d) => `${rel(f)} → ${rel(d)}`));
  assert.deepEqual(leaks, []);
});

test('routes never touch the database: no driver, no repository, no statement (row types may be named)', () => {
  const routes = files.filter((f) => f.endsWith('.routes.ts'));
  assert.ok(routes.length >= 9);
  const touches = routes.flatMap((f) =>
    importsOf(f, 'values').filter((d) => /\.repository\.ts$/.test(d) || d.includes(`${path.sep}db${path.sep}`)).map((d) => `${rel(f)} → ${rel(d)}`),
  );
  assert.deepEqual(touches, []);
  for (const f of routes) assert.doesNotMatch(readFileSync(f, 'utf8'), /\bdb\b\s*[.:]|\.query\(/, `${rel(f)} queries the database`);
});

test('only the use-case runner writes audit records', () => {
  // runtime.ts builds the writer and hands it to the runner alone (use-cases/ports.ts, RunnerStore).
  const builders = files.filter((f) => !f.endsWith(path.join('audit', 'audit.writer.ts')) && /createAuditWriter\(/.test(readFileSync(f, 'utf8')));
  assert.deepEqual(builders.map(rel), ['runtime.ts']);
  const callers = files.filter((f) => /\bwriter\.record(?:Batch)?\(|\.record\(/.test(readFileSync(f, 'utf8')) && (graph.get(f) ?? []).some((d) => d.endsWith(path.join('use-cases', 'ports.ts')) || d.endsWith(path.join('audit', 'audit.writer.ts'))));
  assert.deepEqual(callers.map(rel).sort(), ['use-cases/batch.ts', 'use-cases/runner.ts']);
  const sending = files.filter((f) => (graph.get(f) ?? []).some((d) => d.endsWith(path.join('audit', 'audit-writer.repository.ts'))));
  assert.deepEqual(sending.map(rel), ['modules/audit/audit.writer.ts'], 'the writer\'s statements are sent by the writer alone');
});

test('statements live only in repositories: no SQL is declared or sent outside *.repository.ts and src/db/', () => {
  const DB = path.join(SRC, 'db') + path.sep;
  const sql = (f: string) =>
    /\b(?:statements|dynamicStatement|committedReader|where)\(|\.query(?:<[^>]*>)?\(/.test(readFileSync(f, 'utf8')) ||
    importsOf(f, 'values').some((d) => d === path.join(DB, 'statements.ts') || d === path.join(DB, 'conditions.ts'));
  const outside = files.filter((f) => !f.endsWith('.repository.ts') && !f.startsWith(DB) && sql(f)).map(rel);
  assert.deepEqual(outside, []);
  assert.ok(files.some((f) => f.endsWith('.repository.ts') && sql(f)), 'the check sees the repositories');
});

test('no realtime → http import: sockets validate and refuse through src/validation/ and src/domain/, never the HTTP layer', () => {
  const HTTP = path.join(SRC, 'http') + path.sep;
  const realtime = files.filter((f) => f.startsWith(path.join(SRC, 'realtime') + path.sep));
  assert.ok(realtime.length >= 8);
  const direct = realtime.flatMap((f) => (graph.get(f) ?? []).filter((d) => d.startsWith(HTTP)).map((d) => `${rel(f)} → ${rel(d)}`));
  assert.deepEqual(direct, []);
  // What both layers share stays neutral all the way down.
  const shared = files.filter((f) => f.startsWith(path.join(SRC, 'validation') + path.sep));
  assert.ok(shared.length >= 3);
  const leaks = shared.flatMap((f) => [...reach(f)].filter((d) => d.startsWith(HTTP)).map((d) => `${rel(f)} → ${rel(d)}`));
  assert.deepEqual(leaks, []);
});

test('a module\'s files are named <noun>.<role>.ts, in its nested folders too', () => {
  const MODULES = path.join(SRC, 'modules');
  const named = files.filter((f) => f.startsWith(MODULES + path.sep)).map((f) => path.relative(MODULES, f).split(path.sep).join('/'));
  assert.ok(named.length > 40, 'the check sees the modules');
  assert.ok(named.some((f) => f.split('/').length > 2), 'the check sees the nested folders');
  const wrong = named.filter((f) => !/^[a-z][a-z0-9-]*(?:\/[a-z][a-z0-9-]*)*\/[a-z][a-z0-9-]*\.[a-z][a-z0-9-]*\.ts$/.test(f));
  assert.deepEqual(wrong, []);
});

test('src/tlog/ is the specs\' code alone: it imports nothing from the app and no package but Node\'s own', () => {
  const TLOG = path.join(SRC, 'tlog') + path.sep;
  const tlog = files.filter((f) => f.startsWith(TLOG));
  assert.ok(tlog.length >= 6, 'the check sees src/tlog/');
  const outside = tlog.flatMap((f) => (graph.get(f) ?? []).filter((d) => !d.startsWith(TLOG)).map((d) => `${rel(f)} → ${rel(d)}`));
  assert.deepEqual(outside, []);
  const packages = tlog.flatMap((f) =>
    [...readFileSync(f, 'utf8').matchAll(/(?:from\s+|import\()'([^.'][^']*)'/g)].map((m) => m[1]!).filter((spec) => !spec.startsWith('node:')).map((spec) => `${rel(f)} → ${spec}`),
  );
  assert.deepEqual(packages, []);
});

/**
 * The floors of src/, lowest first (docs/architecture.md): a folder imports only from its own
 * floor or lower ones, type-only imports included. The files at the top of src/ (config, deps,
 * app, runtime, server, cli) are the building's frame and are left out.
 */
const FLOORS = ['tlog', 'domain', 'validation', 'process', 'db', 'background', 'use-cases', 'http', 'modules', 'ops', 'realtime', 'witness', 'cli'];

test('imports point down: no folder of src/ imports from a floor above its own', () => {
  const floorOf = (f: string) => FLOORS.indexOf(path.relative(SRC, f).split(path.sep)[0]!);
  assert.deepEqual(
    readdirSync(SRC, { withFileTypes: true }).filter((e) => e.isDirectory() && !FLOORS.includes(e.name)).map((e) => e.name),
    [],
    'every folder of src/ has its floor',
  );
  const climbing = files.flatMap((f) => {
    const own = floorOf(f);
    if (own < 0) return [];
    return (graph.get(f) ?? []).filter((d) => floorOf(d) > own).map((d) => `${rel(f)} → ${rel(d)}`);
  });
  assert.deepEqual(climbing, []);
});

test('no test-only mutable export in src/: tests hand their hooks to createDeps (deps.ts, TestHooks)', () => {
  const exported = /^export\s+(?:(let|var)\s+([A-Za-z_$][\w$]*)|(?:const|function|class)\s+([A-Za-z_$][\w$]*ForTests)\b)/gm;
  const found = files.flatMap((f) => [...readFileSync(f, 'utf8').matchAll(exported)].map((m) => `${rel(f)} ${m[2] ?? m[3]!}`));
  assert.deepEqual(found, []);
});

test('no test helper redefined in a test file: a function a module of test/helpers/ exports is imported, not declared again', () => {
  const TEST = path.resolve('test');
  const HELPERS = path.join(TEST, 'helpers');
  // `export function f`, `export async function f`, `export const f = (…) =>` / `= async (…) =>` / `= function`.
  const declared = /^(?:export\s+)?(?:async\s+function\*?\s+([A-Za-z_$][\w$]*)|function\*?\s+([A-Za-z_$][\w$]*)|(?:const|let)\s+([A-Za-z_$][\w$]*)\s*(?::[^=]+)?=\s*(?:async\s*)?(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>|<))/gm;
  const functionsIn = (file: string, exportedOnly: boolean) =>
    [...readFileSync(file, 'utf8').matchAll(declared)]
      .filter((m) => !exportedOnly || m[0].startsWith('export'))
      .map((m) => m[1] ?? m[2] ?? m[3]!);
  const helpers = new Map<string, string>();
  for (const f of readdirSync(HELPERS).filter((n) => n.endsWith('.ts'))) {
    for (const name of functionsIn(path.join(HELPERS, f), true)) helpers.set(name, `helpers/${f}`);
  }
  assert.ok(helpers.has('settled') && helpers.has('team') && helpers.has('runTeamlog'), 'the rule reads the helpers it guards');
  const testFiles = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) return e.name === 'helpers' || e.name === 'node_modules' ? [] : testFiles(p);
      return e.name.endsWith('.test.ts') ? [p] : [];
    });
  const redefined = testFiles(TEST).flatMap((f) =>
    functionsIn(f, false)
      .filter((name) => helpers.has(name))
      .map((name) => `${path.relative(TEST, f)} declares ${name}, which ${helpers.get(name)} exports`),
  );
  assert.deepEqual(redefined, []);
});

test('the audit console verifies with src/tlog/\'s own code: what it imports from there is runtime-neutral, and web/console/ keeps no copy', () => {
  const WEB = path.resolve('web', 'console');
  const TLOG = path.join(SRC, 'tlog') + path.sep;
  const webFiles = sourceFiles(WEB);
  const specifiers = (f: string) => [...readFileSync(f, 'utf8').matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'|import\('([^']+)'\)/g)].map((m) => m[1] ?? m[2]!);
  // Every src/tlog/ file the bundle reaches, following relative imports from the page's files.
  const bundled = new Set<string>();
  const visit = (f: string) => {
    for (const dep of importsOf(f, 'all')) {
      if (!dep.startsWith(TLOG) || bundled.has(dep)) continue;
      bundled.add(dep);
      visit(dep);
    }
  };
  webFiles.forEach(visit);
  const names = [...bundled].map((f) => path.basename(f)).sort();
  for (const needed of ['bytes.ts', 'jcs.ts', 'merkle-path.ts', 'note-format.ts']) assert.ok(names.includes(needed), `web/console/ imports src/tlog/${needed}`);

  // No Node module, no package (not even a browser one), nothing outside src/tlog/, and no Buffer or process global.
  const notNeutral = [...bundled].flatMap((f) => [
    ...specifiers(f).filter((spec) => !spec.startsWith('.') || !path.resolve(path.dirname(f), spec).startsWith(TLOG)).map((spec) => `${rel(f)} → ${spec}`),
    ...(/\bBuffer\b|\bprocess\s*\./.test(readFileSync(f, 'utf8').replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '')) ? [`${rel(f)} uses a Node global`] : []),
  ]);
  assert.deepEqual(notNeutral, []);

  // No copy beside the page: the old files are gone, and no file of web/console/ declares what the shared modules export.
  const copies = ['jcs.ts', 'merkle.ts', 'note.ts', 'bytes.ts'].filter((name) => webFiles.some((f) => path.basename(f) === name));
  assert.deepEqual(copies, []);
  const shared = new Set([...bundled].flatMap((f) => [...readFileSync(f, 'utf8').matchAll(/^export\s+(?:async\s+)?(?:function|const|class)\s+([A-Za-z_$][\w$]*)/gm)].map((m) => m[1]!)));
  assert.ok(shared.has('canonicalize') && shared.has('rootFromInclusionPath') && shared.has('splitNote'), 'the check sees the shared exports');
  const redeclared = webFiles.flatMap((f) =>
    [...readFileSync(f, 'utf8').matchAll(/(?:^|\n)\s*(?:export\s+)?(?:async\s+)?(?:function\*?|const|let|class)\s+([A-Za-z_$][\w$]*)/g)]
      .map((m) => m[1]!)
      .filter((name) => shared.has(name))
      .map((name) => `${path.relative(path.resolve('.'), f)} declares ${name}`),
  );
  assert.deepEqual(redeclared, []);
});
