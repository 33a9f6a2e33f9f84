// Turns a Fastify request into the transport-free RequestContext that use cases take, and says
// what a request's completion line in the log carries.
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { Actor, ActorContext, RequestContext } from '../context.js';
import { unauthenticated } from '../domain/errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    actor: Actor | undefined;
  }
  interface FastifyContextConfig {
    /** An /api route that needs no access token (login, refresh, the OpenAPI document). */
    public?: boolean;
  }
}

export function contextOf(request: FastifyRequest): RequestContext {
  const ua = request.headers['user-agent'];
  return { actor: request.actor, ip: request.ip ?? null, userAgent: typeof ua === 'string' ? ua : null, requestId: request.id };
}

/** For routes that require authentication: the context with its actor. */
export function authedContext(request: FastifyRequest): ActorContext {
  const ctx = contextOf(request);
  if (!ctx.actor) throw unauthenticated('UNAUTHENTICATED', 'Authentication is required');
  return ctx as ActorContext;
}

/** The code of each problem answer (error-handler.ts notes it), for the request's completion line. */
const problemCodes = new WeakMap<FastifyReply, string>();

export function noteProblem(reply: FastifyReply, code: string): void {
  problemCodes.set(reply, code);
}

/**
 * The `res` of a request's completion line ("request completed", which Fastify writes with the
 * reply; the logger's serializer, logger.ts): what an operator filters on. The route pattern,
 * never the URL (the same line's `req` has it: RequestLog), the user's id and
 * nothing else of the session, and the problem's code when the answer was one. Anything else
 * logged as `res` keeps only its status code.
 */
export function completedRequest(res: unknown): Record<string, unknown> {
  const reply = res as Partial<FastifyReply> | undefined;
  const request = reply?.request;
  if (!reply || !request) return { statusCode: (res as { statusCode?: unknown } | undefined)?.statusCode };
  const code = problemCodes.get(reply as FastifyReply);
  return {
    statusCode: reply.statusCode,
    method: request.method,
    route: request.routeOptions?.url ?? 'unmatched',
    ...(request.actor ? { userId: request.actor.id } : {}),
    ...(code !== undefined ? { code } : {}),
  };
}

/**
 * One log line a request, at `info`: "request completed", with the request (`req`: method, URL,
 * host, address, as the "incoming request" line had them) beside the answer (`res`,
 * completedRequest). The "incoming request" line is written at `debug` only: at the default
 * level a second line a request is CPU that a small request cannot spare (docs/performance.md,
 * "What the profiles showed"). `lines` (logger.ts, requestLinesOf) writes the line without
 * redaction: it holds only what is built here. A request that errored is logged by Fastify's own
 * controller.
 */
/** Query parameters whose values are credentials: a token sent in a URL (refused, but logged). */
const CREDENTIAL_IN_URL = /[?&](?:access_?token|refresh_?token|id_?token|token|password|secret|api_?key|jwt|authorization)=|eyJ/i;
const CREDENTIAL_PARAM = /^(?:access_?token|refresh_?token|id_?token|token|password|secret|api_?key|jwt|authorization)$/i;

/**
 * A URL as the log shows it: the value of a credential-named query parameter, and anything
 * shaped like a JWT, replaced by "[redacted]". A client that puts its token in the query string
 * is refused, and its token must not outlive the refusal in the log. Most URLs hold neither, and
 * are returned as they are after one test.
 */
export function loggedUrl(url: string): string {
  if (!CREDENTIAL_IN_URL.test(url)) return url;
  const masked = url.replace(/eyJ[\w-]+\.[\w-]+\.[\w-]*/g, '[redacted]');
  const q = masked.indexOf('?');
  if (q < 0) return masked;
  const params = masked.slice(q + 1).split('&').map((p) => {
    const eq = p.indexOf('=');
    return eq > 0 && CREDENTIAL_PARAM.test(p.slice(0, eq)) ? `${p.slice(0, eq)}=[redacted]` : p;
  });
  return `${masked.slice(0, q + 1)}${params.join('&')}`;
}

/** The request as a log line shows it (the fields of Fastify's own `req` serializer, the URL masked). */
export function loggedRequest(request: { method: string; url: string; host?: string; ip?: string; socket?: { remotePort?: number } }) {
  return { method: request.method, url: loggedUrl(request.url), host: request.host, remoteAddress: request.ip, remotePort: request.socket?.remotePort };
}

export class RequestLog extends LogController {
  constructor(private readonly lines?: Logger) {
    super();
  }

  override incomingRequest(request: FastifyRequest): void {
    if (!this.isLogDisabled(request)) request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error || this.isLogDisabled(request)) return super.requestCompleted(error, request, reply);
    if (!this.lines) return reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
    if (!this.lines.isLevelEnabled('info')) return;
    this.lines.info({ [this.requestIdLogLabel]: request.id, req: loggedRequest(request), res: completedRequest(reply), responseTime: reply.elapsedTime }, 'request completed');
  }
}
