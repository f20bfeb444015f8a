import { pino, type Logger } from 'pino';
import type { Config } from './config.js';
import { redactErrorFields, redactLine, redactUrl } from './redact.js';

/** pino's error serializer, less the arguments of any failed Redis command. */
export function serializeError(err: unknown): unknown {
  return redactErrorFields(err, (e) => pino.stdSerializers.err(e));
}

/**
 * The process logger (pino, JSON lines). Secrets are kept out by serializers (URLs redacted, no
 * headers) and, last, by {@link redactLine} on every line.
 */
export function createLogger(
  level: Config['LOG_LEVEL'],
  destination?: pino.DestinationStream,
): Logger {
  return pino(
    {
      level,
      hooks: { streamWrite: redactLine },
      serializers: {
        err: serializeError,
        req: (req: { id?: unknown; method?: string; url?: string }) => ({
          id: req.id,
          method: req.method,
          url: typeof req.url === 'string' ? redactUrl(req.url) : undefined,
        }),
        res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
      },
    },
    destination,
  );
}

/**
 * A warning that may fire many times a second: the first at once, then one per `everyMs` at
 * most, with `repeats` left out.
 */
export function occasionalWarning(
  logger: Logger,
  everyMs = 60_000,
  now: () => number = Date.now,
): (fields: Record<string, unknown>, message: string) => void {
  let last: number | undefined;
  let repeats = 0;
  return (fields, message) => {
    const t = now();
    if (last !== undefined && t - last < everyMs) {
      repeats++;
      return;
    }
    logger.warn(repeats > 0 ? { ...fields, repeats } : fields, message);
    last = t;
    repeats = 0;
  };
}
