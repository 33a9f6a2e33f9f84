import { pino, type DestinationStream, type Logger } from 'pino';
import { completedRequest, loggedRequest } from './http/request-context.js';

/** The logger of each request's completion line, by the logger createLogger made (RequestLog). */
const requestLines = new WeakMap<object, Logger>();

/**
 * Secrets never reach the log: credentials in headers and bodies are censored wherever they
 * appear, a token sent in a URL's query included. A request's completion line says route, status, user and problem code
 * (completedRequest); Fastify takes this logger's serializers over its own.
 */
export function createLogger(level: string) {
  const logger = pino({
    level,
    // `req`: the request line with a credential in its URL masked (request-context.ts, loggedUrl).
    serializers: { req: loggedRequest, res: completedRequest },
    redact: {
      paths: [
        'req.headers.authorization', 'req.headers.cookie', 'headers.authorization',
        '*.password', '*.current_password', '*.new_password', '*.refresh_token', '*.access_token', '*.token',
      ],
      censor: '[redacted]',
    },
  });
  // The completion line a request writes (http/request-context.ts, RequestLog) holds only fields
  // built from the request line and the answer, never a header or a body: it is written without
  // the redaction above, a pass over every line that cost a few per cent of a small request's CPU
  // to find nothing (docs/performance.md, "What the profiles showed"). Same level, same
  // destination: the lines stay in order.
  const destination = (logger as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym]!;
  requestLines.set(logger, pino({ level }, destination));
  return logger;
}

/** The completion lines' logger of a logger createLogger made; undefined for any other. */
export const requestLinesOf = (log: object): Logger | undefined => requestLines.get(log);
