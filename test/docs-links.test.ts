// Docs live in the repository (docs/architecture.md, habit 10): what the README and docs/ link to
// must be there, and a source comment that cites a file must cite one this repository holds, so
// that whoever clones the project can read what the code says it implements. Pure: no server, no
// database; it reads the working tree from the repository's root (where scripts/test.mjs runs).
//
// Links: every relative link and image in README.md, docs/*.md and the client's README resolves to a
// file or folder, and a `#anchor` (in the same file or another Markdown file) names one of that
// file's headings, slugged as GitHub slugs them. Source comments: every file path cited in a
// comment of src/, test/, scripts/, bench/, migrations/ or sql/ is a file of the repository,
// found from the citing file's folder, from the root, or as the tail of a repository path
// (`db/postgres.ts`, `tlog/merkle.ts`).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import ts from 'typescript';

const ROOT = path.resolve('.');
/** Never part of what a clone holds: build output, dependencies, local data. */
const NOT_THE_REPO = new Set(['.git', 'node_modules', 'dist', 'data', 'coverage']);

function walk(dir: string, keep: (file: string) => boolean): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (NOT_THE_REPO.has(e.name)) return [];
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p, keep) : keep(p) ? [p] : [];
  });
}

const rel = (file: string) => path.relative(ROOT, file).split(path.sep).join('/');

// ---------------------------------------------------------------------------------------------
// Markdown: links and headings

/** The Markdown files whose links are checked. */
function markdownFiles(): string[] {
  const docs = walk(path.join(ROOT, 'docs'), (f) => f.endsWith('.md'));
  return [path.join(ROOT, 'README.md'), ...docs, path.join(ROOT, 'client', 'README.md')].filter((f) => existsSync(f));
}

/** A Markdown text with fenced code blocks blanked (their lines kept, so line numbers hold). */
function withoutFences(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').map((line) => {
    const m = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence === undefined && m) {
      fence = m[1]!;
      return '';
    }
    if (fence !== undefined) {
      if (m && m[1]!.startsWith(fence[0]!) && m[1]!.length >= fence.length && line.trim() === m[1]) fence = undefined;
      return '';
    }
    return line;
  });
}

/** A line with its inline code spans blanked, so that `[x](y)` inside backticks is no link. */
const withoutCodeSpans = (line: string): string => line.replace(/(`+)[^`]*?\1/g, (s) => ' '.repeat(s.length));

/**
 * GitHub's anchor for a heading (github-slugger, as github.com renders Markdown): the heading's
 * text as rendered (code spans, emphasis and link syntax gone), lower-cased, every character that
 * is not a letter, a mark, a digit, a connector (`_`), a space or a hyphen removed, spaces turned
 * into hyphens; a repeated slug gets `-1`, `-2`, … in order.
 */
export function githubSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`+/g, '')
    .replace(/\*\*|__/g, '')
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

const anchorCache = new Map<string, Set<string>>();

/** The anchors a Markdown file offers: its headings' slugs, and any `<a id|name="…">`. */
function anchorsOf(file: string): Set<string> {
  const cached = anchorCache.get(file);
  if (cached) return cached;
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(readFileSync(file, 'utf8'))) {
    const h = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const slug = githubSlug(h[1]!);
      const n = seen.get(slug) ?? 0;
      seen.set(slug, n + 1);
      anchors.add(n === 0 ? slug : `${slug}-${n}`);
    }
    for (const a of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(a[1]!);
  }
  anchorCache.set(file, anchors);
  return anchors;
}

interface Link {
  file: string;
  line: number;
  target: string;
}

/** Every link and image target in a Markdown file, inline (`[t](x)`) or by reference (`[r]: x`). */
function linksOf(file: string): Link[] {
  const links: Link[] = [];
  withoutFences(readFileSync(file, 'utf8')).forEach((raw, i) => {
    const line = withoutCodeSpans(raw);
    for (const m of line.matchAll(/!?\[(?:[^\]`]|`[^`]*`)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ file, line: i + 1, target: m[1]! });
    }
    const ref = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/.exec(line);
    if (ref) links.push({ file, line: i + 1, target: ref[1]! });
  });
  return links;
}

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//');

/** Files being written: a link to one is reported (todo) while it is missing, and checked like any other once it is there. */
const PENDING = new Set<string>([]);

/** What is wrong with a link, or undefined when it resolves. */
function brokenLink(link: Link): string | undefined {
  if (isExternal(link.target)) return undefined;
  const [rawPath = '', anchor] = link.target.split('#', 2) as [string, string | undefined];
  const targetPath = decodeURIComponent(rawPath);
  const file = targetPath === '' ? link.file : path.resolve(path.dirname(link.file), targetPath);
  if (!file.startsWith(ROOT)) return `${link.target} leaves the repository`;
  if (!existsSync(file)) return PENDING.has(rel(file)) ? undefined : `${link.target}: no such file`;
  if (anchor !== undefined && anchor !== '') {
    if (statSync(file).isDirectory() || !file.endsWith('.md')) return `${link.target}: an anchor into a file that is not Markdown`;
    if (!anchorsOf(file).has(decodeURIComponent(anchor))) return `${link.target}: no heading of ${rel(file)} has the anchor #${anchor}`;
  }
  return undefined;
}

describe('Markdown links', () => {
  const files = markdownFiles();

  test('the README and docs/ are there to check', () => {
    assert.ok(files.includes(path.join(ROOT, 'README.md')));
    assert.ok(files.some((f) => rel(f).startsWith('docs/')));
  });

  test('GitHub slugs headings as the anchors assume', () => {
    assert.equal(githubSlug('Streaming the audit log out (webhook)'), 'streaming-the-audit-log-out-webhook');
    assert.equal(githubSlug('Real-time (Socket.IO)'), 'real-time-socketio');
    assert.equal(githubSlug('1. Conventions'), '1-conventions');
    assert.equal(githubSlug('Users — `{id, email}`'), 'users--id-email');
    assert.equal(githubSlug('`AUDIT_SEALING` and **keys**'), 'audit_sealing-and-keys');
  });

  test('every relative link and image resolves to a file of the repository, and every anchor to a heading', () => {
    const broken = files.flatMap(linksOf).flatMap((link) => {
      const why = brokenLink(link);
      return why === undefined ? [] : [`${rel(link.file)}:${link.line}: ${why}`];
    });
    assert.deepEqual(broken, [], `broken links:\n${broken.join('\n')}`);
  });

  const pending = files
    .flatMap(linksOf)
    .filter((l) => !isExternal(l.target))
    .filter((l) => {
      const p = l.target.split('#')[0]!;
      const file = p === '' ? l.file : path.resolve(path.dirname(l.file), decodeURIComponent(p));
      return PENDING.has(rel(file)) && !existsSync(file);
    });
  test(
    'links to files other work is still writing',
    { todo: pending.length > 0 ? `not there yet: ${[...new Set(pending.map((l) => l.target))].join(', ')}` : undefined },
    () => {
      assert.deepEqual(pending.map((l) => `${rel(l.file)}:${l.line}: ${l.target}`), []);
    },
  );
});

// ---------------------------------------------------------------------------------------------
// Source comments: the files they cite

const SOURCE_DIRS = ['src', 'test', 'scripts', 'bench', 'migrations', 'sql'];
const CODE = /\.(?:ts|mts|cts|mjs|cjs|js)$/;

/** Every comment of a source file, with the line it starts on. */
function commentsOf(file: string): { line: number; text: string }[] {
  const text = readFileSync(file, 'utf8');
  const lineOf = (pos: number) => text.slice(0, pos).split('\n').length;
  if (file.endsWith('.sql')) {
    return [...text.matchAll(/--(.*)$/gm)].map((m) => ({ line: lineOf(m.index), text: m[1]! }));
  }
  if (file.endsWith('.sh')) {
    return [...text.matchAll(/^\s*#(.*)$/gm)].map((m) => ({ line: lineOf(m.index), text: m[1]! }));
  }
  // TypeScript's own parser finds the comments (a `//` in a string or a regular expression is
  // none): each is trivia before some token, so every token's leading comments are all of them.
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('.ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS);
  const found = new Map<number, { line: number; text: string }>();
  const visit = (node: ts.Node) => {
    for (const range of ts.getLeadingCommentRanges(text, node.getFullStart()) ?? []) {
      if (!found.has(range.pos)) found.set(range.pos, { line: lineOf(range.pos), text: text.slice(range.pos, range.end) });
    }
    for (const child of node.getChildren(source)) visit(child);
  };
  visit(source);
  return [...found.values()];
}

/** Every file of the repository, as a path from its root. */
const repoFiles = walk(ROOT, () => true).map(rel);

/** A name that stands for many files (`migrations/NNNN_name.sql`, `R__name.sql`), not one. */
const PLACEHOLDER = /(?:^|\/)[^/]*(?:NNNN|(?:^|[_-])name\.)[^/]*$/;

/**
 * A path in another repository or package, named just before it: `C2SP/C2SP signed-note.md`,
 * `cyberphone/json-canonicalization testdata/README.md`, `@fastify/swagger-ui's static/csp.json`.
 */
const ELSEWHERE = /(?:^|[\s`(])@?[\w.-]+\/[\w.-]+(?<!\.(?:ts|mjs|js|json|md|sql|sh|ya?ml))(?:'s)?`?\s+$/;

/** Files a comment names that no clone holds, on purpose, each with why. */
const NOT_IN_A_CLONE = new Map<string, string>([
  ['test/upgrade/fill-previous-release.ts manifest.json', 'written by the previous release into the upgrade test\'s own directory, at run time'],
]);

/**
 * File paths a comment cites: a name with an extension a file of this project has, alone or
 * after folders. Not a URL's tail, not a pattern (`sql/<repository>.sql`, `*.test.ts`,
 * `migrations/NNNN_name.sql`), not a package's or a Node module's name (no extension), not a
 * file of another repository named with it.
 */
function citedPaths(comment: string): string[] {
  const text = comment.replace(/\n\s*(?:\*(?!\/)|\/\/|--|#)?/g, ' ');
  const found: string[] = [];
  for (const m of text.matchAll(/(?<![\w@.:/<>*$-])((?:\.{1,2}\/)*[\w.-]+(?:\/[\w.-]+)*\.(?:ts|mjs|cjs|js|json|md|sql|sh|ya?ml|conf|html|css|png))(?![\w/<>*-])/g)) {
    const cited = m[1]!;
    if (PLACEHOLDER.test(cited) || ELSEWHERE.test(text.slice(0, m.index))) continue;
    found.push(cited);
  }
  return found;
}

/** Whether a cited path names a file of the repository. */
function resolves(cited: string, from: string): boolean {
  if (NOT_IN_A_CLONE.has(`${rel(from)} ${cited}`) || PENDING.has(cited)) return true;
  // What the build writes under dist/ (compiled modules, the build's info) is made from the sources,
  // never held by a clone.
  if (cited.startsWith('dist/')) return true;
  const candidates = [cited];
  // A compiled module is cited by what it compiles to (its `.js`): its source.
  if (/\.(?:m?js)$/.test(cited)) candidates.push(cited.replace(/\.m?js$/, '.ts'));
  const inRepo = (file: string) => existsSync(file) && file.startsWith(ROOT) && !rel(file).split('/').some((part) => NOT_THE_REPO.has(part));
  return candidates.some((c) => {
    if (inRepo(path.resolve(path.dirname(from), c)) || inRepo(path.resolve(ROOT, c))) return true;
    const tail = c.replace(/^(?:\.{1,2}\/)+/, '');
    return repoFiles.some((f) => f === tail || f.endsWith(`/${tail}`));
  });
}

/** The contract and the architecture notes were kept outside the repository: see the todo below. */
const OUTSIDE_SPEC = /^(?:API|ARCHITECTURE)\.md$/;

/** Stale citations allowed for now ("<file> <cited>"): none. */
const KNOWN_STALE = new Set<string>([]);

/**
 * A versioned migration's text is checksummed once applied (src/db/migrate.ts refuses an edited
 * one), so what its comments cite stays as written (the contract they cite is docs/api.md).
 */
const FROZEN = /^migrations\/\d{4}_[^/]+\.sql$/;

const citations = SOURCE_DIRS.flatMap((dir) => walk(path.join(ROOT, dir), (f) => (CODE.test(f) || f.endsWith('.sql') || f.endsWith('.sh')) && !FROZEN.test(rel(f)))).flatMap((file) =>
  commentsOf(file).flatMap((c) => citedPaths(c.text).map((cited) => ({ file, line: c.line, cited }))),
);
const isKnownStale = (c: { file: string; cited: string }) => KNOWN_STALE.has(`${rel(c.file)} ${c.cited}`) && !resolves(c.cited, c.file);

describe('source comments', () => {
  test('the scan finds the files comments cite', () => {
    assert.ok(citations.length > 50, `only ${citations.length} citations found`);
    assert.ok(citations.some((c) => c.cited === 'src/db/commit-order.ts' || c.cited.endsWith('commit-order.ts')));
  });

  test('every file a source comment cites is in the repository', () => {
    const missing = citations
      .filter((c) => !OUTSIDE_SPEC.test(c.cited) && !isKnownStale(c) && !resolves(c.cited, c.file))
      .map((c) => `${rel(c.file)}:${c.line}: ${c.cited}`);
    assert.deepEqual(missing, [], `comments cite files that are not in the repository:\n${missing.join('\n')}`);
  });

  const stale = citations.filter(isKnownStale).map((c) => `${rel(c.file)}:${c.line}: ${c.cited}`);
  test('the stale citations issue 27 names are gone', () => {
    assert.deepEqual(stale, []);
  });

  test(
    'no source comment cites the contract or the architecture notes outside the repository (API.md, ARCHITECTURE.md)',
    () => {
      const outside = citations.filter((c) => OUTSIDE_SPEC.test(c.cited)).map((c) => `${rel(c.file)}:${c.line}: ${c.cited}`);
      assert.deepEqual(outside, [], `${outside.length} comments cite API.md or ARCHITECTURE.md, which are not in the repository (docs/api.md and docs/architecture.md are):\n${outside.join('\n')}`);
    },
  );
});

// ---------------------------------------------------------------------------------------------
// Markdown code spans: the files the docs name in backticks

/** Every file path a Markdown file names in an inline code span (`src/db/postgres.ts`), fenced blocks left out. */
function codeSpanPaths(file: string): Array<{ file: string; line: number; cited: string }> {
  return withoutFences(readFileSync(file, 'utf8')).flatMap((line, i) =>
    [...line.matchAll(/(`+)([^`]+?)\1/g)].flatMap((m) =>
      citedPaths(m[2]!)
        // An extension alone (a declaration file's) names no file.
        .filter((cited) => cited.includes('/') || !cited.startsWith('.'))
        .map((cited) => ({ file, line: i + 1, cited })),
    ),
  );
}

/** Files the docs name that no clone holds, on purpose, each with why. */
const NOT_IN_THE_REPOSITORY = new Map<string, string>([
  ['docs/architecture.md server/models/Event.ts', 'Outline\'s, a model studied'],
  ['docs/architecture.md routes/api/tasks/index.ts', 'fastify/demo\'s, a model studied'],
  ['docs/architecture.md domain/new-order-use-case.ts', 'Practica\'s, a model studied'],
  ['docs/audit-search.md search-quick.md', 'written by `npm run bench -- --only search --quick`, not committed'],
  ['docs/performance.md bench/results/quick.md', 'written by `npm run bench -- --quick`, not committed'],
]);

describe('Markdown code spans', () => {
  const spans = markdownFiles().flatMap(codeSpanPaths);

  test('the scan finds the files the docs name in backticks', () => {
    assert.ok(spans.length > 50, `only ${spans.length} found`);
  });

  test('every file the README and docs/ name in backticks is in the repository (what the build writes excepted)', () => {
    const built = (cited: string) => cited.split('/').some((part) => part === 'dist' || part === 'node_modules');
    const missing = spans
      .filter((s) => !built(s.cited) && !OUTSIDE_SPEC.test(s.cited) && !NOT_IN_THE_REPOSITORY.has(`${rel(s.file)} ${s.cited}`) && !resolves(s.cited, s.file)).map((s) => `${rel(s.file)}:${s.line}: ${s.cited}`);
    assert.deepEqual(missing, [], `the docs name files that are not in the repository:\n${missing.join('\n')}`);
  });
});
