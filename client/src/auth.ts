// Sessions that take care of themselves (docs/api.md section 3): 15-minute access tokens refreshed
// before they expire and on 401 TOKEN_EXPIRED, every caller waiting on the same refresh; the
// rotated refresh token handed to a store (memory, localStorage, or the application's own); a
// revoked session signs the client out and says so.
import { Emitter } from './emitter.js';
import { TeamlogError, clientProblem } from './errors.js';
import type { LoginResponse, TokenPair, User } from './types.js';

/** What a store keeps of a session: the refresh token, and the access token with its expiry so that another tab can use it. */
export interface StoredSession {
  refresh_token: string;
  access_token?: string;
  /** Milliseconds since the epoch. */
  expires_at?: number;
}

/** Where the refresh token lives between requests, reloads and tabs. */
export interface TokenStore {
  get(): StoredSession | null | Promise<StoredSession | null>;
  set(session: StoredSession | null): void | Promise<void>;
}

/** Keeps the session in memory: gone with the process (the default). */
export function memoryStore(): TokenStore {
  let session: StoredSession | null = null;
  return { get: () => session, set: (s) => void (session = s) };
}

/** Keeps the session in a browser's localStorage under `key`, shared by the origin's tabs. */
export function localStorageStore(key = 'teamlog.session', storage: Storage = globalThis.localStorage): TokenStore {
  return {
    get() {
      const raw = storage.getItem(key);
      if (!raw) return null;
      try {
        const parsed = JSON.parse(raw) as StoredSession;
        return typeof parsed.refresh_token === 'string' ? parsed : null;
      } catch {
        return null;
      }
    },
    set(session) {
      if (session) storage.setItem(key, JSON.stringify(session));
      else storage.removeItem(key);
    },
  };
}

export type SignOutReason = 'logout' | 'revoked' | 'deactivated' | 'invalid';

export interface AuthEvents {
  /** A login, or a session restored from the store. */
  'signed-in': { user: User | undefined };
  /** A new access token (a login or a refresh): real-time sockets send it as reauth. */
  token: { accessToken: string; expiresAt: number };
  /** The session ended: logged out here, or revoked elsewhere (logout, password change, theft detection), or the user deactivated. */
  'signed-out': { reason: SignOutReason; error?: TeamlogError };
}

export interface AuthOptions {
  store: TokenStore;
  /** Refresh the access token this long before it expires (default: 60 s, or half the life of a shorter-lived token). */
  refreshMarginMs?: number;
  /** Refresh on a timer before expiry (default true); off, tokens are refreshed when a request needs one. */
  autoRefresh?: boolean;
}

/** How auth talks to the service: POST /auth/* with a JSON body (and a token for logout). */
export type AuthCall = <T>(path: string, body: unknown, token?: string) => Promise<T>;

interface Locks {
  request<T>(name: string, fn: () => Promise<T>): Promise<T>;
}

export class Auth extends Emitter<AuthEvents> {
  private access: { token: string; expiresAt: number; lifeMs: number } | undefined;
  private refreshToken: string | undefined;
  private refreshing: Promise<string> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private loaded = false;
  /** Bumped by every sign-in and sign-out, so that a refresh started before one does not undo it. */
  private generation = 0;
  user: User | undefined;

  constructor(
    private readonly call: AuthCall,
    private readonly options: AuthOptions,
  ) {
    super();
  }

  async login(email: string, password: string): Promise<User> {
    const answer = await this.call<LoginResponse>('/auth/login', { email, password });
    this.generation++;
    this.user = answer.user;
    await this.accept(answer);
    this.emit('signed-in', { user: answer.user });
    return answer.user;
  }

  /** Ends the session on the service (its tokens stop working at once) and here. */
  async logout(): Promise<void> {
    const token = this.access && this.access.expiresAt > Date.now() ? this.access.token : await this.accessToken().catch(() => undefined);
    try {
      if (token) await this.call('/auth/logout', undefined, token);
    } catch (err) {
      // Already over on the service: what logging out wanted.
      if (!(err instanceof TeamlogError && err.status === 401)) throw err;
    } finally {
      await this.signOut('logout');
    }
  }

  /** Whether a session is held (or kept in the store). */
  async isSignedIn(): Promise<boolean> {
    await this.load();
    return this.refreshToken !== undefined;
  }

  /** A valid access token: the current one, or a fresh one when it is about to expire. Throws 401 when signed out. */
  async accessToken(): Promise<string> {
    await this.load();
    if (this.access && this.access.expiresAt - this.margin() > Date.now()) return this.access.token;
    return this.refresh();
  }

  /** Trades the refresh token for a new pair, once for all callers asking meanwhile. */
  refresh(): Promise<string> {
    this.refreshing ??= this.locked(() => this.doRefresh()).finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  /** The service said the access token is no longer good: refresh it (TOKEN_EXPIRED) or sign out (revoked, deactivated). */
  async onRefused(error: TeamlogError, tokenUsed: string): Promise<'retry' | 'fail'> {
    if (error.code === 'TOKEN_EXPIRED' || error.code === 'UNAUTHENTICATED') {
      // Another caller may have refreshed already.
      if (this.access && this.access.token !== tokenUsed) return 'retry';
      if (this.refreshToken === undefined) return 'fail';
      await this.refresh();
      return 'retry';
    }
    if (error.code === 'TOKEN_REVOKED') await this.signOut('revoked', error);
    if (error.code === 'ACCOUNT_DEACTIVATED') await this.signOut('deactivated', error);
    return 'fail';
  }

  /** Stops the refresh timer (the session stays in the store). */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private margin(): number {
    if (this.options.refreshMarginMs !== undefined) return this.options.refreshMarginMs;
    // Half the life of a short token: JWT expiries are whole seconds, and a round trip takes time.
    return Math.min(60_000, (this.access?.lifeMs ?? 0) / 2);
  }

  private async load(): Promise<void> {
    if (this.loaded) return;
    this.loaded = true;
    const stored = await this.options.store.get();
    if (stored && this.refreshToken === undefined) this.adopt(stored);
  }

  private adopt(stored: StoredSession): void {
    this.refreshToken = stored.refresh_token;
    if (stored.access_token && stored.expires_at && stored.expires_at > Date.now()) {
      this.access = { token: stored.access_token, expiresAt: stored.expires_at, lifeMs: stored.expires_at - Date.now() };
      this.schedule();
    }
  }

  /** Another tab's refresh shows in a shared store: take its pair rather than spend a token already spent. */
  private async doRefresh(): Promise<string> {
    const generation = this.generation;
    const stored = await this.options.store.get();
    if (stored && stored.refresh_token !== this.refreshToken && stored.access_token && (stored.expires_at ?? 0) - this.margin() > Date.now()) {
      this.adopt(stored);
      this.emit('token', { accessToken: this.access!.token, expiresAt: this.access!.expiresAt });
      return this.access!.token;
    }
    const refreshToken = stored?.refresh_token ?? this.refreshToken;
    if (refreshToken === undefined) throw new TeamlogError(clientProblem(401, 'UNAUTHENTICATED', 'Not signed in: call login() first'));
    let pair: TokenPair;
    try {
      pair = await this.call<TokenPair>('/auth/refresh', { refresh_token: refreshToken });
    } catch (err) {
      if (err instanceof TeamlogError && err.status === 401 && generation === this.generation) {
        await this.signOut(err.code === 'TOKEN_REVOKED' ? 'revoked' : 'invalid', err);
      }
      throw err;
    }
    if (generation !== this.generation) throw new TeamlogError(clientProblem(401, 'UNAUTHENTICATED', 'Signed out while the token was being refreshed'));
    await this.accept(pair);
    return pair.access_token;
  }

  private async accept(pair: TokenPair): Promise<void> {
    const lifeMs = pair.expires_in * 1000;
    const expiresAt = Date.now() + lifeMs;
    this.access = { token: pair.access_token, expiresAt, lifeMs };
    this.refreshToken = pair.refresh_token;
    this.loaded = true;
    await this.options.store.set({ refresh_token: pair.refresh_token, access_token: pair.access_token, expires_at: expiresAt });
    this.schedule();
    this.emit('token', { accessToken: pair.access_token, expiresAt });
  }

  private schedule(): void {
    clearTimeout(this.timer);
    if (this.options.autoRefresh === false || !this.access) return;
    const due = Math.max(0, this.access.expiresAt - this.margin() - Date.now());
    this.timer = setTimeout(() => {
      this.refresh().catch(() => {
        // Signed out (told through signed-out), or the service is away: the next request tries again.
      });
    }, due);
    // In Node, a pending refresh must not keep a finished script alive.
    (this.timer as { unref?: () => void }).unref?.();
  }

  private async signOut(reason: SignOutReason, error?: TeamlogError): Promise<void> {
    const wasSignedIn = this.refreshToken !== undefined || this.access !== undefined;
    this.generation++;
    this.close();
    this.access = undefined;
    this.refreshToken = undefined;
    this.user = undefined;
    this.loaded = true;
    await this.options.store.set(null);
    if (wasSignedIn || reason === 'logout') this.emit('signed-out', { reason, error });
  }

  /** In a browser, one tab at a time refreshes (Web Locks); elsewhere, this client's own single flight is enough. */
  private locked<T>(fn: () => Promise<T>): Promise<T> {
    const locks = (globalThis as { navigator?: { locks?: Locks } }).navigator?.locks;
    return locks ? locks.request('teamlog-refresh', fn) : fn();
  }
}
