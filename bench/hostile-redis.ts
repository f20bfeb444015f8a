/**
 * Scenarios `noinfo` and `password` of `npm run bench:hostile`: the entry file started against a
 * Redis that will not serve it as it expects.
 *
 * - `noinfo`: a Redis user whose ACL is `+@all -@dangerous` (no INFO, which ioredis's ready check
 *   and BullMQ send): time from start to a clear exit or to serving a cold miss, CPU while it runs,
 *   time from SIGTERM to exit. The ACL user is made for the run and deleted after it.
 * - `password`: a wrong password in `REDIS_URL`: how many lines of the child's stdout and stderr
 *   carry the password or the URL's credentials (they must carry none).
 *
 * The child is watched directly rather than through spawnMain: it may never log that it started,
 * and what it does then (spin, exit, hang on SIGTERM) is the measurement.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { freePort } from '../test/support/ports.js';
import { seedDemoChain, SimChain, startRpcSimulator } from '../tools/rpc-sim/index.js';
import {
  cpuMs,
  duration,
  get,
  type HostileContext,
  runLine,
  scenario,
  sleep,
} from './hostile-common.js';
import { benchPrefix, deleteKeysAt, table, writeSection } from './lib.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
/** How long the child is watched for an exit or a served request. */
const OBSERVE_MS = 20_000;
/** CPU is measured over this long once the outcome is known (if the child still runs). */
const CPU_WINDOW_MS = 5_000;
/** How long a SIGTERM may take before the child is killed. */
const TERM_BOUND_MS = 15_000;

type Exit = { code: number | null; signal: NodeJS.Signals | null };

/** The entry file in a child process whose output is kept; killed if this process exits. */
function startChild(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'main.ts'], {
    cwd: ROOT,
    env: { ...process.env, WORKER_METRICS_PORT: '0', LOG_LEVEL: 'info', RPC_WS: 'off', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  let exit: Exit | undefined;
  const exited = new Promise<Exit>((resolve) =>
    child.once('exit', (code, signal) => {
      process.off('exit', reap);
      exit = { code, signal };
      resolve(exit);
    }),
  );
  return {
    pid: child.pid as number,
    output: () => out,
    exit: () => exit,
    exited,
    /** Sends SIGTERM; the time until exit, or undefined when it had to be killed after the bound. */
    async terminate(): Promise<{ ms: number | undefined; exit: Exit }> {
      if (exit) return { ms: 0, exit };
      const started = performance.now();
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), TERM_BOUND_MS);
      const result = await exited;
      clearTimeout(timer);
      const ms = performance.now() - started;
      return { ms: ms < TERM_BOUND_MS ? ms : undefined, exit: result };
    },
  };
}

const exitText = (e: Exit) => (e.signal ? `killed by ${e.signal}` : `exit code ${e.code}`);

async function noInfo(ctx: HostileContext): Promise<void> {
  const { log } = ctx;
  const prefix = benchPrefix();
  const user = `${prefix}-noinfo`;
  const password = randomBytes(12).toString('hex');
  const admin = new Redis(ctx.redisUrl, { maxRetriesPerRequest: 1 });
  const chain = new SimChain();
  seedDemoChain(chain);
  const sim = await startRpcSimulator({ chain });
  let child: ReturnType<typeof startChild> | undefined;
  try {
    // Its own keys and channels only: the rest of the shared Redis stays out of its reach.
    await admin.call('ACL', 'SETUSER', user, 'on', `>${password}`, `~${prefix}:*`, `&${prefix}:*`);
    await admin.call('ACL', 'SETUSER', user, '+@all', '-@dangerous');
    const url = new URL(ctx.redisUrl);
    url.username = user;
    url.password = password;
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const started = performance.now();
    child = startChild({
      ROLE: 'all',
      PORT: String(port),
      HOST: '127.0.0.1',
      REDIS_URL: url.href,
      QUEUE_PREFIX: prefix,
      RPC_URL: sim.url,
    });
    // Until it exits or serves a cold miss (its worker works), polled every 250 ms.
    let outcome = `neither an exit nor a served cold miss within ${duration(OBSERVE_MS)}`;
    let outcomeMs: number | undefined;
    while (performance.now() - started < OBSERVE_MS) {
      const exit = child.exit();
      if (exit) {
        outcomeMs = performance.now() - started;
        outcome = `${exitText(exit)} after ${duration(outcomeMs)}`;
        break;
      }
      const ready = await get(`${base}/readyz`, '127.0.0.1', 1_000);
      if (ready.status === 200) {
        const miss = await get(`${base}/subdomains/67679`, '127.0.0.1', 5_000);
        if (miss.status === 200) {
          outcomeMs = performance.now() - started;
          outcome = `served a cold miss after ${duration(outcomeMs)}`;
          break;
        }
      }
      await sleep(250);
    }
    // CPU over a few seconds from here, while it still runs: a process that retries in a tight
    // loop shows here.
    let cpuText = 'not running';
    if (!child.exit()) {
      const before = cpuMs(child.pid);
      await sleep(CPU_WINDOW_MS);
      const used = cpuMs(child.pid) - before;
      cpuText = child.exit() ? 'exited meanwhile' : `${((100 * used) / CPU_WINDOW_MS).toFixed(0)}%`;
    }
    const term = await child.terminate();
    const termText =
      term.ms === undefined
        ? `still running ${duration(TERM_BOUND_MS)} after SIGTERM, then killed`
        : `${exitText(term.exit)} ${duration(term.ms)} after SIGTERM`;
    const lines = child
      .output()
      .split('\n')
      .filter((l) => l.trim() !== '');
    const noPerm = lines.filter((l) => l.includes('NOPERM')).length;
    const secret = lines.filter((l) => l.includes(password)).length;
    const elapsed = performance.now() - started;
    log(
      `noinfo: ${outcome}; CPU ${cpuText}; ${termText}; ${lines.length} log lines, ${noPerm} NOPERM`,
    );
    await writeSection(
      'hostile-noinfo',
      [
        runLine(
          `one process (\`ROLE=all\`, \`RPC_WS=off\`, the simulator as \`RPC_URL\`, other settings ` +
            `default) whose \`REDIS_URL\` names a user made for the run with ` +
            `\`+@all -@dangerous\` on its own keys and channels (no INFO)`,
        ),
        '',
        table(
          ['measure', 'figure'],
          [
            [
              `start to a clear exit, or to serving a cold miss (watched ${duration(OBSERVE_MS)})`,
              outcome,
            ],
            [`CPU of one core over the next ${duration(CPU_WINDOW_MS)}`, cpuText],
            [`SIGTERM to exit (killed after ${duration(TERM_BOUND_MS)})`, termText],
            [
              `log lines in all (${duration(elapsed)}) / naming NOPERM / carrying the password`,
              `${lines.length} / ${noPerm} / ${secret}`,
            ],
          ],
        ),
      ].join('\n'),
    );
  } finally {
    if (child && !child.exit()) await child.terminate();
    await admin.call('ACL', 'DELUSER', user).catch(() => undefined);
    admin.disconnect();
    await sim.close();
    await deleteKeysAt(ctx.redisUrl, prefix);
  }
}

/** How long the child with a wrong password is watched after it started, before its SIGTERM. */
const WRONG_PASSWORD_MS = 6_000;
/** The longest it is watched in all (start-up included). */
const WRONG_PASSWORD_BOUND_MS = 30_000;

async function wrongPassword(ctx: HostileContext): Promise<void> {
  const { log } = ctx;
  const prefix = benchPrefix();
  // A user that does not exist and a password nobody has: AUTH fails (WRONGPASS).
  const user = `${prefix}-nobody`;
  const password = `wrong${randomBytes(12).toString('hex')}`;
  const url = new URL(ctx.redisUrl);
  url.username = user;
  url.password = password;
  const chain = new SimChain();
  seedDemoChain(chain);
  const sim = await startRpcSimulator({ chain });
  let child: ReturnType<typeof startChild> | undefined;
  try {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const started = performance.now();
    child = startChild({
      ROLE: 'all',
      PORT: String(port),
      HOST: '127.0.0.1',
      REDIS_URL: url.href,
      QUEUE_PREFIX: prefix,
      RPC_URL: sim.url,
    });
    // Requests while it runs, so the request paths' errors are logged too.
    let startedAt: number | undefined;
    while (performance.now() - started < WRONG_PASSWORD_BOUND_MS && !child.exit()) {
      if (startedAt === undefined && child.output().includes('sns-gateway started')) {
        startedAt = performance.now();
      }
      if (startedAt !== undefined && performance.now() - startedAt > WRONG_PASSWORD_MS) break;
      await Promise.all([
        get(`${base}/readyz`, '127.0.0.1', 2_000),
        get(`${base}/subdomains/67679`, '127.0.0.1', 2_000),
      ]);
      await sleep(500);
    }
    const term = await child.terminate();
    const termText =
      term.ms === undefined
        ? `still running ${duration(TERM_BOUND_MS)} after SIGTERM, then killed`
        : `${exitText(term.exit)} ${duration(term.ms)} after SIGTERM`;
    const lines = child
      .output()
      .split('\n')
      .filter((l) => l.trim() !== '');
    const withPassword = lines.filter((l) => l.includes(password)).length;
    const withUserinfo = lines.filter((l) => l.includes(`${user}:${password}`)).length;
    const withUser = lines.filter((l) => l.includes(user)).length;
    log(
      `password: ${lines.length} log lines, ${withPassword} with the password, ${withUserinfo} with ` +
        `user:password, ${withUser} with the user name; ${termText}`,
    );
    await writeSection(
      'hostile-password',
      [
        runLine(
          `one process (\`ROLE=all\`, the simulator as \`RPC_URL\`, other settings default) whose \`REDIS_URL\` ` +
            `carries a user name and a password Redis refuses; \`/readyz\` and a cold miss asked every ` +
            `half second until ${duration(WRONG_PASSWORD_MS)} after it logged its start (at most ` +
            `${duration(WRONG_PASSWORD_BOUND_MS)}), then SIGTERM`,
        ),
        '',
        table(
          ['log lines (stdout and stderr)', 'count'],
          [
            ['in all', lines.length],
            ['carrying the password', withPassword],
            ['carrying `user:password` (the URL credentials)', withUserinfo],
            ['carrying the user name', withUser],
          ],
        ),
        '',
        `SIGTERM: ${termText}.`,
      ].join('\n'),
    );
  } finally {
    if (child && !child.exit()) await child.terminate();
    await sim.close();
    await deleteKeysAt(ctx.redisUrl, prefix);
  }
}

export const noInfoScenario = scenario('noinfo', noInfo);

export const passwordScenario = scenario('password', wrongPassword);
