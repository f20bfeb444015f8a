import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The repository root (this file is test/support/main-process.ts). */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const STARTED = 'sns-gateway started';

type Exit = { code: number | null; signal: NodeJS.Signals | null };

export type MainProcess = {
  readonly pid: number;
  /** Everything the child wrote to stdout and stderr so far (pino JSON lines). */
  output(): string;
  /** The `sns-gateway started` log line (or the one `until` named), parsed (`workerMetricsPort`, ...). */
  readonly started: Record<string, unknown>;
  /** Resolves with the exit code (null when killed by a signal) once the child has exited. */
  readonly exited: Promise<Exit>;
  /** Sends a signal; resolves once the child has exited. */
  kill(signal: NodeJS.Signals): Promise<Exit>;
};

/**
 * Runs the entry file `main.ts` (through tsx) in a child process, the same program as
 * `npm start` and its `start:*` variants, and resolves once it has logged `sns-gateway started`.
 * Killed when the test process exits without its clean-up.
 *
 * @param env configuration variables (`ROLE`, `REDIS_URL`, `RPC_URL`, `QUEUE_PREFIX`, ...), added
 *   to the test's environment after `WORKER_METRICS_PORT=0` (any free port), `LOG_LEVEL=info` and
 *   `RPC_WS=off` (no websocket unless the test gives one).
 * @param until the log text to wait for instead of `sns-gateway started` (its line is `started`).
 * @throws when the child exits or stays silent for `startTimeoutMs` before it has started.
 */
export async function spawnMain(
  env: Record<string, string>,
  startTimeoutMs = 20_000,
  until = STARTED,
): Promise<MainProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'main.ts'], {
    cwd: ROOT,
    env: { ...process.env, WORKER_METRICS_PORT: '0', LOG_LEVEL: 'info', RPC_WS: 'off', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  child.once('exit', () => process.off('exit', reap));
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<Exit>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  // Whole lines only: the last one may still be arriving.
  const startedLine = () =>
    out
      .split('\n')
      .slice(0, -1)
      .find((line) => line.includes(until));
  const started = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), startTimeoutMs);
    const onData = () => {
      if (startedLine() !== undefined) {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        resolve(true);
      }
    };
    child.stdout.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      resolve(startedLine() !== undefined);
    });
  });
  if (!started) {
    child.kill('SIGKILL');
    await exited;
    throw new Error(`main.ts did not start:\n${out.slice(-3000)}`);
  }
  return {
    pid: child.pid as number,
    output: () => out,
    started: JSON.parse(startedLine() as string) as Record<string, unknown>,
    exited,
    async kill(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** {@link spawnMain} with `ROLE=worker`: the refresh worker alone (`npm run start:worker`). */
export const spawnWorkerProcess = (env: Record<string, string>, startTimeoutMs?: number) =>
  spawnMain({ ...env, ROLE: 'worker' }, startTimeoutMs);

export type WorkerProcess = MainProcess;
