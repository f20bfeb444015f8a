/** What the demo prints, apart from its process management (tests read it). */
import { shownUrl, type DemoRedis } from './redis.js';

/** Said when the worker does not follow the chain in time: the demo goes on without it. */
export const NOT_FOLLOWING =
  'the worker does not follow the chain yet: a subdomain created now shows once its list is refreshed';

/** What to open and try, for the ports in use. */
export function banner(api: string, metrics: string, sim: string, redis: DemoRedis): string {
  const host = (url: string) => new URL(url).host.replace('127.0.0.1', 'localhost');
  const [a, s] = [host(api), host(sim)];
  const add = `{"jsonrpc":"2.0","id":1,"method":"simAddSubdomain","params":["67679","fresh"]}`;
  return [
    '',
    `sns-gateway demo: the API and the worker on a simulated Solana chain, Redis at ${shownUrl(redis.url)}${redis.process ? ' (started for the demo)' : ''}`,
    '',
    'Open:',
    `  http://${a}/          the try-it page: a parent's subdomains, their owners, live`,
    `  http://${a}/docs      the API reference; its "Try it out" answers on this chain`,
    `  http://${host(metrics)}/metrics   the worker's metrics: RPC calls, credits, the chain followed`,
    '',
    'Try:',
    `  curl -s ${a}/subdomains/67679`,
    `  curl -s ${a}/record-key-v2/bonfida/SOL`,
    `  curl -s ${s} -H 'Content-Type: application/json' -d '${add}'`,
    `  curl -s ${a}/subdomains/67679`,
    '',
    'The third creates the subdomain fresh.67679 on the chain; within a second or two the fourth',
    'lists it, with no getProgramAccounts: the worker follows the chain. Ctrl-C stops everything.',
    '',
  ].join('\n');
}
