/**
 * The log line of a refused websocket upgrade, usually a derived `RPC_WS_URL` (port + 1) landing
 * on a plain HTTP port. Names scheme, host and port only (API keys live in path or query), the
 * status, and what to set.
 */
export function wsUpgradeRefusedMessage(url: string, status: number | undefined): string {
  return (
    `websocket upgrade refused by ${endpointOf(url)} (HTTP ${status ?? 'without a status'}): ` +
    'RPC_WS_URL, when unset, is derived from RPC_URL as ws(s) and its port + 1; set RPC_WS_URL ' +
    "to the provider's websocket URL, or RPC_WS=off to refresh by the clock"
  );
}

/** `scheme://host[:port]`, or a placeholder. */
function endpointOf(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}`;
  } catch {
    return 'the configured RPC_WS_URL';
  }
}
