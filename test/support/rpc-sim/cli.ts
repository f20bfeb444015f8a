/**
 * Runs the RPC simulator by hand with the demo chain:
 *
 *   npm run rpc:sim                       # http://127.0.0.1:8899
 *   RPC_SIM_PORT=9000 RPC_SIM_HOST=0.0.0.0 npm run rpc:sim
 *   RPC_SIM_VERBOSE=1 npm run rpc:sim     # also log every call
 *
 * Prints the URL and the demo names it holds; stops on SIGINT/SIGTERM (a second signal exits
 * at once).
 */
import { SimChain } from './chain.js';
import { seedDemoChain } from './demo.js';
import { startRpcSimulator } from './server.js';

function portFromEnv(value: string | undefined): number {
  if (value === undefined || value === '') return 8899;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`RPC_SIM_PORT must be a port number (0-65535), got ${JSON.stringify(value)}`);
  }
  return port;
}

const chain = new SimChain();
const seeded = seedDemoChain(chain);
const verbose = Boolean(process.env.RPC_SIM_VERBOSE);
const sim = await startRpcSimulator({
  chain,
  host: process.env.RPC_SIM_HOST || '127.0.0.1',
  port: portFromEnv(process.env.RPC_SIM_PORT),
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
lines.push(
  '',
  'Try:',
  `  curl -s ${sim.url} -H 'Content-Type: application/json' \\`,
  `    -d '{"jsonrpc":"2.0","id":1,"method":"getAccountInfo","params":["${seeded[0]?.key.toBase58() ?? ''}",{"encoding":"base64"}]}'`,
  '',
  'Ctrl-C to stop.',
);
console.log(lines.join('\n'));

let stopping = false;
const stop = (signal: NodeJS.Signals): void => {
  if (stopping) process.exit(1); // second signal: do not wait for close()
  stopping = true;
  console.log(`\n${signal}: closing ${sim.url}`);
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
