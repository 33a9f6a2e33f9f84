// A test file's own server (or bare database), set up once for the whole file: called at the
// top level, each helper registers the node:test hooks that start it before the first test
// and close it after the last, and answers an object whose getters are valid inside tests and
// inside the file's own set-up hooks (h.before). Read too early (at the top level, or from a
// plain before hook that Node runs beside the harness's), they throw rather than hand out
// undefined.
import { after, before } from 'node:test';
import { createUser, loginAdmin, type Session } from './client.js';
import { createTestDatabase, startTestServer, type StartOptions, type TestDatabase, type TestServer } from './server.js';

export type NewUserOptions = Parameters<typeof createUser>[2];

export interface TestHarness {
  readonly server: TestServer;
  /** The first ADMIN, logged in once for the file. */
  readonly admin: Session;
  /** A new user (a USER unless opts.role says otherwise), created by the first ADMIN and logged in. */
  newUser(opts?: NewUserOptions): Promise<Session>;
  /** Logs the first ADMIN in again, for files whose requests may end the ADMIN's session. */
  reloginAdmin(): Promise<Session>;
  /** The file's own set-up: a before hook that runs once the server is up (see onceStarted). */
  before(fn: () => Promise<void>): void;
}

export interface TestDatabaseHandle {
  readonly database: TestDatabase;
  /** The file's own set-up: a before hook that runs once the database is there (see onceStarted). */
  before(fn: () => Promise<void>): void;
}

function notReady(what: string, helper: string): never {
  throw new Error(
    `${what} is not set up yet: ${helper}() starts it in a before hook, so read it inside a test, or in a hook registered with h.before()`,
  );
}

/**
 * Runs `start` once, for whichever hook asks first. Node's test runner may start a file's
 * top-level before hooks side by side instead of one after another (Node 20 does, once the
 * file's root test is running), so set-up that needs the server must wait for it explicitly.
 */
function onceStarted(start: () => Promise<void>) {
  let started: Promise<void> | undefined;
  const ready = () => (started ??= start());
  before(ready);
  return (fn: () => Promise<void>) =>
    before(async () => {
      await ready();
      await fn();
    });
}

/** Starts a server (with `opts`) before the file's tests, logs in the first ADMIN, and closes it after them. */
export function useTestServer(opts: StartOptions = {}): TestHarness {
  let server: TestServer | undefined;
  let admin: Session | undefined;
  const beforeOwn = onceStarted(async () => {
    server = await startTestServer(opts);
    admin = await loginAdmin(server);
  });
  after(() => server?.close());

  const harness: TestHarness = {
    get server() {
      return server ?? notReady('h.server', 'useTestServer');
    },
    get admin() {
      return admin ?? notReady('h.admin', 'useTestServer');
    },
    newUser: (userOpts) => createUser(harness.server, harness.admin, userOpts),
    reloginAdmin: async () => (admin = await loginAdmin(harness.server)),
    before: beforeOwn,
  };
  return harness;
}

/** Creates a fresh, migrated database before the file's tests and drops it after them. */
export function useTestDatabase(): TestDatabaseHandle {
  let database: TestDatabase | undefined;
  const beforeOwn = onceStarted(async () => {
    database = await createTestDatabase();
  });
  after(() => database?.drop());
  return {
    get database() {
      return database ?? notReady('h.database', 'useTestDatabase');
    },
    before: beforeOwn,
  };
}
