// Who is online, for Socket.IO presence (docs/api.md section 6): `user-online` on a user's first
// socket anywhere, `user-offline` on their last, and the snapshot. Without Redis this process
// is the whole world. With Redis each instance publishes its own counts, the sum over live
// instances decides, and an instance whose heartbeat stops is swept by a live one.
// The same counts hold a user to at most so many sockets at once (docs/api.md section 6: 20): a
// socket takes its slot before it connects, atomically with the check, so that sockets opened
// at once on several instances cannot all pass it. /admin sockets count towards the limit but
// not towards presence (they are counted apart, as the field `a:<id>`).
import type { Redis } from '../redis.js';

export interface PresenceOptions {
  /** Shared presence across instances; undefined: in this process only. */
  redis?: Redis;
  /** Prefix of every Redis key (the service's REDIS_KEY_PREFIX, e.g. 'teamlog:'). */
  keyPrefix: string;
  /** This process's id (unique per running instance, e.g. a random UUID made at start). */
  instanceId: string;
  /** How often this instance renews its heartbeat (default 5000 ms). */
  heartbeatMs?: number;
  /** After how long without a heartbeat an instance counts as dead (default 20000 ms; must be > 2 * heartbeatMs). */
  deadAfterMs?: number;
  /** Failures of the background heartbeat and sweep (Redis unreachable); they are retried at the next heartbeat. */
  onError?: (err: unknown) => void;
}

/** Which socket takes or gives back a slot: of `/` (the default) or of `/admin`, and the most sockets the user may hold. */
export interface SocketSlot {
  /** An /admin socket: it counts towards `max`, not towards presence (its connected() answers whether the user's first /admin socket). */
  admin?: boolean;
  /** The most sockets (of both namespaces) the user may hold across live instances; connected() answers 'full' instead of taking one more. */
  max?: number;
}

export interface Presence {
  /**
   * A socket of `userId` connected on this instance. True when it is the user's first socket on
   * any live instance; 'full' (and nothing counted) when the user already holds `slot.max`.
   */
  connected(userId: number): Promise<boolean>;
  connected(userId: number, slot: SocketSlot): Promise<boolean | 'full'>;
  /** A socket of `userId` on this instance disconnected. True when it was the user's last socket on any live instance. */
  disconnected(userId: number, slot?: Pick<SocketSlot, 'admin'>): Promise<boolean>;
  /** The ids of users with at least one socket on a live instance, ascending. */
  online(): Promise<number[]>;
  /**
   * Starts the heartbeat and the sweep: every heartbeat, this instance also looks for instances
   * whose heartbeat stopped (deadAfterMs) and removes their sockets; `onOffline` is called with the
   * users who thereby went offline (users with no socket left on any live instance). Each dead
   * instance is swept by exactly one live instance, so every such user is reported once.
   * `onOnline` is called with the users who came back online when this instance, swept as dead
   * while it was alive (a long pause), published its sockets again.
   */
  start(onOffline: (userIds: number[]) => void, onOnline?: (userIds: number[]) => void): void;
  /**
   * Stops the timers and removes this instance's own entries (a graceful stop; its sockets are
   * disconnected first by the caller). Users who thereby go offline (sockets whose disconnected()
   * had not run yet) are reported to onOffline; later calls change only the local counts.
   */
  stop(): Promise<void>;
}

export function createPresence(opts: PresenceOptions): Presence {
  return opts.redis ? redisPresence(opts.redis, opts) : localPresence();
}

/** The count a socket moves: the user id for `/` (the presence fields), `a:<id>` for /admin. */
const fieldOf = (userId: number, admin = false) => (admin ? `a:${userId}` : String(userId));
/** The other namespace's field of the same user: both count towards the limit. */
const siblingOf = (userId: number, admin = false) => fieldOf(userId, !admin);
const isUserField = (field: string) => /^\d+$/.test(field);

/** Moves a field's socket count in `counts`; the count after (-1: there was no socket to remove). */
function bump(counts: Map<string, number>, field: string, by: 1 | -1): number {
  const n = (counts.get(field) ?? 0) + by;
  if (n > 0) counts.set(field, n);
  else counts.delete(field);
  return n;
}

/** The sockets of both namespaces a user holds in `counts`. */
const held = (counts: Map<string, number>, userId: number) => (counts.get(fieldOf(userId)) ?? 0) + (counts.get(fieldOf(userId, true)) ?? 0);

const ascending = (ids: number[]) => ids.sort((a, b) => a - b);

function localPresence(): Presence {
  const counts = new Map<string, number>();
  async function connected(userId: number, slot: SocketSlot = {}): Promise<boolean | 'full'> {
    if (slot.max !== undefined && held(counts, userId) >= slot.max) return 'full';
    return bump(counts, fieldOf(userId, slot.admin), 1) === 1;
  }
  return {
    connected: connected as Presence['connected'],
    disconnected: async (userId, slot = {}) => bump(counts, fieldOf(userId, slot.admin), -1) === 0,
    online: async () => ascending([...counts.keys()].filter(isUserField).map(Number)),
    start: () => {},
    stop: async () => {},
  };
}

// Shared by every script. ARGV: prefix, instance id, TTL of every key (ms), then the script's own.
// Time is Redis's (TIME), so instances with skewed clocks judge heartbeats alike. A count that
// reaches 0 is deleted, so no entry outlives its user; every key expires unless renewed.
const PRELUDE = `
local p, self, ttl = ARGV[1], ARGV[2], ARGV[3]
local set, count = p .. 'presence:instances', p .. 'presence:count'
local function own(id) return p .. 'presence:instance:' .. id end
local function now() local t = redis.call('TIME'); return t[1] * 1000 + math.floor(t[2] / 1000) end
local function registered() return redis.call('ZSCORE', set, self) ~= false end
local function renew() for _, k in ipairs({own(self), count, set}) do redis.call('PEXPIRE', k, ttl) end end
local function counts(id)
  local t, flat = {}, redis.call('HGETALL', own(id))
  for i = 1, #flat, 2 do t[flat[i]] = tonumber(flat[i + 1]) end
  return t, #flat > 0
end
-- adds d to u's count across instances: 1 when u came online, -1 when u went offline, else 0
local function add(u, d)
  if d == 0 then return 0 end
  local after = redis.call('HINCRBY', count, u, d)
  if after <= 0 then redis.call('HDEL', count, u) end
  if after > 0 and after - d <= 0 then return 1 end
  if after <= 0 and after - d > 0 then return -1 end
  return 0
end
-- takes an instance's counts out of the sums, appending to went the users who went offline
local function drop(id, went)
  local mine, any = counts(id)
  for u, n in pairs(mine) do if add(u, -n) == -1 then went[#went + 1] = u end end
  redis.call('DEL', own(id))
  return any
end
`;

// ARGV[4] field, ARGV[5] +1/-1, ARGV[6] the most sockets the user may hold (0: no limit),
// ARGV[7] the user's other field. Nil when this instance is not registered: it was swept, so its
// counts are no longer in the sums and a delta would be wrong; the caller republishes instead.
// 2 when the user holds the most already: nothing changes.
const CHANGE = `${PRELUDE}
if not registered() then return nil end
local u, d, max = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
if d > 0 and max > 0 then
  local held = tonumber(redis.call('HGET', count, u) or 0) + tonumber(redis.call('HGET', count, ARGV[7]) or 0)
  if held >= max then return 2 end
end
if redis.call('HINCRBY', own(self), u, d) <= 0 then redis.call('HDEL', own(self), u) end
local moved = add(u, d)
renew()
return moved
`;

// ARGV[4..] user, count pairs: this instance's whole local state. Makes its hash exactly that and
// moves the sums by the difference; the old hash counts only if still registered (a swept
// instance's sockets were already subtracted). Answers {came online, went offline}.
const REPUBLISH = `${PRELUDE}
local old, new = {}, {}
if registered() then old = counts(self) end
redis.call('DEL', own(self))
for i = 4, #ARGV, 2 do
  new[ARGV[i]], old[ARGV[i]] = tonumber(ARGV[i + 1]), old[ARGV[i]] or 0
  redis.call('HSET', own(self), ARGV[i], ARGV[i + 1])
end
local came, went = {}, {}
for u, before in pairs(old) do
  local moved = add(u, (new[u] or 0) - before)
  if moved == 1 then came[#came + 1] = u elseif moved == -1 then went[#went + 1] = u end
end
redis.call('ZADD', set, now(), self)
renew()
return {came, went}
`;

// ARGV[4] deadAfterMs. Renews this instance's heartbeat, then sweeps the dead: ZREM in the same
// script as the subtraction is what keeps two sweepers from subtracting one instance twice. A
// dead instance without a hash had no sockets, or its hash expired because nobody swept it in
// time (the whole deployment was down): lest its users stay online for ever, the sums are then
// rebuilt from the live instances. Answers {registered 1/0, users who went offline}.
const BEAT = `${PRELUDE}
local function rebuild(went)
  local before = redis.call('HKEYS', count)
  redis.call('DEL', count)
  for _, id in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    for u, n in pairs(counts(id)) do redis.call('HINCRBY', count, u, n) end
  end
  for _, u in ipairs(before) do
    if redis.call('HEXISTS', count, u) == 0 then went[#went + 1] = u end
  end
  redis.call('PEXPIRE', count, ttl)
end
local t, alive = now(), registered()
if alive then redis.call('ZADD', set, t, self); renew() end
local went, lost = {}, false
for _, id in ipairs(redis.call('ZRANGEBYSCORE', set, '-inf', t - tonumber(ARGV[4]))) do
  redis.call('ZREM', set, id)
  if not drop(id, went) then lost = true end
end
if lost then rebuild(went) end
return {alive and 1 or 0, went}
`;

const LEAVE = `${PRELUDE}
local went = {}
if registered() then drop(self, went) else redis.call('DEL', own(self)) end
redis.call('ZREM', set, self)
return went
`;

type Report = (userIds: number[]) => void;
/** The users among fields (the /admin ones are not presence). */
const ids = (raw: string[]) => ascending(raw.filter(isUserField).map(Number));
const nobody: Report = () => {};

function redisPresence(redis: Redis, opts: PresenceOptions): Presence {
  const { heartbeatMs = 5000, deadAfterMs = 20_000, onError = () => {} } = opts;
  if (!(deadAfterMs > 2 * heartbeatMs)) throw new Error('presence: deadAfterMs must be more than twice heartbeatMs');
  // Two heartbeats past deadAfterMs: a live instance sweeps a dead one's hash before it expires.
  const ttl = deadAfterMs + 2 * heartbeatMs;
  const counts = new Map<string, number>();
  let onOffline = nobody;
  let onOnline = nobody;
  // A change that failed may or may not have reached Redis, and after a reconnect ioredis
  // resends unanswered commands, which may then run twice: the next heartbeat republishes.
  let dirty = false;
  const reconnected = () => void (dirty = true);
  let running = false;
  // After stop(), a late change must not register this instance again.
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let beating: Promise<void> | undefined;
  let joining: Promise<void> | undefined;

  // EVAL rather than EVALSHA: ioredis retries a NOSCRIPT EVALSHA behind later commands, and
  // REPUBLISH is only right if this instance's commands run in the order they were sent.
  const run = (lua: string, ...args: (string | number)[]) => redis.eval(lua, 0, opts.keyPrefix, opts.instanceId, ttl, ...args);
  const report = (to: Report, raw: string[]) => {
    const users = ids(raw);
    if (users.length > 0) to(users);
  };

  /**
   * Coming back after being swept while alive (a pause past deadAfterMs, a Redis restart): the
   * sweeper has subtracted this instance's sockets and reported their users offline, and CHANGE
   * and BEAT now find it missing from the set. It then publishes its local counts whole, in one
   * script: its hash becomes exactly those counts and the sums move by the difference, so
   * nothing counts twice. Users it brings back from 0 go to onOnline, except `first`, whose
   * connected() call answers true instead; users online elsewhere all along are reported to
   * no one. When several changes find it missing at once, the first republication reports
   * them all and the others find nothing left. The same repairs a failed change (`dirty`).
   */
  async function republish(first?: string): Promise<boolean> {
    const flat = [...counts].flatMap(([field, n]) => [field, n]);
    const [came, went] = (await run(REPUBLISH, ...flat)) as [string[], string[]];
    const isFirst = first !== undefined && came.includes(first);
    report(onOnline, came.filter((u) => u !== first));
    report(onOffline, went);
    return isFirst;
  }

  async function change(userId: number, slot: SocketSlot, delta: 1 | -1): Promise<boolean | 'full'> {
    const field = fieldOf(userId, slot.admin);
    try {
      const moved = (await run(CHANGE, field, delta, slot.max ?? 0, siblingOf(userId, slot.admin))) as number | null;
      if (moved === 2) {
        // Counted here when it was sent (see below), refused there. A republication sent
        // meanwhile published it: the next heartbeat publishes the counts as they are.
        bump(counts, field, -1);
        dirty = true;
        return 'full';
      }
      if (moved !== null) return moved === delta;
      return !stopped && (await republish(delta === 1 ? field : undefined));
    } catch (err) {
      dirty = true;
      throw err;
    }
  }

  /**
   * Registers this instance before its first change: otherwise concurrent first changes would
   * all find it unregistered, and their users' "first socket" would go to onOnline. A failure
   * is left to the change itself, which meets the same outage; the next change tries again.
   */
  const join = () => (stopped ? Promise.resolve() : (joining ??= republish().then(() => {}, () => void (joining = undefined))));

  async function beat(): Promise<void> {
    const [alive, went] = (await run(BEAT, deadAfterMs)) as [number, string[]];
    report(onOffline, went);
    if (alive === 1 && !dirty) return;
    dirty = false;
    await republish().catch((err: unknown) => {
      dirty = true;
      throw err;
    });
  }

  function schedule(delay: number): void {
    timer = setTimeout(() => {
      beating = beat()
        .catch(onError)
        .finally(() => {
          beating = undefined;
          if (running) schedule(heartbeatMs);
        });
    }, delay);
    // The server keeps the process alive; a forgotten stop() should not.
    timer.unref();
  }

  // A local count changes in the same tick as its command is sent (after join), so that
  // REPUBLISH's snapshot holds exactly the changes sent before it. A user who holds the most
  // sockets on this instance alone is refused here, without Redis (and so during an outage).
  async function connected(userId: number, slot: SocketSlot = {}): Promise<boolean | 'full'> {
    await join();
    if (slot.max !== undefined && held(counts, userId) >= slot.max) return 'full';
    bump(counts, fieldOf(userId, slot.admin), 1);
    return !stopped && change(userId, slot, 1);
  }
  return {
    connected: connected as Presence['connected'],
    async disconnected(userId, slot = {}) {
      await join();
      return bump(counts, fieldOf(userId, slot.admin), -1) >= 0 && !stopped && (await change(userId, slot, -1)) === true;
    },
    online: async () => ids(await redis.hkeys(`${opts.keyPrefix}presence:count`)),
    start(offline, online = nobody) {
      if (running) return;
      [onOffline, onOnline, running, stopped] = [offline, online, true, false];
      redis.on('ready', reconnected);
      schedule(0);
    },
    async stop() {
      [running, stopped] = [false, true];
      redis.off('ready', reconnected);
      clearTimeout(timer);
      await beating;
      report(onOffline, (await run(LEAVE)) as string[]);
    },
  };
}
