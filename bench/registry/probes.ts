/**
 * bench:registry's probes: the gateway asked over HTTP and timed, Redis measured, the simulator's
 * calls counted.
 */
import { Redis } from 'ioredis';
import type { RpcCallRecord } from '../../tools/rpc-sim/index.js';
import { quantile } from '../lib.js';
import type { ChangeKind } from './chain-truth.js';
import { HELIUS_CREDITS } from './options.js';

export type Answer = {
  status: number;
  ms: number;
  labels?: string[];
  owners?: Map<string, string>;
  /** `X-Cache` and `Age` (seconds) of a 200. */
  cache?: string;
  age?: number;
};

/**
 * `/subdomains/:parent` (or `/details`), timed; from the bench's own address, or as `client` (its
 * `X-Forwarded-For`, which the gateway believes with `TRUST_PROXY=1`).
 */
export async function ask(
  base: string,
  parent: string,
  details = false,
  client?: string,
): Promise<Answer> {
  const started = performance.now();
  try {
    const res = await fetch(`${base}/subdomains/${parent}${details ? '/details' : ''}`, {
      signal: AbortSignal.timeout(150_000),
      ...(client === undefined ? {} : { headers: { 'x-forwarded-for': client } }),
    });
    const body = (await res.json()) as { result?: unknown };
    const ms = performance.now() - started;
    if (res.status !== 200 || !Array.isArray(body.result)) return { status: res.status, ms };
    const label = { cache: res.headers.get('x-cache') ?? '', age: Number(res.headers.get('age')) };
    if (!details) return { status: 200, ms, labels: body.result as string[], ...label };
    const rows = body.result as Array<{ label: string; owner: string }>;
    return {
      status: 200,
      ms,
      ...label,
      labels: rows.map((r) => r.label),
      owners: new Map(rows.map((r) => [r.label, r.owner])),
    };
  } catch {
    return { status: 0, ms: performance.now() - started };
  }
}

/** The registry index's state as the API's `/readyz` says it (undefined: it says none). */
export async function indexState(base: string): Promise<string | undefined> {
  try {
    const res = await fetch(`${base}/readyz`);
    const body = (await res.json()) as {
      parts?: { index?: string };
      result?: { parts?: { index?: string } };
    };
    return body.result?.parts?.index ?? body.parts?.index;
  } catch {
    return undefined;
  }
}

/** Sum of `MEMORY USAGE` (exact) of the keys matching `pattern`, and how many there are. */
export async function keyBytes(
  redisUrl: string,
  pattern: string,
): Promise<{ keys: number; bytes: number }> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    let keys = 0;
    let bytes = 0;
    let cursor = '0';
    do {
      const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const key of batch) {
        keys++;
        bytes += Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
      }
    } while (cursor !== '0');
    return { keys, bytes };
  } finally {
    redis.disconnect();
  }
}

/** The build's own duration (`completedAt - startedAt` of its state hash), ms. */
export async function buildDuration(
  redisUrl: string,
  stateKey: string,
): Promise<number | undefined> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    const state = await redis.hgetall(stateKey);
    const took = Number(state.completedAt) - Number(state.startedAt);
    return Number.isFinite(took) && took >= 0 ? took : undefined;
  } finally {
    redis.disconnect();
  }
}

// ---------------------------------------------------------------------------------------------
// One mode.

export type Calls = Map<string, { calls: number; bytes: number }>;

/** Counts the simulator's calls by method while `counting` is set. */
export class CallTally {
  counting: Calls | undefined;
  onRead: (() => void) | undefined;
  record(call: RpcCallRecord): void {
    if (this.counting) {
      const row = this.counting.get(call.method) ?? { calls: 0, bytes: 0 };
      row.calls++;
      row.bytes += call.responseBytes;
      this.counting.set(call.method, row);
    }
    if (call.method === 'getProgramAccounts' || call.method === 'getProgramAccountsV2') {
      this.onRead?.();
    }
  }
  /** Counts from now into a new map, returned. */
  start(): Calls {
    this.counting = new Map();
    return this.counting;
  }
}

export const NO_CALLS: Calls = new Map();
export const credits = (calls: Calls) =>
  [...calls].reduce((sum, [method, row]) => sum + HELIUS_CREDITS(method) * row.calls, 0);
export const callsOf = (calls: Calls, method: string) => calls.get(method)?.calls ?? 0;
export const bytesOf = (calls: Calls) =>
  [...calls.values()].reduce((sum, row) => sum + row.bytes, 0);

/**
 * One kind of change of (d): the time each change took to show, how many never did, and how many
 * of the polls were answered other than 200 (a refused answer shows nothing, so a change whose
 * polls were all refused counts as never: this says why).
 */
export type Shown = {
  kind: ChangeKind;
  ms: number[];
  never: number;
  parents: string[];
  refused: number;
};

/**
 * A reader of its own per parent (an address in 10.3.0.0/16, as `X-Forwarded-For`): the parent's
 * users, not the bench's one address, whose cold-miss limit (c) and (f) spend on purpose. The same
 * parent gets the same reader.
 */
export function readers(): (parent: string) => string {
  const of = new Map<string, string>();
  return (parent) => {
    let client = of.get(parent);
    if (client === undefined) {
      const n = of.size + 1;
      client = `10.3.${(n >> 8) & 255}.${n & 255}`;
      of.set(parent, client);
    }
    return client;
  };
}

/** Many requests and what they cost: statuses, latency, the simulator's calls. */
export type Burst = {
  parents: number;
  answers: number;
  statuses: Map<number, number>;
  /** Answers 200 listing what the bench knows the chain holds (`[]` for a made-up parent). */
  right: number;
  p50: number;
  p99: number;
  calls: Calls;
};

/** Asks every path of `paths`, `concurrency` at a time from this one address, and tallies it. */
export async function burst(
  base: string,
  tally: CallTally,
  paths: readonly string[],
  concurrency: number,
  expected: (parent: string) => string[],
): Promise<Burst> {
  const calls = tally.start();
  const queue = [...paths];
  const answers: Array<{ parent: string; answer: Answer }> = [];
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let parent = queue.shift(); parent !== undefined; parent = queue.shift()) {
        answers.push({ parent, answer: await ask(base, parent) });
      }
    }),
  );
  tally.counting = undefined;
  const statuses = new Map<number, number>();
  let right = 0;
  for (const { parent, answer } of answers) {
    statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
    if (answer.status === 200 && same(answer.labels, expected(parent))) right++;
  }
  const latencies = Float64Array.from(answers.map((a) => a.answer.ms)).sort();
  return {
    parents: new Set(paths).size,
    answers: answers.length,
    statuses,
    right,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    calls: new Map(calls),
  };
}

export const same = (a: readonly string[] | undefined, b: readonly string[]) =>
  a !== undefined && a.length === b.length && a.every((v, i) => v === b[i]);
