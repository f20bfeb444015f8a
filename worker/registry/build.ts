import { setImmediate, setTimeout as sleep } from 'node:timers/promises';
import { Queue, Worker, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { PieceMember, RegistryIndex } from '../../src/core/cache/registry-index.js';
import type { FollowStatus } from '../../src/core/cache/follow-status.js';
import type { RedisClient } from '../../src/core/redis.js';
import type { RpcEndpoint } from '../../src/core/rpc/endpoint.js';
import type { CreditBudget } from '../../src/core/rpc/budget.js';
import { isSlot, type SlotClock } from '../../src/core/rpc/slot.js';
import { REVERSE_LOOKUP_CLASS, reverseKeyFromDomainKey, toBase58 } from '../../src/core/sns/pda.js';
import { malformed, RpcCallError } from '../rpc/envelope.js';
import { NAME_PROGRAM } from '../follow/stream.js';
import { subdomainKey } from '../sns/change.js';
import { HEADER_LEN } from '../sns/discovery-decode.js';
import { accountsInBatches, type DiscoveryLane } from '../sns/subdomain-discovery.js';

/** BullMQ queue of the index's bootstrap pieces (`<prefix>:registry-build:*`). */
export const REGISTRY_BUILD_QUEUE = 'registry-build';

/**
 * The shards of a build: the reverse records whose parent key starts with each byte (`00`..`ff`).
 * Shard `00` also holds every top-level name's reverse record (parent all zeros): it is read with
 * a third filter, the subdomain text's leading NUL at byte 100, which no top-level text has.
 */
export const SHARDS: readonly string[] = Array.from({ length: 256 }, (_, i) =>
  i.toString(16).padStart(2, '0'),
);

/** Reverse-text bytes read inline by a piece; longer texts are completed by a read of their own. */
export const PIECE_TEXT_BYTES = 64;
/** The pieces' `dataSlice`: the parent, then up to the text's first {@link PIECE_TEXT_BYTES} bytes. */
export const PIECE_SLICE = Object.freeze({ offset: 0, length: HEADER_LEN + 4 + PIECE_TEXT_BYTES });
/** Accounts per `getProgramAccountsV2` page (the providers' most is 10,000). */
export const PAGE_LIMIT = 10_000;
/** Tries of a piece (with exponential back-off from {@link PIECE_BACKOFF_MS}). */
export const PIECE_ATTEMPTS = 12;
export const PIECE_BACKOFF_MS = 2_000;
/**
 * Longest a piece stands aside, before each page, while refresh jobs wait to be taken: the build
 * is background work and yields to the refreshes that users wait on, but is never stopped for good.
 */
export const PIECE_YIELD_MS = 5_000;
/** Records of a page checked between two turns of the event loop. */
const DERIVE_CHUNK = 500;
/** How often a piece standing aside looks again at the refresh jobs waiting, in ms. */
export const PIECE_YIELD_POLL_MS = 100;

export type PieceJob = { run: number; shard: string };

export type BuildDeps = {
  index: RegistryIndex;
  lane: DiscoveryLane;
  endpoint: RpcEndpoint;
  slots: Pick<SlotClock, 'observe'>;
  /** Bootstraps are proactive spend: past the soft threshold they wait (docs/design.md, "Budget"). */
  budget?: Pick<CreditBudget, 'state'>;
  /** The follow status: a piece is read only while the stream is whole-program and healthy. */
  followStatus: () => Promise<FollowStatus | null>;
  /**
   * Refresh jobs of the configured endpoint waiting to be taken (the refresh queue's `wait` and
   * `prioritized` counts): while some wait, a piece reads no page ({@link PIECE_YIELD_MS}).
   */
  refreshWaiting?: () => Promise<number>;
  logger: Logger;
  now?: () => number;
};

/**
 * Waits, up to {@link PIECE_YIELD_MS}, while refresh jobs wait to be taken: the build's scans and a
 * refresh's share the provider's rate limit and this process, and a user waits on the refresh.
 * A count that cannot be read does not hold the build.
 */
async function standAside(deps: BuildDeps): Promise<void> {
  const waiting = deps.refreshWaiting;
  if (!waiting) return;
  const until = Date.now() + PIECE_YIELD_MS;
  while (Date.now() < until && (await waiting().catch(() => 0)) > 0) {
    await sleep(PIECE_YIELD_POLL_MS);
  }
}

/** Whether the provider refused the method (-32601): V2 pagination is then not offered. */
const refused = (err: unknown): boolean =>
  err instanceof RpcCallError && /JSON-RPC error -32601 /.test(err.message);

/** The filters of a shard's reverse records. */
export function shardFilters(shard: string): object[] {
  const byte = Number.parseInt(shard, 16);
  const filters: object[] = [
    { memcmp: { offset: 64, bytes: toBase58(REVERSE_LOOKUP_CLASS) } },
    { memcmp: { offset: 0, bytes: toBase58(Uint8Array.of(byte)) } },
  ];
  if (byte === 0)
    filters.push({ memcmp: { offset: HEADER_LEN + 4, bytes: toBase58(Uint8Array.of(0)) } });
  return filters;
}

type Page = {
  slot: number;
  accounts: Array<{ pubkey: string; data: string }>;
  next: string | null;
};

/** A page of `getProgramAccounts[V2]` as sent: accounts, slot, pagination key. */
function pageOf(result: unknown, v2: boolean): Page {
  const bad = (why: string) => malformed(`registry piece: ${why}`);
  if (typeof result !== 'object' || result === null) throw bad('no result');
  const r = result as { context?: { slot?: unknown }; value?: unknown };
  // V2 answers `{accounts, paginationKey, context?}`, or, with context, `{context, value: {...}}`.
  let body: unknown = v2 ? (r.value ?? result) : r.value;
  const slot = r.context?.slot;
  if (!isSlot(slot)) throw bad('no context slot');
  let next: string | null = null;
  if (v2) {
    const b = body as { accounts?: unknown; paginationKey?: unknown };
    next = typeof b.paginationKey === 'string' && b.paginationKey !== '' ? b.paginationKey : null;
    body = b.accounts;
  }
  if (!Array.isArray(body)) throw bad('no account list');
  const accounts: Page['accounts'] = [];
  for (const item of body as Array<{ pubkey?: unknown; account?: { data?: unknown } }>) {
    const data = item?.account?.data;
    if (typeof item?.pubkey !== 'string' || !Array.isArray(data) || typeof data[0] !== 'string') {
      throw bad('an account of the wrong shape');
    }
    accounts.push({ pubkey: item.pubkey, data: data[0] });
  }
  return { slot, accounts, next };
}

/**
 * The subdomain reverse records of one page: each one's parent key, label and the subdomain name
 * account derived from it (checked: its reverse key must be the record's, as `findSubdomains`
 * pairs them). Texts cut at the slice are returned apart, to read whole.
 */
export function reverseRecordsOf(accounts: Page['accounts']): {
  found: Array<Omit<PieceMember, 'owner'>>;
  cut: string[];
} {
  const found: Array<Omit<PieceMember, 'owner'>> = [];
  const cut: string[] = [];
  for (const { pubkey, data } of accounts) {
    const bytes = Buffer.from(data, 'base64');
    if (bytes.length < HEADER_LEN + 4) continue;
    const parent = bytes.subarray(0, 32);
    if (parent.every((b) => b === 0)) continue;
    const len = bytes.readUInt32LE(HEADER_LEN);
    const text = bytes.subarray(HEADER_LEN + 4);
    if (len > text.length) {
      cut.push(pubkey);
      continue;
    }
    const label = text.subarray(0, len).toString('utf8').replace(/^\0/, '');
    if (!label) continue;
    const account = subdomainKey(label, parent);
    if (toBase58(reverseKeyFromDomainKey(account, parent)) !== pubkey) continue;
    found.push({ parentKey: toBase58(parent), account, reverse: pubkey, label });
  }
  return { found, cut };
}

/**
 * Reads one shard of build `run` and writes it, page by page (docs/design.md, "The registry
 * index"): `getProgramAccountsV2` pages where the provider has it, else one `getProgramAccounts`;
 * each page at its context slot, the owners of its subdomains read at that slot or later. A piece
 * already done, or of a build no longer current, returns at once.
 *
 * @returns the members written, or null when skipped.
 * @throws when the stream is not followed, the budget is past its soft threshold, or a read fails
 *   (BullMQ retries with back-off).
 */
export async function buildPiece(deps: BuildDeps, job: PieceJob): Promise<number | null> {
  const { index, lane, endpoint } = deps;
  const state = await index.state();
  if (state.run !== job.run || state.status !== 'building') return null;
  if (await index.shardDone(job.run, job.shard)) return null;
  if ((deps.budget?.state() ?? 'normal') !== 'normal') {
    throw new Error('registry piece: the credit budget is past its soft threshold');
  }
  const status = await deps.followStatus();
  const now = (deps.now ?? Date.now)();
  if (!status || status.mode !== 'program' || now >= status.healthyUntil) {
    throw new Error('registry piece: the stream is not followed whole; waiting');
  }
  const config = {
    encoding: 'base64',
    commitment: 'confirmed',
    withContext: true,
    filters: shardFilters(job.shard),
    dataSlice: PIECE_SLICE,
  };
  let v2 = true;
  let paginationKey: string | null = null;
  let minContextSlot: number | undefined;
  let total = 0;
  for (;;) {
    let page: Page;
    await standAside(deps);
    const params = {
      ...config,
      ...(minContextSlot === undefined ? {} : { minContextSlot }),
    };
    if (v2) {
      try {
        const result = await lane.rpc.call<unknown>(
          endpoint,
          'getProgramAccountsV2',
          [
            NAME_PROGRAM,
            { ...params, limit: PAGE_LIMIT, ...(paginationKey ? { paginationKey } : {}) },
          ],
          { decode: lane.thread.envelope<unknown>() },
        );
        page = pageOf(result, true);
      } catch (err) {
        if (!refused(err) || paginationKey !== null) throw err;
        v2 = false;
        continue;
      }
    } else {
      const result = await lane.rpc.call<unknown>(
        endpoint,
        'getProgramAccounts',
        [NAME_PROGRAM, params],
        {
          decode: lane.thread.envelope<unknown>(),
        },
      );
      page = pageOf(result, false);
    }
    deps.slots.observe(page.slot);
    minContextSlot = Math.max(minContextSlot ?? page.slot, page.slot);
    const found: Array<Omit<PieceMember, 'owner'>> = [];
    const cut: string[] = [];
    // Two derivations a record, on this thread: a page is cut so refreshes' callbacks run between.
    for (let at = 0; at < page.accounts.length; at += DERIVE_CHUNK) {
      if (at > 0) await setImmediate();
      const some = reverseRecordsOf(page.accounts.slice(at, at + DERIVE_CHUNK));
      found.push(...some.found);
      cut.push(...some.cut);
    }
    const long = await readLongTexts(lane, endpoint, cut, page.slot);
    found.push(...long);
    const { members, slot: ownersSlot } = await ownersOf(lane, endpoint, found, page.slot);
    const last = page.next === null;
    const written = await index.writePiece(
      job.run,
      last ? job.shard : undefined,
      page.slot,
      ownersSlot,
      members,
    );
    if (written === null) return null;
    total += written.written;
    if (last) return total;
    paginationKey = page.next;
  }
}

/** Owners of the found subdomains (`getMultipleAccounts`, bytes 0..64) at `slot` or later. */
async function ownersOf(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  found: ReadonlyArray<Omit<PieceMember, 'owner'>>,
  slot: number,
): Promise<{ members: PieceMember[]; slot: number }> {
  type Reply = { context?: { slot?: unknown }; value?: Array<{ data?: unknown } | null> };
  const batches = await accountsInBatches<Reply>(
    lane,
    endpoint,
    found.map((f) => f.account),
    {
      dataSlice: { offset: 0, length: 64 },
      minContextSlot: slot,
      decode: () => lane.thread.envelope<Reply>(),
    },
  );
  const members: PieceMember[] = [];
  let read = slot;
  let i = 0;
  for (const { result } of batches) {
    const at = result.context?.slot;
    if (isSlot(at)) read = Math.max(read, at);
    for (const entry of result.value ?? []) {
      const f = found[i++];
      if (!f) break;
      const data = (entry?.data as unknown[] | undefined)?.[0];
      const head = typeof data === 'string' ? Buffer.from(data, 'base64') : undefined;
      const owner =
        head && head.length >= 64 && toBase58(head.subarray(0, 32)) === f.parentKey
          ? toBase58(head.subarray(32, 64))
          : null;
      members.push({ ...f, owner });
    }
  }
  return { members, slot: read };
}

/** Reverse records whose text was cut at the slice, read whole (up to the lane's label bound). */
async function readLongTexts(
  lane: DiscoveryLane,
  endpoint: RpcEndpoint,
  keys: readonly string[],
  slot: number,
): Promise<Array<Omit<PieceMember, 'owner'>>> {
  if (keys.length === 0) return [];
  type Reply = { value?: Array<{ data?: unknown } | null> };
  const batches = await accountsInBatches<Reply>(lane, endpoint, keys, {
    dataSlice: { offset: 0, length: HEADER_LEN + 4 + 1 + lane.maxLabelBytes },
    minContextSlot: slot,
    decode: () => lane.thread.envelope<Reply>(),
  });
  const accounts: Page['accounts'] = [];
  for (const { batch, result } of batches) {
    (result.value ?? []).forEach((entry, i) => {
      const data = (entry?.data as unknown[] | undefined)?.[0];
      if (typeof data === 'string') accounts.push({ pubkey: batch[i] as string, data });
    });
  }
  return reverseRecordsOf(accounts).found;
}

/** The queue of pieces. */
export function createRegistryBuildQueue(connection: RedisClient, prefix: string): Queue<PieceJob> {
  return new Queue<PieceJob>(REGISTRY_BUILD_QUEUE, { connection, prefix });
}

/**
 * The BullMQ worker running pieces, one at a time (a bootstrap is paced, not raced), on a queue
 * and a connection of its own: a refresh job never waits behind a piece (docs/design.md, "The
 * registry index").
 */
export function createRegistryBuildWorker(
  connection: RedisClient,
  prefix: string,
  deps: BuildDeps,
  onError: (err: Error) => void,
): Worker<PieceJob> {
  const worker = new Worker<PieceJob>(
    REGISTRY_BUILD_QUEUE,
    async (job: Job<PieceJob>) => buildPiece(deps, job.data),
    { connection, prefix, concurrency: 1 },
  );
  worker.on('error', onError);
  return worker;
}

/**
 * Starts the index's build when none is under way or the index fell behind (`force`), and queues
 * every piece of the build under way: job ids are `<run>-<shard>`, so queueing again after a
 * restart adds only what is missing, and a piece done is skipped by its progress in Redis.
 *
 * @returns the build under way.
 */
export async function superviseBuild(
  index: RegistryIndex,
  queue: Queue<PieceJob>,
  opts: { status: FollowStatus | null; now?: number; logger: Logger },
): Promise<{ run: number; status: string }> {
  const now = opts.now ?? Date.now();
  const { status } = opts;
  const followed = status !== null && status.mode === 'program' && now < status.healthyUntil;
  let state = await index.state();
  // The stream missed something it could not heal since the build began: what it built may lack it.
  const behind =
    state.status === 'behind' ||
    ((state.status === 'complete' || state.status === 'building') &&
      status !== null &&
      status.epoch > state.startedAt);
  if (followed && (state.status === 'none' || behind)) {
    const { run, started } = await index.start(SHARDS.length, behind, now);
    if (started) opts.logger.info({ run, rebuild: behind }, 'registry: a build begins');
    state = await index.state();
  }
  if (state.status === 'building') {
    const done = new Set(await index.shardsDone(state.run));
    await queue.addBulk(
      SHARDS.filter((shard) => !done.has(shard)).map((shard) => ({
        name: 'piece',
        data: { run: state.run, shard },
        opts: {
          jobId: `${state.run}-${shard}`,
          attempts: PIECE_ATTEMPTS,
          backoff: { type: 'exponential', delay: PIECE_BACKOFF_MS },
          removeOnComplete: true,
          removeOnFail: true,
        },
      })),
    );
  }
  return { run: state.run, status: state.status };
}
