import type { Config } from '../src/core/config.js';
import type { Metrics } from '../src/core/metrics.js';
import type { EndpointSelector } from '../src/core/rpc/endpoint.js';
import type { RuntimeKit } from '../src/core/runtime/kit.js';
import { RpcClient } from './rpc/client.js';
import type { CreditMeter } from './rpc/credits.js';
import type { Agents } from './rpc/transport.js';
import { DecodeThread } from './sns/decode-thread.js';
import type { DiscoveryLane } from './sns/subdomain-discovery.js';

/** Longest label from the configured RPC: a reverse record holds at most about this much text. */
const DEFAULT_MAX_LABEL_BYTES = 1024 * 1024;

type LaneLimits = {
  retries: number;
  refreshMs?: number;
  maxResponseBytes: number;
  decodeMs: number;
  maxLabelBytes: number;
  maxAnswerBytes: number;
};

/**
 * The heap of a decode thread, in MiB: 24 times the largest reply, at least 64, at most 2048.
 * Within the bounds of worker/rpc/bounded-json.ts the worst body found (objects of one distinct key
 * each, at the value cap, padded with a long string) keeps about 10 times its bytes after the
 * parse, a little more during it; the limit must stay well above that, because a thread that
 * reaches its heap limit while it is being terminated aborts the whole process (V8's fatal
 * out-of-memory), not just itself.
 */
const decodeHeapMb = (maxResponseBytes: number) =>
  Math.min(2048, Math.max(64, Math.ceil((24 * maxResponseBytes) / (1024 * 1024))));

/** The worker's lanes (docs/design.md, "Replies from an RPC") and their decode threads. */
export type Lanes = {
  /** The configured endpoint's: its retries and bounds. */
  defaultLane: DiscoveryLane;
  /** `?rpc=` overrides': one retry, the override bounds, cut at `SUBDOMAINS_WAIT_MS`. */
  overrideLane: DiscoveryLane;
  /**
   * The registry index's build (`SUBDOMAIN_INDEX=registry`): the configured endpoint with its
   * bounds, but a decode thread of its own, so a refresh's decode never queues behind a page's.
   * Its thread starts only when a piece first decodes.
   */
  buildLane: DiscoveryLane;
  /** The lanes' decode threads, closed with the kit (and at once by a forced close of the jobs). */
  threads: DecodeThread[];
};

/**
 * Opens the configured endpoint's lane and the overrides' lane, each an RPC client over the
 * worker's `agents` with a decode thread of its own, bounded by its class's settings; their
 * threads close with `kit`.
 */
export function openLanes(
  kit: RuntimeKit,
  config: Config,
  deps: { metrics: Metrics; agents: Agents; credits: CreditMeter; endpoints: EndpointSelector },
): Lanes {
  const { metrics, agents, credits, endpoints } = deps;
  const lane = (limits: LaneLimits): DiscoveryLane => ({
    rpc: new RpcClient({
      metrics,
      agents,
      timeoutMs: config.RPC_TIMEOUT_MS,
      retries: limits.retries,
      maxResponseBytes: limits.maxResponseBytes,
      costs: config.RPC_CREDITS,
      credits,
      isTrusted: (endpoint) =>
        endpoint.kind === 'default' || endpoints.isAllowlisted(new URL(endpoint.url)),
    }),
    thread: new DecodeThread({
      heapMb: decodeHeapMb(limits.maxResponseBytes),
      taskMs: limits.decodeMs,
    }),
    maxLabelBytes: limits.maxLabelBytes,
    maxAnswerBytes: limits.maxAnswerBytes,
    refreshMs: limits.refreshMs,
  });
  const configured: LaneLimits = {
    retries: config.RPC_RETRIES,
    maxResponseBytes: config.RPC_MAX_RESPONSE_BYTES,
    decodeMs: config.RPC_DECODE_MS,
    maxLabelBytes: DEFAULT_MAX_LABEL_BYTES,
    maxAnswerBytes: config.RPC_MAX_RESPONSE_BYTES,
  };
  const defaultLane = lane(configured);
  const buildLane = lane(configured);
  // One retry at most: a server that fails twice is as likely to be slow on purpose as by accident.
  const overrideLane = lane({
    retries: Math.min(config.RPC_RETRIES, 1),
    // The request that asked has its answer by then: past it, the server only holds a slot.
    refreshMs: config.SUBDOMAINS_WAIT_MS,
    maxResponseBytes: config.RPC_OVERRIDE_MAX_RESPONSE_BYTES,
    decodeMs: config.RPC_OVERRIDE_DECODE_MS,
    maxLabelBytes: config.RPC_OVERRIDE_MAX_LABEL_BYTES,
    maxAnswerBytes: config.RPC_OVERRIDE_MAX_ANSWER_BYTES,
  });
  const threads = kit.closes(
    'worker decode threads',
    [defaultLane.thread, overrideLane.thread, buildLane.thread],
    async (all) => {
      await Promise.all(all.map((t) => t.close().catch(() => undefined)));
    },
  );
  return { defaultLane, overrideLane, buildLane, threads };
}
