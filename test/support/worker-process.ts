import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The repository root (this file is test/support/worker-process.ts). */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export type WorkerProcess = {
  readonly pid: number;
  /** Everything the child wrote to stdout and stderr so far (pino JSON lines). */
  output(): string;
  /** Resolves with the exit code (null when killed by a signal) once the child has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends a signal; resolves once the child has exited. */
  kill(signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

/**
 * Runs the refresh worker in a child process: the entry file `src/main.ts` with `ROLE=worker`
 * (through tsx), so the child is the same program as `npm run start:worker`. Resolves once it has
 * logged `sns-gateway started`.
 *
 * @param env configuration variables (`REDIS_URL`, `RPC_URL`, `QUEUE_PREFIX`, ...), added to the
 *   test's environment; `WORKER_METRICS_PORT` defaults to 0 (any free port).
 * @throws when the child exits or stays silent for `startTimeoutMs` before it has started.
 */
export async function spawnWorkerProcess(
  env: Record<string, string>,
  startTimeoutMs = 20_000,
): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, WORKER_METRICS_PORT: '0', LOG_LEVEL: 'info', ...env, ROLE: 'worker' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Killed when the test process exits without its clean-up (not when it is itself killed).
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  child.once('exit', () => process.off('exit', reap));
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const started = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), startTimeoutMs);
    const onData = () => {
      if (out.includes('sns-gateway started')) {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        resolve(true);
      }
    };
    child.stdout.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      resolve(out.includes('sns-gateway started'));
    });
  });
  if (!started) {
    child.kill('SIGKILL');
    await exited;
    throw new Error(`the worker process did not start:\n${out.slice(-3000)}`);
  }
  return {
    pid: child.pid as number,
    output: () => out,
    exited,
    async kill(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
