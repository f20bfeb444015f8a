/**
 * The docker-compose stack for real: the gateway image built from the Dockerfile, and
 * docker-compose.yml run by Docker (Compose v1, `-p` for the project) with the test-only changes of
 * test/stack.override.yml laid over it (local stand-in images, ports of the test's own, a short
 * worker lock). The RPC is the simulator, run here on the host and reached from the containers on
 * the Docker bridge's address, so the test can hold a call or fail one.
 *
 * What it shows: answers through the stack, the refresh done by the worker container; Prometheus
 * scraping both with every dashboard query returning data; Redis restarted with its append-only
 * file keeping entries and queued jobs; the worker container killed mid-job and its job taken
 * over by the container the restart policy brings back; `docker stop` of api and worker ending
 * both with exit code 0 within stop_grace_period, in-flight requests answered. Then the demo
 * profile, as `.env.example` sets it up: the simulator a service of the stack, the demo chain
 * answered and a subdomain created on it shown without a scan. Grafana is left out: no image of
 * it can be made without an image registry (it has no Debian package).
 *
 * scripts/docker-standins.sh (run first, as .ci/run does too) installs and starts the engine and
 * builds the stand-ins; the suite skips, printing why, only where that script cannot.
 */
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIPv4 } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { REFRESH_JOB, REFRESH_QUEUE } from '../src/core/queue/refresh-queue.js';
import { redisKeys } from '../src/core/redis-keys.js';
import { startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';
import { getJson, seedDemo, waitFor, type Reply } from './support/gateway.js';
import { freePort } from './support/ports.js';
import { parseExposition, value } from './support/prometheus.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

/** The stand-in tags the script prints (`STANDIN_NODE=...`), or why there is no engine. */
function standIns(): { tags: Record<string, string> } | { reason: string } {
  const script = spawnSync('bash', [join(root, 'scripts/docker-standins.sh'), '--print'], {
    encoding: 'utf8',
    timeout: 15 * 60_000,
  });
  if (script.status !== 0) {
    const said = `${script.stderr ?? ''}${script.stdout ?? ''}`.trim().split('\n').slice(-3);
    return { reason: said.join(' / ') || String(script.error ?? `exit ${script.status}`) };
  }
  const tags: Record<string, string> = {};
  for (const m of script.stdout.matchAll(/^(STANDIN_\w+)=(\S+)$/gm)) tags[m[1] ?? ''] = m[2] ?? '';
  return { tags };
}

const engine = standIns();
if ('reason' in engine) {
  console.warn(`stack.test: skipped, no Docker engine could be started: ${engine.reason}`);
} else {
  console.warn('stack.test: Grafana is left out (no image registry, and no Debian package of it)');
}

const PROJECT = `snsgw-stack-${process.pid}`;
/** The project of the demo profile's stack, run after the first one is down. */
const DEMO_PROJECT = `snsgw-demo-${process.pid}`;
/** The stand-in tags, by `STANDIN_*` name. */
const tags = 'tags' in engine ? engine.tags : {};
/** Image ids there before the first build; undefined until taken (then nothing is removed). */
let imagesBefore: Set<string> | undefined;
/** The stack's Redis password: Compose refuses to start without one (no default exists). */
const REDIS_PASSWORD = `redis-${randomBytes(12).toString('hex')}`;
const GATEWAY_IMAGE = `sns-gateway:stack-test-${process.pid}`;
/** The demo profile's simulator image, built from the Dockerfile's `rpc-sim` stage. */
const SIM_IMAGE = `sns-gateway-rpc-sim:stack-test-${process.pid}`;
const SERVICES = ['redis', 'api', 'worker', 'prometheus'];
const compose = parseYaml(readFileSync(join(root, 'docker-compose.yml'), 'utf8')) as {
  'x-gateway': { stop_grace_period: string };
};
/** stop_grace_period of api and worker, in ms ("15s" in the compose file). */
const GRACE_MS = Number(/^(\d+)s$/.exec(compose['x-gateway'].stop_grace_period)?.[1]) * 1000;

/**
 * How this file runs Docker for a Compose project: `sh` runs a program in the repository's root
 * with the environment `env()` gives at the call (stdout; a failure names the command and carries
 * its stderr), `dc` runs docker-compose on the compose file with test/stack.override.yml over it
 * and `options` (`--env-file`, `--profile`) before the command, `containerOf` is the id of a
 * service's container, `down` takes the project down (volumes too), printing its logs first when
 * a test of the describe failed. Called in a describe: it adds a `beforeEach` that notes failures.
 */
function composeShell(project: string, options: string[], env: () => Record<string, string>) {
  let failed = false;
  beforeEach((ctx) => {
    ctx.onTestFailed(() => {
      failed = true;
    });
  });
  const sh = async (file: string, args: string[], timeout = 120_000): Promise<string> => {
    try {
      const { stdout } = await run(file, args, {
        cwd: root,
        env: env(),
        timeout,
        maxBuffer: 64 << 20,
      });
      return stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`${file} ${args.join(' ')}: ${e.message}\n${e.stderr ?? ''}`);
    }
  };
  const dc = (args: string[], timeout?: number) =>
    sh(
      'docker-compose',
      [
        '-p',
        project,
        '-f',
        'docker-compose.yml',
        '-f',
        'test/stack.override.yml',
        ...options,
        ...args,
      ],
      timeout,
    );
  const containerOf = async (service: string) => (await dc(['ps', '-q', service])).trim();
  const down = async (): Promise<void> => {
    if (failed) console.log(await dc(['logs', '--no-color', '--tail=60']).catch(String));
    await dc(['down', '-v', '--remove-orphans'], 180_000).catch((e: unknown) => console.error(e));
  };
  return { sh, dc, containerOf, down };
}

/**
 * The environment both stacks are built and run with beyond their own settings: the legacy
 * builder (BuildKit would fetch the Dockerfile's `# syntax=` frontend from a registry; Compose v1
 * hands the build to the engine's API, not to the CLI), the stand-in images and the test's images.
 */
const buildEnv = (): Record<string, string> => ({
  DOCKER_BUILDKIT: '0',
  COMPOSE_DOCKER_CLI_BUILD: '0',
  STACK_NODE_IMAGE: tags.STANDIN_NODE ?? '',
  STACK_REDIS_IMAGE: tags.STANDIN_REDIS ?? '',
  STACK_PROMETHEUS_IMAGE: tags.STANDIN_PROMETHEUS ?? '',
  STACK_GATEWAY_IMAGE: GATEWAY_IMAGE,
  STACK_SIM_IMAGE: SIM_IMAGE,
});

type Panel = {
  type?: string;
  title?: string;
  targets?: Array<{ expr?: string }>;
  panels?: Panel[];
};
const dashboard = JSON.parse(
  readFileSync(join(root, 'grafana/dashboards/sns-gateway.json'), 'utf8'),
) as { panels?: Panel[] };
const dashboardQueries = (dashboard.panels ?? [])
  .flatMap((p) => [p, ...(p.panels ?? [])])
  .filter((p) => p.type !== 'row')
  .flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title ?? '?', expr: t.expr ?? '' })));

describe.runIf(!('reason' in engine))('the compose stack in Docker', () => {
  let sim: RpcSimulator;
  let env: Record<string, string>;
  let apiUrl: string;
  let promUrl: string;
  let redisPort: number;

  const { sh, dc, containerOf, down } = composeShell(PROJECT, [], () => env);
  const inspect = async (id: string, format: string) =>
    (await sh('docker', ['inspect', '-f', format, id])).trim();
  /** The host's IPv4 address on Docker's default bridge (docker0): never all interfaces. */
  const bridgeAddress = async (): Promise<string> => {
    const [gateway = '', name = ''] = (
      await sh('docker', [
        'network',
        'inspect',
        'bridge',
        '-f',
        '{{range .IPAM.Config}}{{.Gateway}}{{end}}|{{index .Options "com.docker.network.bridge.name"}}',
      ])
    )
      .trim()
      .split('|');
    // os.networkInterfaces() leaves out an interface with no carrier, as docker0 is while no
    // container is attached: ask ip(8).
    const shown = gateway ? '' : await sh('ip', ['-4', '-o', 'addr', 'show', 'dev', name]);
    const address = gateway || /\binet (\d+\.\d+\.\d+\.\d+)\//.exec(shown)?.[1];
    if (!address || !isIPv4(address)) throw new Error(`no IPv4 address on the bridge ${name}`);
    return address;
  };
  const get = (path: string, init?: RequestInit): Promise<Reply> => getJson(apiUrl, path, init);

  /** Counts of refresh jobs by state, read from the stack's Redis. */
  /** The refresh jobs by state (ids), of every parent or of `parent` alone. */
  const queueCounts = async (parent?: string) => {
    const queue = new Queue(REFRESH_QUEUE, {
      connection: {
        host: '127.0.0.1',
        port: redisPort,
        password: REDIS_PASSWORD,
        maxRetriesPerRequest: 1,
      },
      prefix: 'sns',
    });
    try {
      const count = async (state: 'wait' | 'prioritized' | 'active' | 'completed') =>
        (await queue.getJobs([state]))
          .filter((j) => j.name === REFRESH_JOB)
          .filter((j) => parent === undefined || (j.data as { parent?: string }).parent === parent)
          .map((j) => j.id);
      return {
        waiting: [...(await count('wait')), ...(await count('prioritized'))],
        active: await count('active'),
        completed: await count('completed'),
      };
    } finally {
      await queue.close();
    }
  };
  const promQuery = async (query: string) => {
    const res = await fetch(`${promUrl}/api/v1/query?${new URLSearchParams({ query }).toString()}`);
    return (await res.json()) as {
      status: string;
      error?: string;
      data?: { result: Array<{ metric: Record<string, string>; value: [number, string] }> };
    };
  };
  const scalar = async (query: string) =>
    Number((await promQuery(query).catch(() => undefined))?.data?.result[0]?.value[1] ?? NaN);

  beforeAll(async () => {
    env = { ...(process.env as Record<string, string>) };
    imagesBefore = new Set((await sh('docker', ['images', '-aq', '--no-trunc'])).split('\n'));
    // The simulator listens on the default bridge's address: the containers reach the host there,
    // and nothing outside the machine does.
    const bridge = await bridgeAddress();
    const chain = seedDemo();
    for (const parent of ['stackq-a', 'stackq-b', 'stackkill', 'stackstop-a', 'stackstop-b']) {
      chain.addDomain(parent);
      chain.addSubdomain(parent, 'child');
    }
    // The gateway derives the websocket URL as the HTTP port + 1, as on a real node.
    for (let attempt = 0; ; attempt++) {
      const port = await freePort();
      try {
        sim = await startRpcSimulator({ chain, host: bridge, port, wsPort: port + 1 });
        break;
      } catch (err) {
        if (attempt >= 5) throw err;
      }
    }
    const [apiPort, promPort] = [await freePort(), await freePort()];
    redisPort = await freePort();
    apiUrl = `http://127.0.0.1:${apiPort}`;
    promUrl = `http://127.0.0.1:${promPort}`;
    env = {
      ...env,
      ...buildEnv(),
      STACK_REDIS_PORT: String(redisPort),
      API_PUBLISH: `127.0.0.1:${apiPort}`,
      PROMETHEUS_PUBLISH: `127.0.0.1:${promPort}`,
      // What the compose file reads from the environment, set so a developer's shell or .env
      // cannot leak in. The passwords Compose refuses to start without are the test's own.
      REDIS_PASSWORD,
      GRAFANA_ADMIN_PASSWORD: `grafana-${randomBytes(12).toString('hex')}`,
      GRAFANA_ANONYMOUS: 'false',
      GRAFANA_PUBLISH: `127.0.0.1:${await freePort()}`,
      ADMIN_QUEUES_WRITE: 'false',
      HOT_KEYS_MIN_CLIENTS: '',
      RPC_CREDITS_PER_DAY: '',
      RPC_URL: sim.url,
      RPC_OVERRIDE: 'on',
      RPC_OVERRIDE_ALLOWLIST: '',
      RPC_MAX_PER_SECOND: '50',
      // This stack's subject is the per-parent path through the containers (refreshes by the
      // worker, a killed worker's job, a Redis restart, a failed RPC call on the panels); the
      // demo profile's stack below runs the default, the registry index.
      SUBDOMAIN_INDEX: 'parents',
      QUEUE_PREFIX: 'sns',
      LOG_LEVEL: 'info',
      ADMIN_TOKEN: '',
      WORKER_CONCURRENCY: '4',
    };
    await dc(['build', 'api'], 15 * 60_000);
    // Compose waits for each depends_on condition (Redis healthy, then api and worker healthy).
    await dc(['up', '-d', '--no-build', ...SERVICES], 5 * 60_000);
    await waitFor(
      async () => (await fetch(`${promUrl}/-/ready`).catch(() => undefined))?.ok === true,
      60_000,
    );
  }, 20 * 60_000);

  afterAll(async () => {
    await down();
    await sim?.close();
  }, 300_000);

  it('answers through the stack: a derivation, and subdomains refreshed by the worker container', async () => {
    const key = await get('/record-key-v2/bonfida/SOL');
    expect(key.status).toBe(200);
    const miss = await get('/subdomains/67679');
    expect(miss).toMatchObject({
      status: 200,
      body: { result: ['bullish', 'hollaaa', 'testing'] },
    });
    expect(miss.headers.get('x-cache')).toBe('MISS');
    expect((await get('/subdomains/67679')).headers.get('x-cache')).toBe('HIT');
    // One failed RPC call (a retry follows): the error panels have a series.
    sim.setFaults([{ kind: 'http', status: 503, times: 1 }]);
    expect(await get('/subdomains/demo')).toMatchObject({
      status: 200,
      body: { result: ['alpha', 'beta', 'gamma'] },
    });
    sim.setFaults([]);
    expect((await get('/subdomains/a.b')).status).toBe(400);

    // The API container runs ROLE=api: the refreshes were the worker container's.
    const worker = await containerOf('worker');
    const workerMetrics = parseExposition(
      await sh('docker', [
        'exec',
        worker,
        'node',
        '-e',
        "fetch('http://127.0.0.1:9101/metrics').then(r=>r.text()).then(t=>process.stdout.write(t))",
      ]),
    );
    expect(
      value(workerMetrics, 'sns_refresh_jobs_total', { outcome: 'completed' }),
    ).toBeGreaterThan(1);
    // The API's /metrics is on its unpublished API_METRICS_PORT, not on the public port.
    expect((await fetch(`${apiUrl}/metrics`)).status).toBe(404);
    const api = await containerOf('api');
    const apiMetrics = parseExposition(
      await sh('docker', [
        'exec',
        api,
        'node',
        '-e',
        "fetch('http://127.0.0.1:9100/metrics').then(r=>r.text()).then(t=>process.stdout.write(t))",
      ]),
    );
    expect(value(apiMetrics, 'sns_refresh_jobs_total', {})).toBe(0);
    expect(value(apiMetrics, 'sns_cache_lookups_total', {})).toBeGreaterThan(1);
  });

  it('has Prometheus scraping the api and the worker, every dashboard query returning data', async () => {
    // Two scrapes (15 s apart, prometheus.yml) after the traffic above, so rate() has its samples.
    const after = Date.now() / 1000;
    for (const job of ['sns-api', 'sns-worker']) {
      await waitFor(async () => (await scalar(`up{job="${job}"}`)) === 1, 60_000);
    }
    await waitFor(
      async () =>
        (await scalar('min(timestamp(up))')) > after + 16 &&
        (await scalar('min(count_over_time(up[1m]))')) >= 2,
      60_000,
    );
    const empty: string[] = [];
    for (const q of dashboardQueries) {
      const expr = q.expr
        .replace(/\$__rate_interval|\$\{__rate_interval\}/g, '1m')
        .replace(/\$__interval|\$\{__interval\}/g, '15s')
        .replace(/\$__range|\$\{__range\}/g, '5m');
      const r = await promQuery(expr);
      if (r.status !== 'success') empty.push(`${q.panel}: ${r.error} (${expr})`);
      else if (!r.data?.result.length) empty.push(`${q.panel}: no series (${expr})`);
    }
    expect(dashboardQueries.length).toBeGreaterThan(8);
    expect(empty).toEqual([]);
  }, 150_000);

  it('keeps cached entries and queued jobs across a Redis restart (append-only file)', async () => {
    const worker = await containerOf('worker');
    await dc(['stop', 'worker']);
    expect(await inspect(worker, '{{.State.ExitCode}}')).toBe('0');
    // Two misses with no worker: their refresh jobs wait in the queue.
    const abort = new AbortController();
    const pending = ['stackq-a', 'stackq-b'].map((p) =>
      get(`/subdomains/${p}`, { signal: abort.signal }).catch(() => undefined),
    );
    await waitFor(async () => (await queueCounts()).waiting.length >= 2, 20_000);
    abort.abort();
    await Promise.all(pending);
    const queued = (await queueCounts()).waiting.sort();

    const redis = new Redis({
      host: '127.0.0.1',
      port: redisPort,
      password: REDIS_PASSWORD,
      maxRetriesPerRequest: 1,
    });
    redis.on('error', () => undefined);
    try {
      const entries = await redis.keys(redisKeys('sns').entryMeta('*', '67679'));
      expect(entries).toHaveLength(1);
      await dc(['restart', 'redis']);
      const id = await containerOf('redis');
      await waitFor(
        async () => (await inspect(id, '{{.State.Health.Status}}')) === 'healthy',
        60_000,
      );
      expect(await redis.exists(entries[0] ?? '')).toBe(1);
      expect((await queueCounts()).waiting.sort()).toEqual(queued);
    } finally {
      redis.disconnect();
    }

    await dc(['start', 'worker']);
    await waitFor(async () => {
      const { completed } = await queueCounts();
      return queued.every((j) => completed.includes(j));
    }, 60_000);
    for (const parent of ['stackq-a', 'stackq-b']) {
      expect(await get(`/subdomains/${parent}`)).toMatchObject({
        status: 200,
        body: { result: ['child'] },
      });
    }
  }, 180_000);

  it("has a killed worker container's job taken over once the restart policy brings it back", async () => {
    const worker = await containerOf('worker');
    await waitFor(
      async () => (await inspect(worker, '{{.State.Health.Status}}')) === 'healthy',
      60_000,
    );
    const calls = sim.callCount('getProgramAccounts');
    // The refresh's first getProgramAccounts never answers: the worker dies in the middle of it.
    sim.setFaults([{ kind: 'hang', method: 'getProgramAccounts', times: 1 }]);
    const waiting = get('/subdomains/stackkill', { signal: AbortSignal.timeout(60_000) });
    await waitFor(() => sim.callCount('getProgramAccounts') === calls + 1, 20_000);
    const { active: killed } = await queueCounts('stackkill');
    expect(killed).toHaveLength(1);

    const restarts = Number(await inspect(worker, '{{.RestartCount}}'));
    // A crash, not `docker kill` (which Docker counts as a manual stop and does not restart):
    // SIGKILL to the container's node process from the host.
    process.kill(Number(await inspect(worker, '{{.State.Pid}}')), 'SIGKILL');
    const killedAt = Date.now();
    await waitFor(
      async () => Number(await inspect(worker, '{{.RestartCount}}')) > restarts,
      30_000,
    );

    const reply = await waiting;
    console.log(
      `stack.test: the killed worker's job answered ${Date.now() - killedAt} ms after the kill`,
    );
    expect(reply).toMatchObject({ status: 200, body: { result: ['child'] } });
    expect(sim.callCount('getProgramAccounts')).toBeGreaterThanOrEqual(calls + 2);
    // The answer is published before the job is marked completed, and other parents' refreshes
    // (the hot-parent scan's) may be queued meanwhile: wait, bounded, for the killed job itself.
    await waitFor(
      async () => (await queueCounts('stackkill')).completed.includes(killed[0]),
      20_000,
    );
    // Nothing of the parent's is left stuck: a refresh queued meanwhile (the restarted worker's
    // hot-parent scan) runs too, so the queue empties; a job lost with the worker never would.
    await waitFor(async () => {
      const { active, waiting } = await queueCounts('stackkill');
      return active.length === 0 && waiting.length === 0;
    }, 30_000);
  }, 120_000);

  it('stops api and worker with exit code 0 within stop_grace_period, answering in-flight requests', async () => {
    const [api, worker] = [await containerOf('api'), await containerOf('worker')];
    await waitFor(
      async () => (await inspect(worker, '{{.State.Health.Status}}')) === 'healthy',
      60_000,
    );
    expect(GRACE_MS).toBe(15_000);
    // Compose hands stop_grace_period to the engine, so a plain `docker stop` waits as long.
    expect(await inspect(api, '{{.Config.StopTimeout}}')).toBe(String(GRACE_MS / 1000));
    // Each refresh's getProgramAccounts answers after 2 s: the requests are in flight when the
    // stop comes, with their jobs active in the worker. A request waiting for a refresh is given a
    // quarter of SHUTDOWN_TIMEOUT_MS (10 s) to see it land (docs/design.md, "Shutdown"), so a
    // refresh that is nearly done is answered 200, not 503.
    sim.setFaults([{ kind: 'delay', ms: 2_000, method: 'getProgramAccounts', times: 2 }]);
    let settled = 0;
    const inflight = ['stackstop-a', 'stackstop-b'].map((p) =>
      get(`/subdomains/${p}`).finally(() => settled++),
    );
    await waitFor(async () => (await queueCounts()).active.length === 2, 10_000);

    const started = Date.now();
    const stopping = sh('docker', ['stop', api, worker], 60_000);
    expect(settled).toBe(0);
    await stopping;
    const took = Date.now() - started;
    for (const reply of await Promise.all(inflight)) {
      expect(reply).toMatchObject({ status: 200, body: { result: ['child'] } });
    }
    console.log(`stack.test: docker stop of api and worker took ${took} ms`);
    expect(took).toBeLessThan(GRACE_MS);
    for (const id of [api, worker]) {
      expect(await inspect(id, '{{.State.ExitCode}} {{.State.OOMKilled}}')).toBe('0 false');
    }
  }, 120_000);
});

/**
 * `docker compose --profile demo up` as docs/operations.md tells a user to try it: the settings of
 * `.env.example` (the simulator as RPC_URL, one client making a parent hot), the passwords it
 * leaves to fill in, the simulator a service of the stack. Prometheus and Grafana are left out
 * (the first describe runs Prometheus; Grafana has no image here).
 */
describe.runIf(!('reason' in engine))("the compose stack's demo profile in Docker", () => {
  const DEMO_SERVICES = ['redis', 'api', 'worker', 'rpc-sim'];
  let env: Record<string, string>;
  let apiUrl: string;

  const { sh, dc, containerOf, down } = composeShell(
    DEMO_PROJECT,
    ['--env-file', '.env.example', '--profile', 'demo'],
    () => env,
  );
  /** What `script` prints, run by node inside `service`'s container. */
  const nodeIn = async (service: string, script: string) =>
    sh('docker', ['exec', await containerOf(service), 'node', '-e', script]);
  const workerMetrics = async () =>
    parseExposition(
      await nodeIn(
        'worker',
        "fetch('http://127.0.0.1:9101/metrics').then(r=>r.text()).then(t=>process.stdout.write(t))",
      ),
    );
  const get = (path: string): Promise<Reply> => getJson(apiUrl, path);
  const labels = async () => ((await get('/subdomains/67679')).body as { result?: unknown }).result;

  beforeAll(async () => {
    const apiPort = await freePort();
    apiUrl = `http://127.0.0.1:${apiPort}`;
    // Every variable the compose file reads comes from .env.example, as for a user who copied it,
    // not from the shell the tests run in; only what the user must fill in, and the test's own
    // images and ports, are given.
    const composeText = readFileSync(join(root, 'docker-compose.yml'), 'utf8');
    env = { ...(process.env as Record<string, string>) };
    for (const [, name] of composeText.matchAll(/\$\{(\w+)(?::[-?][^}]*)?\}/g)) {
      if (name) delete env[name];
    }
    env = {
      ...env,
      ...buildEnv(),
      STACK_REDIS_PORT: String(await freePort()),
      API_PUBLISH: `127.0.0.1:${apiPort}`,
      PROMETHEUS_PUBLISH: `127.0.0.1:${await freePort()}`,
      GRAFANA_PUBLISH: `127.0.0.1:${await freePort()}`,
      REDIS_PASSWORD: `redis-${randomBytes(12).toString('hex')}`,
      GRAFANA_ADMIN_PASSWORD: `grafana-${randomBytes(12).toString('hex')}`,
    };
    imagesBefore ??= new Set((await sh('docker', ['images', '-aq', '--no-trunc'])).split('\n'));
    // The gateway's image is the first describe's when it built one (its layers are cached).
    await dc(['build', 'api', 'rpc-sim'], 15 * 60_000);
    await dc(['up', '-d', '--no-build', ...DEMO_SERVICES], 5 * 60_000);
    // The worker follows the simulated chain (its websocket on 8900) before the walkthrough.
    await waitFor(
      async () =>
        value(await workerMetrics().catch(() => parseExposition('')), 'sns_follow_healthy') === 1,
      120_000,
    );
  }, 20 * 60_000);

  afterAll(async () => {
    if (!env) return;
    await down();
  }, 300_000);

  it('answers on the simulated chain, the simulator a service that is not published', async () => {
    expect(await labels()).toEqual(['bullish', 'hollaaa', 'testing']);
    expect(await get('/record-key-v2/bonfida/SOL')).toMatchObject({
      status: 200,
      body: { result: 'ETARvCjLwjyM6Jux1ndxuXuYEYy56Nf5uvU3abL1WyW6' },
    });
    const sim = await containerOf('rpc-sim');
    const status = () =>
      sh('docker', ['inspect', '-f', '{{.State.Health.Status}} {{.Config.User}}', sim]);
    // Docker says `starting` until the healthcheck's first probe, one interval after the start,
    // though the simulator answered the gateway before then.
    await waitFor(async () => (await status()) !== 'starting node\n', 25_000, 'a health verdict');
    expect(await status()).toBe('healthy node\n');
    expect((await sh('docker', ['port', sim])).trim()).toBe('');
    // The gateway's RPC is the service, as .env.example says.
    const workerEnv = await sh('docker', [
      'inspect',
      '-f',
      '{{join .Config.Env "\\n"}}',
      await containerOf('worker'),
    ]);
    expect(workerEnv.split('\n')).toEqual(
      expect.arrayContaining(['RPC_URL=http://rpc-sim:8899', 'HOT_KEYS_MIN_CLIENTS=1']),
    );
  });

  it("shows a subdomain created on the chain, as the demo's walkthrough does, with no scan", async () => {
    const scans = () =>
      workerMetrics().then((m) =>
        value(m, 'sns_rpc_requests_total', { method: 'getProgramAccounts' }),
      );
    expect(await labels()).toEqual(['bullish', 'hollaaa', 'testing']);
    const before = await scans();
    // The walkthrough's third command, from inside the simulator's container (not published).
    const add = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'simAddSubdomain',
      params: ['67679', 'fresh'],
    });
    await nodeIn(
      'rpc-sim',
      `fetch('http://127.0.0.1:8899',{method:'POST',headers:{'content-type':'application/json'},body:${JSON.stringify(add)}}).then(async r=>{if(!r.ok)process.exit(1)})`,
    );
    await waitFor(async () => JSON.stringify(await labels()).includes('"fresh"'), 30_000);
    expect(await labels()).toEqual(['bullish', 'fresh', 'hollaaa', 'testing']);
    expect(await scans()).toBe(before);
  });
});

// The gateway and simulator images and the layers of their builds; the stand-ins stay (they are
// the cache), and so does every image that was there before.
afterAll(async () => {
  if (!imagesBefore) return;
  const docker = async (args: string[]) =>
    (await run('docker', args, { cwd: root, timeout: 120_000, maxBuffer: 64 << 20 })).stdout;
  for (const image of [GATEWAY_IMAGE, SIM_IMAGE]) {
    await docker(['rmi', image]).catch(() => undefined);
  }
  const after = (await docker(['images', '-aq', '--no-trunc'])).split('\n');
  const standIns = Object.values(tags).map((tag) =>
    docker(['inspect', '-f', '{{.Id}}', tag]).then(
      (id) => id.trim(),
      () => '',
    ),
  );
  const kept = new Set([...imagesBefore, ...(await Promise.all(standIns))]);
  for (const id of after.filter((i) => i && !kept.has(i))) {
    await docker(['rmi', id]).catch(() => undefined);
  }
}, 300_000);
