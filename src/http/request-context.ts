// Turns a Fastify request into the transport-free RequestContext that use cases take.
import type { FastifyRequest } from 'fastify';
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
