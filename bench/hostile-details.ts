/**
 * Scenario `details` of `npm run bench:hostile`: 8 anonymous connections ask
 * `/subdomains/<p>/details?limit=1` for a parent of 3,203 subdomains, then `/subdomains/<p>?limit=1`
 * under the same load, each for `--flood` seconds, while `/healthz` is probed every 50 ms:
 * requests per second, the probes' latency, the gateway's CPU per request and the bytes Redis
 * sent meanwhile (`total_net_output_bytes`, the whole server's).
 */
import { spawnMain } from '../test/support/main-process.js';
import { freePort } from '../test/support/ports.js';
import { SimChain, startRpcSimulator } from '../tools/rpc-sim/index.js';
import {
  cpuMs,
  gatewayEnv,
  get,
  type HostileContext,
  probe,
  redisBytesSent,
  runLine,
  scenario,
} from './hostile-common.js';
import { benchPrefix, deleteKeysAt, fmt, labelMaker, load, table, writeSection } from './lib.js';

const PARENT = 'detailsflood';
const SUBDOMAINS = 3_203;
const CONNECTIONS = 8;

async function run(ctx: HostileContext): Promise<void> {
  const { log } = ctx;
  const prefix = benchPrefix();
  const chain = new SimChain();
  const label = labelMaker(3203);
  for (let i = 0; i < SUBDOMAINS; i++) chain.addSubdomain(PARENT, label(i));
  const sim = await startRpcSimulator({ chain });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let gateway: Awaited<ReturnType<typeof spawnMain>> | undefined;
  try {
    gateway = await spawnMain({
      ...gatewayEnv(ctx, port, prefix, sim.url),
      // No refresh during the measurement: the entry stays fresh for an hour.
      CACHE_FRESH_SECONDS: '3600',
      SUBDOMAINS_WAIT_MS: '60000',
    });
    const pid = gateway.pid;
    const paths = {
      details: `/subdomains/${PARENT}/details?limit=1`,
      labels: `/subdomains/${PARENT}?limit=1`,
    };
    // Warm: the cold miss reads the parent once; both routes answer from its entry after.
    for (const path of [paths.labels, paths.details]) {
      const warm = await get(`${base}${path}`, '127.0.0.1', 60_000);
      if (warm.status !== 200)
        throw new Error(`warming ${path}: ${warm.status} ${warm.body.slice(0, 200)}`);
    }
    const rows: Array<Array<string | number>> = [];
    for (const [name, path] of Object.entries(paths)) {
      const bytesBefore = await redisBytesSent(ctx.redisUrl);
      const cpuBefore = cpuMs(pid);
      const probes = probe(`${base}/healthz`);
      const result = await load(base, () => path, {
        seconds: ctx.floodSeconds,
        warmupSeconds: 0,
        connections: CONNECTIONS,
      });
      const healthz = await probes.stop();
      const cpu = cpuMs(pid) - cpuBefore;
      const bytes = (await redisBytesSent(ctx.redisUrl)) - bytesBefore;
      const row = [
        `\`${path.replace(PARENT, '<p>')}\``,
        fmt.int(result.rps),
        `${fmt.ms(result.p50)} / ${fmt.ms(result.p99)}`,
        result.failures,
        `${fmt.ms(healthz.p50)} / ${fmt.ms(healthz.p99)} / ${fmt.ms(healthz.max)}`,
        healthz.failed,
        fmt.int((cpu * 1000) / Math.max(1, result.requests)),
        fmt.bytes(bytes),
        fmt.int(bytes / Math.max(1, result.requests)),
      ];
      log(`details: ${name} ${row.join(' | ')}`);
      rows.push(row);
    }
    await writeSection(
      'hostile-details',
      [
        runLine(
          `one process (\`ROLE=all\`, \`CACHE_FRESH_SECONDS=3600\`, \`RPC_WS=off\`, other settings ` +
            `default), a parent of ${fmt.int(SUBDOMAINS)} subdomains, warm; each route driven by ` +
            `${CONNECTIONS} autocannon connections from 127.0.0.1 for ${ctx.floodSeconds} s ` +
            `(\`--flood\`), \`/healthz\` probed every 50 ms from a process of its own meanwhile`,
        ),
        '',
        table(
          [
            'route (8 connections)',
            'req/s',
            'p50 / p99 ms',
            'not 2xx',
            '/healthz p50 / p99 / max ms',
            '/healthz not 200',
            'gateway CPU µs/req',
            'Redis sent (whole server)',
            'Redis bytes/req',
          ],
          rows,
        ),
        '',
        'Redis is shared with other work on this machine: its `total_net_output_bytes` counts ' +
          "every client's replies, so the bytes are an upper bound of the gateway's.",
      ].join('\n'),
    );
  } finally {
    await gateway?.kill('SIGKILL');
    await sim.close();
    await deleteKeysAt(ctx.redisUrl, prefix);
  }
}

export const detailsScenario = scenario('details', run);
