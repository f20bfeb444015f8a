import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { deferredChildLogger } from '../src/api/http/request-logger.js';
import { createLogger } from '../src/core/logger.js';

/**
 * A Fastify app logging JSON lines into `lines`, with the deferred request loggers;
 * `children()` counts the pino children made since it was ready.
 */
async function appWithLog(level: 'info' | 'warn' = 'info') {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) {
        if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  const logger = createLogger(level, sink);
  let children = 0;
  const child = logger.child.bind(logger);
  logger.child = ((...args: Parameters<typeof child>) => {
    children++;
    return child(...args);
  }) as typeof logger.child;
  const app = Fastify({
    loggerInstance: logger,
    disableRequestLogging: true,
    childLoggerFactory: deferredChildLogger,
  });
  app.get('/quiet', async () => 'ok');
  app.get('/talks', async (req) => {
    req.log.info({ n: 1 }, 'first');
    req.log.warn('second');
    return 'ok';
  });
  app.get('/level', async (req) => req.log.level);
  await app.ready();
  const made = children;
  return { app, lines, children: () => children - made };
}

describe('deferred request loggers', () => {
  it('make no pino child for a request that logs nothing', async () => {
    const { app, lines, children } = await appWithLog();
    for (let i = 0; i < 5; i++) expect((await app.inject('/quiet')).statusCode).toBe(200);
    expect(children()).toBe(0);
    expect(lines).toEqual([]);
    await app.close();
  });

  it("log a request's lines with its reqId, through one child", async () => {
    const { app, lines, children } = await appWithLog();
    await app.inject('/talks');
    await app.inject('/talks');
    expect(children()).toBe(2);
    expect(lines.map((l) => [l.reqId, l.msg, l.level])).toEqual([
      ['req-1', 'first', 30],
      ['req-1', 'second', 40],
      ['req-2', 'first', 30],
      ['req-2', 'second', 40],
    ]);
    expect(lines[0]?.n).toBe(1);
    await app.close();
  });

  it("keep the parent's level, and drop lines below it", async () => {
    const { app, lines } = await appWithLog('warn');
    expect((await app.inject('/level')).body).toBe('warn');
    await app.inject('/talks');
    expect(lines.map((l) => l.msg)).toEqual(['second']);
    await app.close();
  });
});
