import { pino, type Logger } from 'pino';
import type { Config } from './config.js';
import { redactUrl } from './redact.js';

/**
 * The process logger (pino, JSON lines). Request URLs are logged with `?rpc=` redacted, and
 * nothing that could hold a credential (headers, override URLs) is serialized.
 */
export function createLogger(
  level: Config['LOG_LEVEL'],
  destination?: pino.DestinationStream,
): Logger {
  return pino(
    {
      level,
      serializers: {
        err: pino.stdSerializers.err,
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
