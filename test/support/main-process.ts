import { spawn, type ChildProcess } from 'node:child_process';
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

/** A child running the entry file, with its output gathered as it comes. */
type Launched = {
  child: ChildProcess;
  output: () => string;
  exited: Promise<Exit>;
};

/**
 * Spawns `node [nodeArgs] --import tsx main.ts`, the program of `npm start`, gathering stdout and
 * stderr into one text; SIGKILLed when the test process exits first.
 */
function launch(env: Record<string, string>, nodeArgs: readonly string[]): Launched {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      WORKER_METRICS_PORT: '0',
      API_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
      RPC_WS: 'off',
      // The per-parent path, as testConfig (./gateway.ts) pins it: a test that follows the chain
      // counts that path's calls; the registry index's tests set `registry`, the default.
      SUBDOMAIN_INDEX: 'parents',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<Exit>((resolve) =>
    child.once('exit', (code, signal) => {
      process.off('exit', reap);
      resolve({ code, signal });
    }),
  );
  return { child, output: () => out, exited };
}

/**
 * Runs the entry file `main.ts` (through tsx) in a child process, the same program as
 * `npm start` and its `start:*` variants, and resolves once it has logged `sns-gateway started`.
 * Killed when the test process exits without its clean-up.
 *
 * @param env configuration variables (`ROLE`, `REDIS_URL`, `RPC_URL`, `QUEUE_PREFIX`, ...), added
 *   to the test's environment after `WORKER_METRICS_PORT=0` (any free port), `LOG_LEVEL=info`,
 *   `RPC_WS=off` (no websocket unless the test gives one) and `SUBDOMAIN_INDEX=parents`.
 * @param until the log text to wait for instead of `sns-gateway started` (its line is `started`).
 * @throws when the child exits or stays silent for `startTimeoutMs` before it has started.
 */
export async function spawnMain(
  env: Record<string, string>,
  startTimeoutMs = 20_000,
  until = STARTED,
): Promise<MainProcess> {
  const { child, output, exited } = launch(env, []);
  // Whole lines only: the last one may still be arriving.
  const startedLine = () =>
    output()
      .split('\n')
      .slice(0, -1)
      .find((line) => line.includes(until));
  const started = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), startTimeoutMs);
    const onData = () => {
      if (startedLine() !== undefined) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        resolve(true);
      }
    };
    child.stdout?.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      resolve(startedLine() !== undefined);
    });
  });
  if (!started) {
    child.kill('SIGKILL');
    await exited;
    throw new Error(`main.ts did not start:\n${output().slice(-3000)}`);
  }
  return {
    pid: child.pid as number,
    output,
    started: JSON.parse(startedLine() as string) as Record<string, unknown>,
    exited,
    async kill(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/**
 * Runs the entry file to its exit (a start that fails), as {@link spawnMain} starts it, bounded:
 * SIGKILLed after `timeoutMs`.
 *
 * @param opts.nodeArgs flags for node before the entry file (`--import` of a test module).
 * @returns its exit code (null when killed) and everything it wrote.
 */
export async function runMain(
  env: Record<string, string>,
  opts: { timeoutMs?: number; nodeArgs?: readonly string[] } = {},
): Promise<{ code: number | null; output: string }> {
  const { child, output, exited } = launch(env, opts.nodeArgs ?? []);
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
  const { code } = await exited;
  clearTimeout(timer);
  return { code, output: output() };
}

/** {@link spawnMain} with `ROLE=worker`: the refresh worker alone (`npm run start:worker`). */
export const spawnWorkerProcess = (env: Record<string, string>, startTimeoutMs?: number) =>
  spawnMain({ ...env, ROLE: 'worker' }, startTimeoutMs);

export type WorkerProcess = MainProcess;
