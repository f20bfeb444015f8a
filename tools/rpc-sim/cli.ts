/**
 * Runs the RPC simulator by hand with the demo chain:
 *
 *   npm run rpc:sim                       # http://127.0.0.1:8899, ws://127.0.0.1:8900
 *   RPC_SIM_PORT=9000 RPC_SIM_HOST=0.0.0.0 npm run rpc:sim   # websocket on 9001
 *   RPC_SIM_PORT=0 npm run rpc:sim        # both ports ephemeral
 *   RPC_SIM_VERBOSE=1 npm run rpc:sim     # also log every call
 *   npm run rpc:sim -- --background-writes 20   # 20 unrelated name-program writes a second
 *   RPC_SIM_BACKGROUND_WRITES=20 npm run rpc:sim # the same
 *   npm run rpc:sim -- --tx-lag-ms 500    # getTransaction answers null for 500 ms
 *   npm run rpc:sim -- --http-lag-ms 500  # HTTP reads see the chain as of 500 ms ago
 *   npm run rpc:sim -- --refuse getProgramAccountsV2   # -32601, as most providers answer
 *   npm run rpc:sim -- --registry target  # the benchmark's registry (136,000 accounts)
 *   npm run rpc:sim -- --top-level 1000 --subdomains 300 --subdomain-parents 50 --seed 3
 *
 * The websocket port is the HTTP port + 1, as solana-test-validator and web3.js have it. Prints the
 * URLs, demo names and curl examples; stops on SIGINT/SIGTERM (a second signal exits at once).
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { PublicKey } from '@solana/web3.js';
import { NAME_PROGRAM_ID } from '@bonfida/spl-name-service';
import { SimChain } from './chain.js';
import { seedDemoChain } from './demo.js';
import { SIM_ONLY_METHODS, SUPPORTED_METHODS } from './methods.js';
import { seedRegistry } from './registry.js';
import type { RegistryOptions } from './registry.js';
import { startRpcSimulator } from './server.js';

function portFromEnv(value: string | undefined): number {
  if (value === undefined || value === '') return 8899;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`RPC_SIM_PORT must be a port number (0-65535), got ${JSON.stringify(value)}`);
  }
  return port;
}

/** HTTP port + 1, or ephemeral when `port` is. */
function wsPortFor(port: number): number {
  if (port === 0) return 0;
  if (port === 65535)
    throw new Error('RPC_SIM_PORT must be below 65535 (the websocket uses port + 1)');
  return port + 1;
}

/** A number >= 0 from the flag, else the environment, else 0; throws naming both otherwise. */
function rateOption(flag: string | undefined, env: string, name: string): number {
  const value = flag ?? process.env[env];
  if (value === undefined || value === '') return 0;
  const number = Number(value);
  if (!Number.isFinite(number) || number < 0) {
    throw new Error(`--${name} / ${env} must be a number >= 0, got ${JSON.stringify(value)}`);
  }
  return number;
}

/** The registry `--registry target` writes: the registry benchmark's (BENCHMARKS.md). */
const TARGET_REGISTRY = {
  topLevel: 50_000,
  subdomains: 10_000,
  parents: 3_000,
  largest: 2_000,
  records: 10_000,
  v1Records: 5_000,
  orphanReverses: 1_000,
} as const satisfies RegistryOptions;

/** A whole number >= 0 from a flag, or undefined when absent; throws naming the flag. */
function countOption(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (value.trim() === '' || !Number.isSafeInteger(number) || number < 0) {
    throw new Error(`--${name} must be a whole number >= 0, got ${JSON.stringify(value)}`);
  }
  return number;
}

const { values: args } = parseArgs({
  options: {
    'background-writes': { type: 'string' },
    'tx-lag-ms': { type: 'string' },
    'http-lag-ms': { type: 'string' },
    refuse: { type: 'string' },
    registry: { type: 'string' },
    'top-level': { type: 'string' },
    subdomains: { type: 'string' },
    'subdomain-parents': { type: 'string' },
    'largest-parent': { type: 'string' },
    records: { type: 'string' },
    'v1-records': { type: 'string' },
    'orphan-reverses': { type: 'string' },
    seed: { type: 'string' },
  },
});
const backgroundWrites = rateOption(
  args['background-writes'],
  'RPC_SIM_BACKGROUND_WRITES',
  'background-writes',
);
const txLagMs = rateOption(args['tx-lag-ms'], 'RPC_SIM_TX_LAG_MS', 'tx-lag-ms');
const httpLagMs = rateOption(args['http-lag-ms'], 'RPC_SIM_HTTP_LAG_MS', 'http-lag-ms');
const refused = (args.refuse ?? '')
  .split(',')
  .map((m) => m.trim())
  .filter((m) => m !== '');
for (const method of refused) {
  if (!SUPPORTED_METHODS.includes(method)) {
    throw new Error(`--refuse takes read methods (${SUPPORTED_METHODS.join(', ')}), not ${method}`);
  }
}
if (args.registry !== undefined && args.registry !== 'target') {
  throw new Error(`--registry takes "target", got ${JSON.stringify(args.registry)}`);
}
const registryFlags = {
  topLevel: countOption(args['top-level'], 'top-level'),
  subdomains: countOption(args.subdomains, 'subdomains'),
  parents: countOption(args['subdomain-parents'], 'subdomain-parents'),
  largest: countOption(args['largest-parent'], 'largest-parent'),
  records: countOption(args.records, 'records'),
  v1Records: countOption(args['v1-records'], 'v1-records'),
  orphanReverses: countOption(args['orphan-reverses'], 'orphan-reverses'),
};
const registryAsked =
  args.registry !== undefined || Object.values(registryFlags).some((v) => v !== undefined);
const registryOptions: RegistryOptions | undefined = registryAsked
  ? {
      ...(args.registry === 'target' ? TARGET_REGISTRY : { topLevel: 0 }),
      ...Object.fromEntries(Object.entries(registryFlags).filter(([, v]) => v !== undefined)),
      seed: countOption(args.seed, 'seed') ?? 1,
    }
  : undefined;

const chain = new SimChain();
const seeded = seedDemoChain(chain);
const seedStarted = performance.now();
const registry = registryOptions && seedRegistry(chain, registryOptions);
const seedMs = performance.now() - seedStarted;
const verbose = Boolean(process.env.RPC_SIM_VERBOSE);
const port = portFromEnv(process.env.RPC_SIM_PORT);
const sim = await startRpcSimulator({
  chain,
  host: process.env.RPC_SIM_HOST || '127.0.0.1',
  port,
  wsPort: wsPortFor(port),
  txLagMs,
  httpLagMs,
  refusedMethods: refused,
  backgroundWritesPerSecond: backgroundWrites,
  onCall: verbose
    ? (call) =>
        console.log(
          `${new Date().toISOString()} ${call.method || '(invalid)'} ${call.responseBytes} B` +
            (call.fault ? ` fault=${call.fault}` : ''),
        )
    : undefined,
});

const lines = [
  `Solana JSON-RPC simulator listening on ${sim.url} (${chain.size} accounts)`,
  `Websocket (accountSubscribe, programSubscribe, logsSubscribe) on ${sim.wsUrl}`,
  backgroundWrites > 0
    ? `Background: ${backgroundWrites} unrelated name-program writes a second (--background-writes)`
    : 'Background writes: off (--background-writes <per second> or RPC_SIM_BACKGROUND_WRITES)',
  ...(txLagMs > 0 ? [`Transactions unknown to HTTP reads for ${txLagMs} ms (--tx-lag-ms)`] : []),
  ...(httpLagMs > 0 ? [`HTTP reads see the chain as of ${httpLagMs} ms ago (--http-lag-ms)`] : []),
  ...(refused.length > 0 ? [`Refused with -32601 (--refuse): ${refused.join(', ')}`] : []),
  ...(registry ? registryLines(registry, registryOptions?.seed ?? 1, seedMs) : []),
  '',
  'Demo names (findSubdomains lists only subdomains with a name account and a reverse record):',
];
for (const d of seeded) {
  lines.push(`  ${d.name}.sol  ${d.key.toBase58()}  (${d.note})`);
  if (d.subdomains.length) lines.push(`    subdomains:             ${d.subdomains.join(', ')}`);
  if (d.withoutReverse.length) {
    lines.push(`    without reverse record: ${d.withoutReverse.join(', ')}`);
  }
  if (d.orphanReverses.length) {
    lines.push(`    orphan reverse records: ${d.orphanReverses.join(', ')}`);
  }
}
const newOwner = new PublicKey(randomBytes(32)).toBase58();
const demoKey = seeded.find((d) => d.name === 'demo')?.key.toBase58() ?? '';
const curl = (body: string): string[] => [
  `  curl -s ${sim.url} -H 'Content-Type: application/json' \\`,
  `    -d '${body}'`,
];
lines.push(
  '',
  'Try:',
  ...curl(
    `{"jsonrpc":"2.0","id":1,"method":"getAccountInfo","params":["${seeded[0]?.key.toBase58() ?? ''}",{"encoding":"base64"}]}`,
  ),
  '',
  'Watch demo.sol subdomains (name accounts and reverse records with parent demo.sol):',
  `  npx wscat -c ${sim.wsUrl}`,
  '  then send:',
  `  {"jsonrpc":"2.0","id":1,"method":"programSubscribe","params":["${NAME_PROGRAM_ID.toBase58()}",{"encoding":"base64","filters":[{"memcmp":{"offset":0,"bytes":"${demoKey}"}}],"dataSlice":{"offset":0,"length":96}}]}`,
  '',
  `Simulator-only methods (no real node has them): ${SIM_ONLY_METHODS.join(', ')}`,
  ...curl('{"jsonrpc":"2.0","id":1,"method":"simAddSubdomain","params":["demo","delta"]}'),
  '    # → {"subdomain":"<name account>","reverse":"<reverse record>"}',
  ...curl('{"jsonrpc":"2.0","id":1,"method":"simDeleteSubdomain","params":["demo","delta"]}'),
  '    # → true if either account existed',
  ...curl(
    `{"jsonrpc":"2.0","id":1,"method":"simTransferSubdomain","params":["demo","alpha","${newOwner}"]}`,
  ),
  '    # → {"subdomain":"<name account>","signature":"<transaction>"}',
  '',
  "Follow the name program (each write is a transaction with the program's logs):",
  `  {"jsonrpc":"2.0","id":1,"method":"logsSubscribe","params":[{"mentions":["${NAME_PROGRAM_ID.toBase58()}"]},{"commitment":"confirmed"}]}`,
  ...curl(
    '{"jsonrpc":"2.0","id":1,"method":"getTransaction","params":["<signature>",{"encoding":"json","commitment":"confirmed","maxSupportedTransactionVersion":0}]}',
  ),
  '',
  'Ctrl-C to stop.',
);
console.log(lines.join('\n'));

/** What `--registry` and its counts wrote, and a few names to try. */
function registryLines(written: NonNullable<typeof registry>, seed: number, ms: number): string[] {
  const withSubdomains = [...written.subdomains.keys()];
  const without = written.names.find((name) => !written.subdomains.has(name));
  const listed = [...written.subdomains.values()].reduce((sum, labels) => sum + labels.length, 0);
  return [
    `Registry (seed ${seed}): ${written.accounts} accounts in ${(ms / 1000).toFixed(1)} s: ` +
      `${written.names.length} top-level names, ${listed} subdomains under ` +
      `${withSubdomains.length} parents, each with its reverse record, and the records and ` +
      'orphan reverse records asked for',
    ...(written.largestParent
      ? [
          `  largest parent: ${written.largestParent}.sol ` +
            `(${written.subdomains.get(written.largestParent)?.length ?? 0} subdomains)`,
        ]
      : []),
    ...(withSubdomains[1] ? [`  a parent: ${withSubdomains[1]}.sol`] : []),
    ...(without ? [`  a name without subdomains: ${without}.sol`] : []),
  ];
}

let stopping = false;
const stop = (signal: NodeJS.Signals): void => {
  if (stopping) process.exit(1); // second signal: do not wait for close()
  stopping = true;
  console.log(`\n${signal}: closing ${sim.url} and ${sim.wsUrl}`);
  sim.close().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
