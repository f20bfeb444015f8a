/**
 * What the worker logs when the RPC's websocket refuses the upgrade. The common cause is a
 * derived `RPC_WS_URL` (`RPC_URL` with ws(s) and its port + 1, as web3.js derives it) that lands
 * on a plain HTTP port, e.g. the simulator's own JSON-RPC port answering 405: the message names
 * the address tried and the settings that fix it, rather than a bare status.
 */

/**
 * The message of a refused websocket upgrade: the endpoint tried (scheme, host and port only: a
 * provider's API key lives in the path or query, and logs never carry it), the HTTP status, and
 * what to set.
 *
 * @param url the websocket URL the worker connected to (`RPC_WS_URL`, given or derived).
 * @param status the HTTP status the server answered the upgrade request with.
 * @returns e.g. `websocket upgrade refused by ws://127.0.0.1:8900 (HTTP 405): ...`.
 */
export function wsUpgradeRefusedMessage(url: string, status: number | undefined): string {
  return (
    `websocket upgrade refused by ${endpointOf(url)} (HTTP ${status ?? 'without a status'}): ` +
    'RPC_WS_URL, when unset, is derived from RPC_URL as ws(s) and its port + 1; set RPC_WS_URL ' +
    "to the provider's websocket URL, or RPC_WS=off to refresh by the clock"
  );
}

/** `scheme://host[:port]` of `url`, or a placeholder when it does not parse. */
function endpointOf(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}`;
  } catch {
    return 'the configured RPC_WS_URL';
  }
}
