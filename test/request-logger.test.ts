// A request's logger is made on first use (src/http/request-logger.ts): the lines it writes are
// those Fastify's own child would have written, its request id bound and the service's redaction
// applied; a line below the level writes nothing; a route's own level still applies.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { requestLogger } from '../src/http/request-logger.js';

const lines: Array<Record<string, unknown>> = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
    done();
  },
});
let app: FastifyInstance;
let base: string;
/** Children made of the service's logger. */
let childrenMade = 0;

before(async () => {
  // The service's redaction (src/logger.ts), at the production level.
  const logger = pino({ level: 'warn', redact: { paths: ['headers.authorization', '*.password'], censor: '[redacted]' } }, sink);
  // Counted on the logger and on every child of it, which inherit it.
  const child = logger.child;
  logger.child = function (this: typeof logger, ...args: Parameters<typeof child>) {
    childrenMade++;
    return child.apply(this, args);
  } as typeof logger.child;
  app = Fastify({ loggerInstance: logger as FastifyBaseLogger, childLoggerFactory: requestLogger, disableRequestLogging: true });
  app.get('/warn', async (request) => {
    request.log.info({ step: 'below the level' }, 'not written');
    request.log.warn({ headers: { authorization: 'Bearer secret' }, body: { password: 'hunter2' } }, 'written');
    return { level: request.log.level };
  });
  app.get('/quiet', async (request) => {
    request.log.debug('below the level');
    return {};
  });
  app.get('/child', async (request) => {
    request.log.child({ part: 'inner' }).error('from a child');
    return {};
  });
  app.get('/debug', { logLevel: 'debug' }, async (request) => {
    request.log.debug('a route at debug');
    return { level: request.log.level };
  });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
});

after(() => app.close());

const linesWith = (msg: string) => lines.filter((l) => l.msg === msg);

test('a line at the level carries the request id and is redacted; one below it writes nothing', async () => {
  const res = await fetch(`${base}/warn`);
  assert.deepEqual(await res.json(), { level: 'warn' });
  const [line] = linesWith('written');
  assert.ok(line, JSON.stringify(lines));
  assert.match(String(line.reqId), /^req-/);
  assert.deepEqual(line.headers, { authorization: '[redacted]' });
  assert.deepEqual(line.body, { password: '[redacted]' });
  assert.equal(linesWith('not written').length, 0);
});

test('a request that writes no line makes no logger; one that writes one makes one', async () => {
  const before = childrenMade;
  assert.equal((await fetch(`${base}/quiet`)).status, 200);
  assert.equal(childrenMade, before);
  assert.equal((await fetch(`${base}/warn`)).status, 200);
  assert.equal(childrenMade, before + 1);
});

test('a child of a request logger keeps the request id and adds its own bindings', async () => {
  await fetch(`${base}/child`);
  const [line] = linesWith('from a child');
  assert.ok(line, JSON.stringify(lines));
  assert.match(String(line.reqId), /^req-/);
  assert.equal(line.part, 'inner');
});

test("a route's own log level still applies to its requests", async () => {
  const res = await fetch(`${base}/debug`);
  assert.deepEqual(await res.json(), { level: 'debug' });
  assert.equal(linesWith('a route at debug').length, 1);
});

test('each request, its own request id', async () => {
  await fetch(`${base}/warn`);
  const ids = linesWith('written').map((l) => l.reqId);
  assert.equal(ids.length, 3);
  assert.equal(new Set(ids).size, 3);
});
