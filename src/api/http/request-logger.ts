import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'pino';

type LogArgs = [unknown, ...unknown[]];

/**
 * A request logger making its pino child on the first line logged: pino serializes bindings at
 * `child()`, a per-request cost (BENCHMARKS.md, "Costs the code's comments refer to") though with
 * the access log off almost no request logs.
 */
class DeferredChildLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get made(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings, this.options));
  }

  get level(): string {
    return this.#child?.level ?? this.options.level ?? this.parent.level;
  }
  set level(level: string) {
    this.made.level = level;
  }

  fatal(...args: LogArgs): void {
    this.made.fatal(...(args as [unknown]));
  }
  error(...args: LogArgs): void {
    this.made.error(...(args as [unknown]));
  }
  warn(...args: LogArgs): void {
    this.made.warn(...(args as [unknown]));
  }
  info(...args: LogArgs): void {
    this.made.info(...(args as [unknown]));
  }
  debug(...args: LogArgs): void {
    this.made.debug(...(args as [unknown]));
  }
  trace(...args: LogArgs): void {
    this.made.trace(...(args as [unknown]));
  }
  silent(...args: LogArgs): void {
    this.made.silent(...(args as [unknown]));
  }
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.made.child(bindings, options);
  }
}

/** Fastify's `childLoggerFactory`: its default child, made on the first line logged. */
export function deferredChildLogger(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new DeferredChildLogger(logger, bindings, options);
}
