/**
 * One process of the benchmark, in the role given as its argument, driven over IPC by bench/lib.ts:
 *
 * - `api`, `worker`: the gateway, as bench/gateway-child.ts starts it (through src/api/runtime.ts
 *   and worker/runtime.ts, configured from the environment like main.ts; logs go to stdout, which
 *   the bench discards). The worker's ready message carries the port of its `/metrics`.
 * - `baseline`: the naive server (Fastify calling the SDK on every request, no cache, as the SDK's
 *   reference proxy does).
 * - `ceiling`: Fastify answering constant JSON with the gateway's headers (`/ceiling/...`), and
 *   without them (`/bare/...`).
 * - `sim`: the loopback Solana RPC simulator of tools/rpc-sim, seeded with the demo chain.
 *
 * Every role answers `stats` (RSS, CPU time, worst event-loop delay since the last `resetLoop`),
 * `profileStart` and `profileStop` (a V8 CPU profile, written to the path given) and `stop`, as
 * bench/gateway-ipc.ts serves them (bench/gateway-child.ts, the compiled gateway, serves the same).
 */
import {
  findSubdomains,
  getDomainKeySync,
  getRecordV2Key,
  type Record as SnsRecord,
} from '@bonfida/spl-name-service';
import { Connection, PublicKey } from '@solana/web3.js';
import Fastify from 'fastify';
import { CORS_HEADERS } from '../src/core/http/cors.js';
import { seedDemoChain, SimChain, startRpcSimulator } from '../tools/rpc-sim/index.js';
import { type Handler, noCommands, portOf, serve } from './gateway-ipc.js';
import { seedParent, type SeedArgs } from './seed-parent.js';

/**
 * The constant answers of the ceiling routes: bodies as long as the gateway's real ones, and the
 * same headers with values of the same length (bench/run.ts checks both before measuring), so the
 * ceiling and the gateway put the same bytes on the wire and differ only in the work per request.
 */
const CEILING_KEY = { s: 'ok', result: 'GBrd6Q53eu1T2PiaQAtm92r3DwxmoGvZ2D6xjtVtN1Qt' };
const CEILING_KEY_HEADERS = {
  ...CORS_HEADERS,
  'cache-control': 'public, max-age=31536000, immutable',
  etag: '"1e9ddwr"',
};
const CEILING_LABELS = { s: 'ok', result: ['bullish', 'hollaaa', 'testing'] };
const CEILING_LABELS_HEADERS = {
  ...CORS_HEADERS,
  'cache-control': 'public, max-age=3600, stale-while-revalidate=82800, stale-if-error=82800',
  age: '0',
  'x-cache': 'HIT',
  etag: '"1fk5c4h"',
};

async function baselineRole(): Promise<void> {
  const rpcUrl = process.env.RPC_URL;
  if (!rpcUrl) throw new Error('RPC_URL is required');
  const connection = new Connection(rpcUrl, {
    commitment: 'confirmed',
    disableRetryOnRateLimit: true,
  });
  const app = Fastify({ routerOptions: { maxParamLength: 8192 } });
  type DerivationParams = { domain: string; record: string };
  app.get<{ Params: DerivationParams }>('/record-key-v2/:domain/:record', async (req) => {
    const domain = req.params.domain.trim().toLowerCase();
    const key = getRecordV2Key(`${domain}.sol`, req.params.record as SnsRecord);
    return { s: 'ok', result: key.toBase58() };
  });
  app.get<{ Params: { parent: string } }>('/subdomains/:parent', async (req) => {
    const parent = req.params.parent.trim().toLowerCase();
    const labels = await findSubdomains(connection, getDomainKeySync(parent).pubkey);
    return { s: 'ok', result: labels.sort() };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  serve({ port: portOf(app.server) }, noCommands, () => app.close());
}

/**
 * The ceiling: Fastify (no logger, no hooks) answering constant JSON, in a process of its own so
 * that no other server's garbage or code paths slow it down.
 */
async function ceilingRole(): Promise<void> {
  const app = Fastify({ routerOptions: { maxParamLength: 8192 } });
  app.get('/ceiling/:domain/:record', async (_req, reply) => {
    reply.headers(CEILING_KEY_HEADERS);
    return CEILING_KEY;
  });
  app.get('/ceiling/:parent', async (_req, reply) => {
    reply.headers(CEILING_LABELS_HEADERS);
    return CEILING_LABELS;
  });
  // The same bodies with Fastify's headers only: what the contract's headers cost on the wire.
  app.get('/bare/:domain/:record', async () => CEILING_KEY);
  app.get('/bare/:parent', async () => CEILING_LABELS);
  await app.listen({ port: 0, host: '127.0.0.1' });
  serve({ port: portOf(app.server) }, noCommands, () => app.close());
}

type CallSummary = { calls: number; byMethod: Record<string, number>; bytes: number };

async function simRole(): Promise<void> {
  const chain = new SimChain();
  seedDemoChain(chain);
  const sim = await startRpcSimulator({ chain });
  const handle: Handler = async (cmd, args) => {
    switch (cmd) {
      case 'seed':
        return seedParent(chain, args as SeedArgs).labels;
      case 'addSubdomains': {
        const { parent, labels } = args as { parent: string; labels: string[] };
        for (const l of labels) chain.addSubdomain(parent, l);
        return null;
      }
      case 'deleteSubdomain': {
        const { parent, label } = args as { parent: string; label: string };
        return chain.deleteSubdomain(parent, label);
      }
      case 'transferSubdomain': {
        const { parent, label, owner } = args as { parent: string; label: string; owner: string };
        chain.transferSubdomain(parent, label, new PublicKey(owner));
        return null;
      }
      case 'resetCalls':
        sim.resetCalls();
        return null;
      case 'calls': {
        const summary: CallSummary = { calls: sim.calls.length, byMethod: {}, bytes: 0 };
        for (const call of sim.calls) {
          summary.byMethod[call.method] = (summary.byMethod[call.method] ?? 0) + 1;
          summary.bytes += call.responseBytes;
        }
        return summary;
      }
      default:
        throw new Error(`unknown command ${cmd}`);
    }
  };
  serve({ url: sim.url, wsUrl: sim.wsUrl }, handle, () => sim.close());
}

const role = process.argv[2];
// The gateway's roles are bench/gateway-child.ts's, which starts the one in process.argv[2] as
// it loads: under tsx here, compiled with BENCH_CODE=dist, the same code either way.
const started =
  role === 'api' || role === 'worker'
    ? import('./gateway-child.js')
    : role === 'baseline'
      ? baselineRole()
      : role === 'ceiling'
        ? ceilingRole()
        : role === 'sim'
          ? simRole()
          : Promise.reject(new Error(`unknown role ${role}`));
started.catch((err: unknown) => {
  process.stderr.write(`bench child ${role}: ${String(err)}\n`);
  process.exit(1);
});
