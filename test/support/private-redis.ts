import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';
import { findBinary } from './programs.js';
import { redisAnswers, withTestDatabase } from './shared-redis.js';
import { waitFor } from './wait.js';

export type PrivateRedis = {
  readonly port: number;
  readonly url: string;
  /** The data directory (append-only file), kept across `stop()` and `start()`. */
  readonly dir: string;
  /** True between a `start()` and the next `stop()`. */
  readonly running: boolean;
  /** Starts the server on the same port and directory; resolves once it answers PING. */
  start(): Promise<void>;
  /** SIGKILL: no shutdown, no final save; resolves once the process has exited. */
  stop(): Promise<void>;
  /**
   * SIGSTOP: the server stalls with its connections open (no reset, nothing answered), as a
   * Redis stuck in a long command, a swap storm or a network partition looks to its clients.
   */
  pause(): void;
  /** SIGCONT after `pause()`: the server answers again, queued commands included. */
  resume(): void;
  /** Stops the server (if running) and deletes its directory. */
  destroy(): Promise<void>;
};

/**
 * A private `redis-server` for fault tests, on a free loopback port with its own temporary
 * directory. It is never the shared Redis: tests may kill and restart this one at will.
 * Persistence is the append-only file only (`--appendonly yes`, fsync on every write, no RDB
 * snapshots), so a restart after SIGKILL finds every write acknowledged before the kill.
 *
 * @param bin the server binary (`REDIS_SERVER_BIN`, else `redis-server` on the PATH).
 * @param extraArgs more `redis-server` options, after the defaults (a later option wins:
 *   `['--bind', '127.0.0.1 192.0.2.2', '--protected-mode', 'yes']`). The server must still answer
 *   PING on 127.0.0.1, which is how the start is awaited.
 */
export async function startPrivateRedis(
  bin = process.env.REDIS_SERVER_BIN ?? findBinary('redis-server') ?? 'redis-server',
  extraArgs: readonly string[] = [],
): Promise<PrivateRedis> {
  const dir = await mkdtemp(join(tmpdir(), 'sns-gateway-redis-'));
  const port = await freePort();
  // The suite's database, as on the shared Redis: gateways under fault tests use it too.
  const url = withTestDatabase(`redis://127.0.0.1:${port}`);
  let child: ChildProcess | undefined;
  let output = '';

  const start = async () => {
    if (child) throw new Error('this redis-server is already running');
    output = '';
    const proc = spawn(
      bin,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'yes',
        '--appendfsync',
        'always',
        '--protected-mode',
        'no',
        ...extraArgs,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child = proc;
    // Killed when the test process exits without destroy() (not when it is itself killed).
    const reap = () => proc.kill('SIGKILL');
    process.once('exit', reap);
    proc.once('exit', () => process.off('exit', reap));
    proc.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    proc.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<never>((_, reject) => {
      proc.once('error', reject);
      proc.once('exit', (code) =>
        reject(new Error(`redis-server exited (${code}) on start:\n${output.slice(-2000)}`)),
      );
    });
    let gone = false;
    exited.catch(() => (gone = true));
    // Until it answers or exits (then `exited` says why, with its output).
    const answers = waitFor(
      async () => gone || (await redisAnswers(url)),
      10_000,
      `redis-server answering on ${url}`,
      50,
    );
    try {
      await Promise.race([answers, exited]);
    } catch (err) {
      if (gone) throw err;
      await stop();
      throw new Error(`redis-server did not answer on ${url}:\n${output.slice(-2000)}`);
    }
  };

  const stop = async () => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGKILL');
    await exited;
  };

  const signal = (sig: NodeJS.Signals) => {
    if (!child) throw new Error('this redis-server is not running');
    child.kill(sig);
  };

  await start();
  return {
    port,
    url,
    dir,
    get running() {
      return child !== undefined;
    },
    start,
    stop,
    pause: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT'),
    async destroy() {
      if (child) signal('SIGCONT');
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
