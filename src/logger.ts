import { pino } from 'pino';
import { completedRequest } from './http/request-context.js';

/**
 * Secrets never reach the log: credentials in headers and bodies are censored wherever they
 * appear. A request's completion line says route, status, user and problem code
 * (completedRequest); Fastify takes this logger's serializers over its own.
 */
export function createLogger(level: string) {
  return pino({
    level,
    serializers: { res: completedRequest },
    redact: {
      paths: [
        'req.headers.authorization', 'req.headers.cookie', 'headers.authorization',
        '*.password', '*.current_password', '*.new_password', '*.refresh_token', '*.access_token', '*.token',
      ],
      censor: '[redacted]',
    },
  });
}
