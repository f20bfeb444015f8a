/**
 * `npm run demo`: the gateway (API and worker, `ROLE=all`) on the RPC simulator's demo chain, in
 * one process tree, with the demo settings; prints what to open and what to try. Ctrl-C or SIGTERM
 * stops it all: the gateway first, then the simulator, then a Redis the demo started.
 *
 *   npm run demo                 # API on 3000, worker metrics on 9101, simulator on 8899
 *   PORT=4000 npm run demo       # ports of your choice (WORKER_METRICS_PORT, RPC_SIM_PORT too)
 *   REDIS_URL=redis://host:6379/2 npm run demo
 *
 * Runs from the package root (npm runs scripts there). docs/simulator.md describes the chain.
 */
import { parseArgs } from 'node:util';
import { execa, type ResultPromise } from 'execa';
import getPort from 'get-port';
import { SAME_SIGNAL_MS } from '../../src/core/runtime/shutdown.js';
import { SimChain, seedDemoChain, startRpcSimulator, type RpcSimulator } from '../rpc-sim/index.js';
import { DEMO_PREFIX, deleteDemoKeys, findOrStartRedis, type DemoRedis } from './redis.js';
import { banner, NOT_FOLLOWING } from './text.js';

const USAGE = `usage: npm run demo [-- --help]

Starts the Solana RPC simulator with its demo chain and the gateway (API and worker) on it, then
prints the URLs to open and commands to try. Ctrl-C stops everything.

Environment (defaults in parentheses; a default port in use is replaced by a free one):
  PORT                 the API (3000)
  WORKER_METRICS_PORT  the worker's /metrics (9101)
  RPC_SIM_PORT         the simulator's HTTP port; its websocket is the next one (8899)
  REDIS_URL            the Redis to use (redis://127.0.0.1:6379); when none answers there on
                       loopback, the demo starts redis-server if it is on the PATH
  LOG_LEVEL            the gateway's log level (warn)`;

/** How long the gateway may take to answer `/readyz` once started. */
const READY_WAIT_MS = 60_000;

/** How long the worker may take to follow the chain once ready (its socket, its subscriptions). */
const FOLLOW_WAIT_MS = 20_000;

/** The port in `name`, or `fallback` (or a free port when `fallback` is taken). */
async function portFrom(name: string, fallback: number): Promise<number> {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return getPort({ port: fallback, host: '127.0.0.1' });
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65534) {
    throw new Error(`${name} must be a port number (1-65534), got ${JSON.stringify(raw)}`);
  }
  return port;
}

/**
 * True once `url` answers 200 with a body `accept` takes, false if `gone` settles first or the
 * wait passes `ms`.
 */
async function answers(
  url: string,
  gone: Promise<unknown>,
  ms: number,
  accept: (body: string) => boolean = () => true,
): Promise<boolean> {
  let exited = false;
  void gone.then(() => (exited = true));
  const deadline = Date.now() + ms;
  while (!exited && Date.now() < deadline) {
    const ok = await fetch(url).then(
      async (r) => r.status === 200 && accept(await r.text()),
      () => false,
    );
    if (ok) return true;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return false;
}

/** How long a child may take to stop on SIGTERM before it is killed: past the gateway's own bound. */
const STOP_WAIT_MS = 30_000;

/** Sends `signal` to `child`'s process group (the build's compiler included), if it still runs. */
function signalGroup(child: ResultPromise, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

/** SIGTERM to each of `children`, then waits for them; SIGKILL to those left after the bound. */
async function stopAll(children: ResultPromise[]): Promise<void> {
  for (const child of children) signalGroup(child, 'SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, STOP_WAIT_MS)));
  await Promise.race([Promise.all(children), late]);
  clearTimeout(timer);
  for (const child of children) signalGroup(child, 'SIGKILL');
  await Promise.all(children);
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { help: { type: 'boolean' } } });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const children: ResultPromise[] = [];
  let sim: RpcSimulator | undefined;
  let redis: DemoRedis | undefined;
  let gateway: ResultPromise | undefined;
  let stopping: Promise<void> | undefined;
  let firstSignalAt = 0;

  /** Stops what runs, in dependency order, then exits with `code`. */
  const stop = (code: number, why?: string): Promise<void> => {
    stopping ??= (async () => {
      if (why) console.error(`demo: ${why}`);
      console.error('demo: stopping');
      const first = children.filter((c) => c !== redis?.process);
      await stopAll(first);
      await sim?.close();
      if (redis && !redis.process) await deleteDemoKeys(redis.url, DEMO_PREFIX).catch(() => {});
      if (redis?.process) await stopAll([redis.process]);
      console.error('demo: stopped');
      process.exit(code);
    })();
    return stopping;
  };
  const onSignal = (signal: NodeJS.Signals) => {
    // Ctrl-C reaches the demo twice (from the terminal, and forwarded by npm): one request.
    if (!stopping) {
      firstSignalAt = Date.now();
      void stop(0);
    } else if (Date.now() - firstSignalAt >= SAME_SIGNAL_MS) {
      console.error(`demo: ${signal} again: killing everything now`);
      process.exit(1);
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // Whatever ends the demo, no child is left behind (their process groups are their own).
  process.on('exit', () => {
    for (const child of children) signalGroup(child, 'SIGKILL');
  });
  /** Starts node with `args` in a process group of its own; its exit outside a stop stops all. */
  const run = (name: string, args: string[], env: Record<string, string>, once = false) => {
    const child = execa(process.execPath, args, {
      detached: true,
      reject: false,
      stdin: 'ignore',
      stdout: 'inherit',
      stderr: 'inherit',
      env,
    });
    children.push(child);
    void child.then((r) => {
      if (stopping || (once && r.exitCode === 0)) return;
      void stop(1, `${name} exited (${r.exitCode ?? r.signal})`);
    });
    return child;
  };

  try {
    const apiPort = await portFrom('PORT', 3000);
    const metricsPort = await portFrom('WORKER_METRICS_PORT', 9101);
    redis = await findOrStartRedis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
    if (redis.process) {
      children.push(redis.process);
      void redis.process.then((r) => {
        if (!stopping) void stop(1, `redis-server exited (${r.exitCode ?? r.signal})`);
      });
    }
    await deleteDemoKeys(redis.url, DEMO_PREFIX);
    const wanted = await portFrom('RPC_SIM_PORT', 8899);
    const wsFree = (await getPort({ port: wanted + 1, host: '127.0.0.1' })) === wanted + 1;
    const chain = new SimChain();
    seedDemoChain(chain);
    sim = await startRpcSimulator({
      chain,
      host: '127.0.0.1',
      port: wsFree ? wanted : 0,
      wsPort: wsFree ? wanted + 1 : 0,
    });
    if (stopping) return;
    const build = run('the build', ['scripts/build-if-stale.mjs'], {}, true);
    if ((await build).exitCode !== 0 || stopping) return;
    // The first start is quiet for a while (the build above, then the worker following the
    // chain): say what it waits for.
    console.error('demo: starting the gateway, then waiting until it follows the simulated chain');
    gateway = run('the gateway', ['dist/main.js'], {
      ROLE: 'all',
      HOST: '127.0.0.1',
      PORT: String(apiPort),
      WORKER_METRICS_PORT: String(metricsPort),
      REDIS_URL: redis.url,
      REDIS_CLUSTER_NODES: '',
      QUEUE_PREFIX: DEMO_PREFIX,
      RPC_URL: sim.url,
      RPC_WS: 'on',
      RPC_WS_URL: sim.wsUrl,
      // One client (this terminal) is enough to make a parent hot.
      HOT_KEYS_MIN_CLIENTS: '1',
      LOG_LEVEL: process.env.LOG_LEVEL || 'warn',
    });
    const api = `http://127.0.0.1:${apiPort}`;
    const metrics = `http://127.0.0.1:${metricsPort}`;
    const ready =
      (await answers(`${api}/readyz`, gateway, READY_WAIT_MS)) &&
      (await answers(`${metrics}/readyz`, gateway, READY_WAIT_MS));
    if (stopping) return;
    if (!ready) return void stop(1, `the gateway was not ready within ${READY_WAIT_MS} ms`);
    // The walkthrough creates a subdomain and expects it within seconds: the stream must be up.
    const following = await answers(`${metrics}/metrics`, gateway, FOLLOW_WAIT_MS, (text) =>
      /^sns_follow_healthy 1$/m.test(text),
    );
    if (stopping) return;
    if (!following) console.error(`demo: ${NOT_FOLLOWING}`);
    console.log(banner(api, metrics, sim.url, redis));
  } catch (err) {
    await stop(1, err instanceof Error ? err.message : String(err));
  }
}

await main();
