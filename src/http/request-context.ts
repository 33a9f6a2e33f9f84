// Turns a Fastify request into the transport-free RequestContext that use cases take, and says
// what a request's completion line in the log carries.
import type { FastifyReply, FastifyRequest } from 'fastify';
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
 * never the URL (it is in the "incoming request" line, with the same reqId), the user's id and
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
