// Who is calling and from where: everything an audit record needs about the request, and
// nothing HTTP-specific, so that a route, a socket event and the CLI build the same thing.

export type UserRole = 'USER' | 'ADMIN';

export interface Actor {
  id: number;
  role: UserRole;
  email: string;
  name: string;
  sessionId: number;
}

export interface RequestContext {
  actor: Actor | undefined;
  /** The client's address: a forwarded one only when the peer is in TRUST_PROXY; null for the CLI. */
  ip: string | null;
  userAgent: string | null;
  requestId: string;
}

/** The context of an authenticated request: every use case an authenticated caller runs takes this. */
export type ActorContext = RequestContext & { actor: Actor };

/** The context of an action nobody in particular took: first start, the CLI. */
export const systemContext = (requestId: string): RequestContext => ({ actor: undefined, ip: null, userAgent: null, requestId });
