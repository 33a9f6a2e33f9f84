// Each request's logger (Fastify's request.log and reply.log), made only when the request writes
// a line its level lets through. Fastify makes a child of the service's logger for every request,
// its request id bound; pino runs the service's redaction over those bindings as it makes one.
// At the usual levels (info for the completion lines, which are written apart: logger.ts; warn
// in production and in the benchmarks) almost no request writes through its own logger, and the
// child was a per cent of a small request's CPU, and garbage (docs/performance.md).
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Level, Logger } from 'pino';

type Line = (...args: unknown[]) => void;

/** Stands for `parent.child(bindings)` until a line is written or its level read or changed. */
class RequestLogger {
  private made?: Logger;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
  ) {}

  private logger(): Logger {
    return (this.made ??= this.parent.child(this.bindings));
  }

  /** The logger that answers for the level until the child is made: the child has the parent's. */
  private get answering(): Logger {
    return this.made ?? this.parent;
  }

  private write(level: Level, args: unknown[]): void {
    if (this.isLevelEnabled(level)) (this.logger()[level] as Line)(...args);
  }

  get level(): string {
    return this.answering.level;
  }

  set level(level: string) {
    this.logger().level = level;
  }

  isLevelEnabled(level: string): boolean {
    return this.answering.isLevelEnabled(level);
  }

  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): Logger {
    return this.logger().child(bindings, options);
  }
}

/**
 * Fastify's childLoggerFactory: a request's logger made on first use. A route with options of
 * its own for its requests' loggers (a log level) gets the child at once, as Fastify makes it.
 */
export function requestLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  if (Object.keys(options).length > 0) return logger.child(bindings, options);
  // The service's logger is pino's (logger.ts), which the type Fastify gives it does not say.
  return new RequestLogger(logger as Logger, bindings) as unknown as FastifyBaseLogger;
}
