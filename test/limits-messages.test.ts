// The message limit of docs/api.md section 6: beyond 20 a second per user, across all their sockets
// and POST /messages (and every instance, through Redis), a message is refused: RATE_LIMITED by
// acknowledgement with the socket kept, 429 problem+json with Retry-After over HTTP, nothing
// stored, and each refusal counted in teamlog_requests_limited_total{limit="messages"}.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Client, type Response, type Session } from './helpers/client.js';
import { uniqueWord } from './helpers/factories.js';
import { useTestServer } from './helpers/harness.js';
import { needsRedis, startTestServer, type TestServer } from './helpers/server.js';
import { connect, emitWithAck, sleep, type ClientSocket } from './helpers/sockets.js';
import { limitedCount } from './helpers/limits.js';

const h = useTestServer({ env: { RATE_LIMIT_PER_MINUTE: '0' } });
const PER_SECOND = 20;

let second: TestServer | undefined;
after(() => second?.close());

const open: ClientSocket[] = [];
const closeAll = () => open.splice(0).forEach((s) => s.close());

/** The messages stored with this tag in their text. */
async function storedWith(tag: string): Promise<number> {
  const [row] = await h.server.owner.query<{ n: number }>(`SELECT count(*)::int AS n FROM messages WHERE text LIKE $1`, [`${tag}%`]);
  return row!.n;
}

interface Flood {
  accepted: number;
  refused: number;
  elapsedMs: number;
  refusedRest: Response[];
}

/**
 * Sends `perSocket` new-message events on each socket and `rest` POST /messages (to `restOn`,
 * in turn), all at once; every answer is either a stored message or a RATE_LIMITED refusal.
 */
async function flood(user: Session, sockets: ClientSocket[], perSocket: number, rest: number, tag: string, restOn: TestServer[] = [h.server]): Promise<Flood> {
  const started = Date.now();
  const viaSockets = sockets.flatMap((socket, s) =>
    Array.from({ length: perSocket }, (_, i) => emitWithAck(socket, 'new-message', { text: `${tag} socket ${s} #${i}` })),
  );
  const viaRest = Array.from({ length: rest }, (_, i) => {
    const server = restOn[i % restOn.length]!;
    const client = server === user.client.server ? user.client : new Client(server);
    return client.post('/api/v1/messages', { text: `${tag} rest #${i}` }, { token: user.token });
  });
  const [acks, answers] = await Promise.all([Promise.all(viaSockets), Promise.all(viaRest)]);
  const elapsedMs = Date.now() - started;
  let accepted = 0;
  let refused = 0;
  for (const ack of acks) {
    if (ack.ok === true) accepted++;
    else {
      const error = ack.error as { code: string; message: string };
      assert.equal(error.code, 'RATE_LIMITED', JSON.stringify(ack));
      assert.equal(typeof error.message, 'string');
      refused++;
    }
  }
  const refusedRest: Response[] = [];
  for (const res of answers) {
    if (res.status === 201) accepted++;
    else {
      assert.equal(res.status, 429, res.text);
      refusedRest.push(res);
      refused++;
    }
  }
  return { accepted, refused, elapsedMs, refusedRest };
}

/**
 * The window slides: any 1000 ms holds at most 20 accepted messages, so a flood that lasted
 * `elapsedMs` (from the first send to the last answer, which encloses every decision) holds at
 * most 20 per started second of it; one that fit in a second, exactly 20.
 */
function assertWithinLimit(f: Flood, sent: number): void {
  assert.equal(f.accepted + f.refused, sent, 'every message is stored or refused');
  if (f.elapsedMs < 1000) assert.equal(f.accepted, PER_SECOND, `${f.accepted} accepted in ${f.elapsedMs} ms`);
  else {
    assert.ok(f.accepted >= PER_SECOND, `${f.accepted} accepted`);
    assert.ok(f.accepted <= PER_SECOND * Math.ceil(f.elapsedMs / 1000), `${f.accepted} accepted in ${f.elapsedMs} ms`);
  }
  for (const res of f.refusedRest) {
    assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
    assert.equal(res.body.code, 'RATE_LIMITED');
    assert.ok(Number(res.headers.get('retry-after')) >= 1, `Retry-After ${res.headers.get('retry-after')}`);
  }
}

describe(`at most ${PER_SECOND} messages a second per user`, () => {
  test('5 sockets and POST /messages at once: 20 stored in the second, the rest refused, the sockets kept', async () => {
    const user = await h.newUser();
    const sockets = await Promise.all(Array.from({ length: 5 }, () => connect(user)));
    open.push(...sockets);
    const tag = uniqueWord('flood');
    const before = await limitedCount(h.server, 'messages');
    const f = await flood(user, sockets, 12, 20, tag);
    assertWithinLimit(f, 80);
    assert.equal(await storedWith(tag), f.accepted, 'what was refused is not stored');
    assert.equal((await limitedCount(h.server, 'messages')) - before, f.refused);
    assert.ok(sockets.every((s) => s.connected), 'the sockets stay connected');

    // A second later the user may send again, on either path; another user never was held.
    await sleep(1100);
    assert.equal((await emitWithAck(sockets[0]!, 'new-message', { text: `${tag} after` })).ok, true);
    assert.equal((await user.client.post('/api/v1/messages', { text: `${tag} after, rest` }, { token: user.token })).status, 201);
    closeAll();
  });

  test('POST /messages alone: the 21st in the second is 429 RATE_LIMITED with Retry-After', async () => {
    const user = await h.newUser();
    const tag = uniqueWord('rest');
    const f = await flood(user, [], 0, 30, tag);
    assertWithinLimit(f, 30);
    assert.equal(await storedWith(tag), f.accepted);
  });

  test('another user is not held to this one\'s count', async () => {
    const [a, b] = await Promise.all([h.newUser(), h.newUser()]);
    const tag = uniqueWord('two');
    await flood(a, [], 0, 25, tag);
    assert.equal((await b.client.post('/api/v1/messages', { text: `${tag} b` }, { token: b.token })).status, 201);
  });

  test('across two instances, with Redis: sockets and POST /messages on both share the count', { skip: needsRedis }, async () => {
    second ??= await startTestServer({ database: h.server.database, env: { RATE_LIMIT_PER_MINUTE: '0' } });
    const user = await h.newUser();
    const sockets = await Promise.all(Array.from({ length: 4 }, (_, i) => connect(user, i % 2 === 0 ? {} : { url: second!.url })));
    open.push(...sockets);
    const tag = uniqueWord('both');
    const f = await flood(user, sockets, 10, 20, tag, [h.server, second]);
    assertWithinLimit(f, 60);
    assert.equal(await storedWith(tag), f.accepted);
    closeAll();
  });
});
