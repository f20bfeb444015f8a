import { pino, type Logger } from 'pino';
import type { Config } from './config.js';
import { redactErrorFields, redactLine, redactUrl } from './redact.js';

/**
 * Errors as pino serializes them, less the arguments of any failed Redis command in them (an
 * `AUTH`'s password, a job's data; see {@link redactErrorFields}); an `err` field that is not an
 * Error is walked the same way.
 */
export function serializeError(err: unknown): unknown {
  return redactErrorFields(err, (e) => pino.stdSerializers.err(e));
}

/**
 * The process logger (pino, JSON lines). No secret reaches a line: request URLs are logged with
 * `?rpc=` redacted, nothing that could hold a credential (headers, override URLs) is serialized,
 * errors lose the arguments of the Redis command they carry, and every line, whatever wrote it,
 * is cleared of URL credentials and `?rpc=` values last (src/core/redact.ts).
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
 * A warning that may come many times a second (a provider's bad frames, a flood): the first is
 * logged at once, then at most one per `everyMs` milliseconds, carrying `repeats`, how many were
 * left out since the last line.
 *
 * @returns the function to call instead of `logger.warn(fields, message)`.
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
